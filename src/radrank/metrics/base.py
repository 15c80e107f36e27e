"""The metric contract: one object per metric that answers every question the workflow asks.

A metric is an instance of a :class:`Metric` subclass, in one module, registered by name in
:mod:`radrank.metrics`. It declares, as class attributes:

* ``name``, ``description`` and ``family`` (its environment: ``envs/requirements/<family>.in``);
* ``columns`` — the per-sample columns ``score`` returns (besides ``sample_id``), and ``nan_columns``
  — those that may be NaN, with the reason in ``reason_column`` when the metric explains it;
* ``leaves`` — the numbers it puts on a leaderboard and how they aggregate (below);
* ``failures`` — for an LLM judge, its :class:`FailureAccounting` (per-pair failure kind and attempts columns,
  the leaf and scale the failure policies rank by);
* ``requires`` — metrics whose per-sample scores it reads (RadCliQ reads four);
* ``Settings`` — a frozen, typed :class:`radrank.settings.Settings` class: every setting, its
  default, its type, and whether it changes scores (``scored``) or only speed (``speed``);
* ``packages`` (versions recorded in provenance), ``version`` (bumped when radrank's implementation
  changes numbers), ``board`` (its leaderboard columns) and ``explained_by`` (columns the report's
  drill-down reads for :meth:`Metric.explain`);
* ``prepares_references`` — a lexical metric that reads the group's references as prepared once
  (``inputs["references"]``: :func:`prepared_references`);

and answers, for a :class:`Settings` instance ``s``: :meth:`env`, :meth:`gpus`, :meth:`resources`,
:meth:`weights` (what it will load: the workflow checks exactly these before anything starts, the
job resolves exactly these), :meth:`identity` (what a rule's identity holds: version and the
scoring settings), :meth:`explain` and :meth:`score` — one signature for every metric:
``score(pairs, settings, inputs, runtime) -> DataFrame`` of ``sample_id`` + ``columns``, one row
per pair, in the pairs' order; ``inputs`` holds the required metrics' scores, ``runtime`` is the
:class:`radrank.runtime.Runtime` (resolution, the per-process model cache).

A *leaf* is one number on the leaderboard (e.g. ``rougeL`` or corpus ``bleu4``). Every leaf is a
function of column sums of per-sample *sufficient statistics*:

* a mean leaf's statistics are (value, 1) over the samples whose value is finite,
  so its estimate is sum(value) / count;
* a corpus leaf names its statistic columns and a function of their totals
  (corpus BLEU-4 from clipped n-gram matches and lengths; CheXbert F1 from
  per-label confusion counts).

Because a bootstrap resample is a vector of per-sample counts w, every leaf on
every resample is ``leaf.value(w @ S)``: exact, and no metric is re-run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, ClassVar, NamedTuple

import numpy as np

from radrank.settings import NoSettings
from radrank.settings import Settings as SettingsBase


@dataclass(frozen=True)
class Resources:
    """What one scoring job needs; the SLURM profile reads these (GPUs: :meth:`Metric.gpus`)."""

    mem_mb: int = 2000
    runtime_min: int = 30
    threads: int = 1
    gpu: int = 0


@dataclass(frozen=True)
class Leaf:
    name: str
    label: str
    higher_is_better: bool = True
    column: str | None = None  # mean leaf: the per-sample column averaged
    stats: tuple[str, ...] = ()  # corpus leaf: per-sample statistic columns
    corpus: Callable[[np.ndarray], np.ndarray] | None = None  # corpus leaf: totals (B, k) -> (B,)

    @property
    def is_mean(self) -> bool:
        return self.corpus is None

    @property
    def is_count(self) -> bool:
        """A leaf that counts samples (e.g. GREEN unparsed), not a quality score."""
        return not self.is_mean and tuple(self.stats) == (self.name,)

    def statistics(self, scores) -> np.ndarray:
        """Per-sample sufficient statistics, shape (n, k); NaN-free."""
        if self.is_mean:
            values = scores[self.column].to_numpy(dtype="float64")
            valid = np.isfinite(values)
            return np.column_stack([np.where(valid, values, 0.0), valid.astype("float64")])
        # column by column: selecting the columns as a frame first cost more than the conversion (a statistics job
        # takes every model's, at 100 models 500 times)
        return np.column_stack([scores[c].to_numpy(dtype="float64") for c in self.stats])

    def value(self, totals: np.ndarray) -> np.ndarray:
        """The leaf from column totals of :meth:`statistics`; shape (..., k) -> (...)."""
        totals = np.asarray(totals, dtype="float64")
        if self.is_mean:
            with np.errstate(invalid="ignore", divide="ignore"):
                return np.where(totals[..., 1] > 0, totals[..., 0] / totals[..., 1], np.nan)
        return self.corpus(totals)


def mean_leaf(column: str, label: str, higher_is_better: bool = True, name: str | None = None) -> Leaf:
    return Leaf(name=name or column, label=label, higher_is_better=higher_is_better, column=column)


def count_leaf(column: str, label: str) -> Leaf:
    """A leaf that is the number of samples with ``column`` = 1 (bootstrapped like any count)."""
    return Leaf(name=column, label=label, higher_is_better=False, stats=(column,), corpus=lambda t: t[..., 0])


@dataclass(frozen=True)
class FailureAccounting:
    """How an LLM-judge metric's failed pairs are counted (:mod:`radrank.judge_failures`) and which ranking the
    failure policies test (:mod:`radrank.stats.failures`): the models' ranks by mean leaf ``leaf`` with failed
    pairs excluded (what the leaf does), scored as ``worst`` and scored as ``best`` (the ends of its scale)."""

    label: str  # the judge's name on the leaderboard's failure columns
    kind_column: str  # per pair: its failure kind, "" when scored
    attempts_column: str  # per pair: answers asked (2: asked again)
    leaf: str | None = None  # None: counted, no policy ranks (the leaf is not a mean of one column)
    worst: float = 0.0
    best: float = 1.0


def judge_failures(name: str, label: str, leaf: str | None = None, worst: float = 0.0,
                   best: float = 1.0) -> FailureAccounting:
    """The failure accounting of judge metric ``name`` on its columns ``<name>_failure`` / ``<name>_attempts``."""
    from radrank.judge_failures import failure_columns

    kind, attempts = failure_columns(name)
    return FailureAccounting(label=label, kind_column=kind, attempts_column=attempts, leaf=leaf, worst=worst,
                             best=best)


@dataclass(frozen=True)
class BoardColumn:
    """A column of ReXrank's leaderboard that shows one of a metric's leaves.

    ``position`` orders ReXrank's columns across metrics (BLEU 1, BertScore 2, … GREEN 7);
    ``reciprocal``: the column shows 1 / the leaf's mean (ReXrank's 1/RadCliQ-v1), without interval.
    """

    title: str
    leaf: str
    position: int
    reciprocal: bool = False


@dataclass(frozen=True)
class Explanation:
    """What the report's drill-down shows of a judge's answer for one case.

    ``summary`` lines under the metric's label; or, when the answer gave no score, ``failure`` (why);
    ``details`` (the judge's own text) folded under ``details_title``.
    """

    label: str
    summary: tuple[str, ...] = ()
    failure: str | None = None
    details_title: str = ""
    details: str = ""


class Metric:
    """Base class of every metric (see the module docstring)."""

    name: ClassVar[str]
    description: ClassVar[str]
    family: ClassVar[str]
    columns: ClassVar[tuple[str, ...]]
    leaves: ClassVar[tuple[Leaf, ...]]
    Settings: ClassVar[type[SettingsBase]] = NoSettings
    requires: ClassVar[tuple[str, ...]] = ()
    nan_columns: ClassVar[tuple[str, ...]] = ()  # may hold NaN (e.g. an unparsable judge answer)
    reason_column: ClassVar[str | None] = None  # why a row's values are NaN ("" when they are not)
    failures: ClassVar[FailureAccounting | None] = None  # an LLM judge: how its failed answers are counted
    packages: ClassVar[tuple[str, ...]] = ()
    version: ClassVar[str] = "1"
    status: ClassVar[str] = "implemented"  # implemented | needs-weights
    default_resources: ClassVar[Resources] = Resources()
    board: ClassVar[tuple[BoardColumn, ...]] = ()
    explained_by: ClassVar[tuple[str, ...]] = ()
    # The pair columns ``score`` reads: a pair's scores are a function of these alone (and the settings), so
    # identical pairs of different models are scored once and a scored pair is never scored again.
    reads: ClassVar[tuple[str, ...]] = ("reference", "hypothesis")
    # keep per-pair scores in the score cache (False: recomputing is cheaper); even counting n-grams costs more than
    # a lookup (benchmarks/lexical_cache.py)
    cache_scores: ClassVar[bool] = True
    # CPU-seconds scoring one pair costs (its reference prepared too), for a metric so cheap that reading a large
    # pack of the score cache for a few of its pairs costs more than scoring them: a lookup then leaves such a
    # pack unread (radrank.score_cache.Namespace.lookup); None: every pack holding a pair asked for is read
    seconds_per_pair: ClassVar[float | None] = None
    # the scoring job gives it the group's references (inputs["references"]), which it prepares once per group
    prepares_references: ClassVar[bool] = False

    def __repr__(self):
        return f"<metric {self.name}>"

    # -- settings ----------------------------------------------------------------------------------
    def settings(self, values: dict | None = None, *, allow_remote_code=(), where: str | None = None) -> SettingsBase:
        """Typed settings from a config mapping (``metric_settings.<name>``); ConfigError on a bad key or value.

        ``allow_remote_code``: the config's top-level ``trust_remote_code`` list, for metrics whose settings
        take it (it is never a per-metric setting)."""
        where = where or f"metric_settings.{self.name}"
        values = dict(values or {})
        fixed = {}
        if "trust_remote_code" in self.Settings.__dataclass_fields__:
            if "trust_remote_code" in values:
                from radrank.errors import ConfigError

                raise ConfigError(
                    f"config {where}.trust_remote_code: remote code is allowed in one place only, the top-level "
                    f"list `trust_remote_code` (model ids or paths); move {values['trust_remote_code']!r} there")
            fixed["trust_remote_code"] = tuple(allow_remote_code or ())
        return self.Settings.build(values, where=where, **fixed)

    def coerce(self, settings) -> SettingsBase:
        """``settings`` as this metric's Settings (a mapping is checked into them; None: the defaults)."""
        return settings if isinstance(settings, self.Settings) else self.settings(settings or {})

    def identity(self, s: SettingsBase) -> dict:
        """What this metric's scores depend on besides the pairs: the rule identity and the score files'
        provenance. Speed-only settings are not in it."""
        return {"metric": self.name, "version": self.version, "settings": s.identity()}

    # -- where and how it runs -----------------------------------------------------------------------
    def env(self, s: SettingsBase) -> str:
        return self.family

    def gpus(self, s: SettingsBase) -> int:
        return self.default_resources.gpu

    def resources(self, s: SettingsBase) -> Resources:
        return self.default_resources

    def weights(self, s: SettingsBase) -> tuple:
        """The :class:`radrank.runtime.WeightRef` of everything ``score`` will load with ``s``."""
        return ()

    def needs_corpus(self, s: SettingsBase) -> bool:
        """True when a pair's scores also depend on the other pairs of its submission (BERTScore's idf over the
        references): scored with ``inputs["corpus_pairs"]``, the submission's whole pairs table."""
        return False

    def cacheable(self, scores):
        """Rows whose scores may be kept and reused: not those of a request that failed (an endpoint that did
        not answer is asked again next time)."""
        import numpy as np

        if self.reason_column is None:
            return np.ones(len(scores), dtype=bool)
        reasons = scores[self.reason_column].fillna("").astype(str)
        return ~(reasons.str.contains("api_error", regex=False) | reasons.str.contains("request failed", regex=False)
                 ).to_numpy()

    # -- the report --------------------------------------------------------------------------------
    def explain(self, row) -> Explanation | None:
        """The judge's explanation of one scored case (a mapping with :attr:`explained_by`), if any."""
        return None

    # -- scoring -------------------------------------------------------------------------------------
    def score(self, pairs, settings: Settings, inputs: dict, runtime):
        """Per-sample scores: ``sample_id`` + :attr:`columns`, one row per pair, in order."""
        raise NotImplementedError

    def owner(self) -> str:
        return f"metric {self.name!r}"

    def key(self, setting: str) -> str:
        return f"metric_settings.{self.name}.{setting}"


# --- shared machinery of the lexical metrics ------------------------------------------------------


def distinct(texts) -> tuple[list, np.ndarray]:
    """(each distinct text once, in first-seen order; the index of every text in that list)."""
    index: dict = {}
    codes = np.fromiter((index.setdefault(t, len(index)) for t in texts), dtype="int64", count=len(texts))
    return list(index), codes


def distinct_texts(references, hypotheses):
    """(texts, ref_index, hyp_index): each distinct text once, and where every pair's texts are.

    Leaderboards repeat each reference once per model, so a lexical metric
    tokenises and counts each distinct text once rather than once per pair.
    """
    refs, hyps = list(references), list(hypotheses)
    if len(refs) != len(hyps):
        raise ValueError(f"{len(refs)} references but {len(hyps)} hypotheses")
    texts, codes = distinct(refs + hyps)
    return texts, codes[: len(refs)], codes[len(refs):]


PAIR_CHUNK = 10_000  # pairs a lexical metric scores at a time: ~0.2 GB of work memory (benchmarks/memory.py)


def in_pair_chunks(fn, references, hypotheses, size: int | None = None) -> np.ndarray:
    """``fn(references, hypotheses)`` over chunks of ``size`` pairs, results stacked in the pairs' order.

    A lexical value depends on its own pair only, so this equals one call on all pairs, while the
    tokens, n-gram tables and match arrays held at a time stay bounded by the chunk (100k pairs in
    one call peak at 2.3 GB).

    The chunks take the pairs reference by reference (a stable sort on the reference text): a leaderboard's
    scoring job pairs each reference with every model's hypothesis, model after model, and chunks in that order
    each tokenised and counted every reference again (half of a chunk's texts, and the longer half). Grouped,
    a reference is prepared once per chunk it falls in: at 10 models × 10,000 cases of the synthetic leaderboard
    BLEU-2 1.9×, BLEU-4 2.5× and ROUGE 1.8× less CPU, the same values (tests/test_lexical.py). In a scoring job the
    group's references are prepared once for all chunks (:func:`references_of`); the order still keeps each
    chunk's hypotheses with the few references they share.
    """
    refs, hyps = list(references), list(hypotheses)
    if len(refs) != len(hyps):
        raise ValueError(f"{len(refs)} references but {len(hyps)} hypotheses")
    size = size or PAIR_CHUNK
    if len(refs) <= size:
        return np.asarray(fn(refs, hyps))
    order = np.argsort(distinct(refs)[1], kind="stable")
    refs, hyps = [refs[i] for i in order], [hyps[i] for i in order]
    stacked = np.concatenate([np.asarray(fn(refs[i: i + size], hyps[i: i + size])) for i in range(0, len(refs), size)])
    out = np.empty_like(stacked)
    out[order] = stacked
    return out


def _expand(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Concatenation of ``arange(s, s + c)`` for each (s, c); empty ranges allowed."""
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, dtype="int64")
    nonzero = counts > 0
    s, c = starts[nonzero], counts[nonzero]
    step = np.ones(total, dtype="int64")
    heads = np.concatenate([[0], np.cumsum(c)[:-1]])
    step[heads] = s - np.concatenate([[0], s[:-1] + c[:-1] - 1])
    return np.cumsum(step)


class ReferenceGrams:
    """The k-grams (k = 1..``max_n``) of reference documents (token lists), numbered once, with each document's count
    of each; any hypotheses are then matched against them (:meth:`matches`).

    Tokens are numbered by a hash factorisation and k-grams order by order from (id of the (k-1)-gram, id of the next
    token), so equal k-grams get equal ids, compared exactly as strings. A hypothesis token or k-gram that no
    reference has gets none: it can match nothing. The references' side is the same whatever hypotheses come, so
    it is built once for a group's references (:class:`radrank.metrics.prepared.PreparedReferences` keeps it
    between runs) and a new model pays for its own texts only.
    """

    def __init__(self, docs: list, max_n: int, keep_sequences: bool = False):
        import pandas as pd

        self.max_n = max_n
        self.lengths = np.fromiter(map(len, docs), dtype="int64", count=len(docs))
        tokens = _flat(docs, int(self.lengths.sum()))
        codes, vocabulary = pd.factorize(tokens)
        codes = codes.astype("int64")
        self.vocabulary = pd.Index(vocabulary, dtype=object)  # a token's id is its position; object: no inference
        self.codes = codes if keep_sequences else None  # token ids end to end (:meth:`reference_sequences`)
        size = len(vocabulary)
        doc_of, pos = _positions(self.lengths)
        starts, ids = np.arange(len(tokens), dtype="int64"), codes
        self.successors = []  # per k >= 2: the keys (k-1)-gram id * size + token id, in k-gram id order
        self.tables = []  # per k: (sorted keys doc * n_k + k-gram id, the document's count of it, n_k)
        n_grams = size
        for k in range(1, max_n + 1):
            if k > 1:
                keep = pos[starts] + k <= self.lengths[doc_of[starts]]
                starts = starts[keep]
                ids, keys = pd.factorize(ids[keep] * size + codes[starts + k - 1])
                ids = ids.astype("int64")
                self.successors.append(pd.Index(keys))  # a k-gram's id is its key's position
                n_grams = len(keys)
            table, counts = np.unique(doc_of[starts] * max(n_grams, 1) + ids, return_counts=True)
            self.tables.append((table, counts.astype("int64"), max(n_grams, 1)))

    def __getstate__(self) -> dict:
        """What a pickle keeps (:class:`radrank.metrics.prepared.PreparedReferences`): each table as its documents'
        bounds, gram ids and counts in the narrowest types that hold them (a third of the arrays' bytes)."""
        tables = []
        for keys, counts, n_grams in self.tables:
            bounds = np.searchsorted(keys // n_grams, np.arange(len(self.lengths) + 1, dtype="int64"))
            tables.append((bounds, _narrow(keys % n_grams), _narrow(counts), n_grams))
        return {"max_n": self.max_n, "lengths": _narrow(self.lengths), "vocabulary": self.vocabulary.to_numpy(),
                "codes": None if self.codes is None else _narrow(self.codes),
                "successors": [index.to_numpy() for index in self.successors], "tables": tables}

    def __setstate__(self, state: dict) -> None:
        import pandas as pd

        self.max_n = state["max_n"]
        self.lengths = state["lengths"].astype("int64")
        self.vocabulary = pd.Index(state["vocabulary"], dtype=object)
        self.codes = None if state["codes"] is None else state["codes"].astype("int64")
        self.successors = [pd.Index(keys) for keys in state["successors"]]
        self.tables = []
        for bounds, grams, counts, n_grams in state["tables"]:
            docs = np.repeat(np.arange(len(bounds) - 1, dtype="int64"), np.diff(bounds))
            self.tables.append((docs * n_grams + grams.astype("int64"), counts.astype("int64"), n_grams))

    def encode(self, docs: list) -> tuple:
        """(the token ids of ``docs``, end to end: -1 where no reference has the token; their lengths)."""
        import pandas as pd

        lengths = np.fromiter(map(len, docs), dtype="int64", count=len(docs))
        tokens = _flat(docs, int(lengths.sum()))
        if len(tokens) == 0:
            return np.zeros(0, dtype="int64"), lengths
        return self.vocabulary.get_indexer(pd.Index(tokens, dtype=object)).astype("int64"), lengths

    def reference_sequences(self, docs: np.ndarray) -> list:
        """The token ids of reference documents ``docs``, one list each (built with ``keep_sequences``)."""
        first = np.cumsum(self.lengths) - self.lengths
        return [self.codes[s: s + n].tolist() for s, n in zip(first[docs].tolist(), self.lengths[docs].tolist())]

    def matches(self, ref_index, hyps, hyp_index, chunk: int = 1 << 22) -> np.ndarray:
        """Clipped n-gram matches of pairs (reference ``ref_index[p]`` of these, hypothesis ``hyp_index[p]`` of
        ``hyps``: token lists, or what :meth:`encode` made of them): int64 (n_pairs, max_n), column k-1 =
        Σ_g min(count_hyp(g), count_ref(g)) over the k-grams g — BLEU's clipped matches and ROUGE-N's overlap. The
        pairs' (hypothesis, gram) table is joined in chunks of ``chunk`` rows, so that it stays bounded."""
        ref_index = np.asarray(ref_index, dtype="int64")
        hyp_index = np.asarray(hyp_index, dtype="int64")
        codes, lengths = hyps if isinstance(hyps, tuple) else self.encode(hyps)
        n_pairs, n_docs = len(ref_index), len(lengths)
        out = np.zeros((n_pairs, self.max_n), dtype="int64")
        if n_pairs == 0 or len(codes) == 0 or len(self.vocabulary) == 0:
            return out
        size = len(self.vocabulary)
        doc_of, pos = _positions(lengths)
        starts, ids = np.arange(len(codes), dtype="int64"), codes
        for k in range(1, self.max_n + 1):
            if k > 1:
                keep = pos[starts] + k <= lengths[doc_of[starts]]
                starts, previous = starts[keep], ids[keep]
                following = codes[starts + k - 1]
                ids = np.full(len(starts), -1, dtype="int64")
                known = (previous >= 0) & (following >= 0)
                if known.any():
                    ids[known] = self.successors[k - 2].get_indexer(previous[known] * size + following[known])
            known = ids >= 0
            if not known.any():
                break  # no longer gram is known either
            table, ref_counts, n_grams = self.tables[k - 1]
            # per hypothesis its known k-grams and their counts, sorted by (document, gram)
            keys, counts = np.unique(doc_of[starts[known]] * n_grams + ids[known], return_counts=True)
            key_doc = keys // n_grams
            doc_ptr = np.searchsorted(key_doc, np.arange(n_docs + 1, dtype="int64"))
            per_pair = doc_ptr[hyp_index + 1] - doc_ptr[hyp_index]
            bounds = np.searchsorted(np.cumsum(per_pair), np.arange(chunk, int(per_pair.sum()) + chunk, chunk),
                                     side="right")
            lo = 0
            for hi in list(bounds) + [n_pairs]:
                if hi <= lo:
                    continue
                rows = np.arange(lo, hi)
                entries = _expand(doc_ptr[hyp_index[rows]], per_pair[rows])
                pair_of = np.repeat(rows, per_pair[rows])
                wanted = ref_index[pair_of] * n_grams + (keys[entries] - key_doc[entries] * n_grams)
                at = np.minimum(np.searchsorted(table, wanted), len(table) - 1)
                matched = np.minimum(counts[entries], np.where(table[at] == wanted, ref_counts[at], 0))
                out[lo:hi, k - 1] = np.bincount(pair_of - lo, weights=matched, minlength=hi - lo).astype("int64")
                lo = hi
        return out


def sequences(codes: np.ndarray, lengths: np.ndarray) -> list:
    """Token ids laid end to end (:meth:`ReferenceGrams.encode`) as one list per document."""
    return [part.tolist() for part in np.split(codes, np.cumsum(lengths)[:-1])] if len(lengths) else []


def _narrow(values: np.ndarray) -> np.ndarray:
    """Non-negative ints in the narrowest unsigned type that holds them (-1 needs int64: kept as it is)."""
    if len(values) == 0 or values.min() < 0:
        return values
    return values.astype(np.min_scalar_type(int(values.max())))


def _flat(docs: list, total: int) -> np.ndarray:
    flat = np.empty(total, dtype=object)
    flat[:] = [tok for doc in docs for tok in doc]
    return flat


def _positions(lengths: np.ndarray) -> tuple:
    """(the document of each token, its position there) of documents of these lengths, laid end to end."""
    doc_of = np.repeat(np.arange(len(lengths), dtype="int64"), lengths)
    first = np.cumsum(lengths) - lengths
    return doc_of, np.arange(int(lengths.sum()), dtype="int64") - first[doc_of]


def references_of(references: list, prepared, build) -> tuple:
    """(a :class:`ReferenceGrams` holding ``references``, each reference's document there): ``prepared`` — a group's
    references prepared once, (ReferenceGrams, {text: document}) — when it holds every one of them, else
    ``build(texts)`` of their distinct texts, here."""
    if prepared is not None:
        grams, document = prepared
        try:
            return grams, np.fromiter((document[t] for t in references), dtype="int64", count=len(references))
        except KeyError:  # a reference outside the group's case set (none in the workflow): prepared here
            pass
    texts, index = distinct(references)
    return build(texts), index


class MatchedPairs(NamedTuple):
    """A lexical metric's pairs, matched (:func:`match_pairs`)."""

    grams: ReferenceGrams  # the references' k-grams
    ref_index: np.ndarray  # each pair's reference document in ``grams``
    hyps: tuple  # the distinct hypotheses as :meth:`ReferenceGrams.encode` made them: (token ids, lengths)
    hyp_index: np.ndarray  # each pair's hypothesis among them
    matches: np.ndarray  # each pair's clipped k-gram matches, k = 1..max_n

    @property
    def ref_len(self) -> np.ndarray:
        return self.grams.lengths[self.ref_index]

    @property
    def hyp_len(self) -> np.ndarray:
        return self.hyps[1][self.hyp_index]


def match_pairs(references, hypotheses, prepared, build, tokenize) -> MatchedPairs:
    """The clipped k-gram matches of (reference, hypothesis) pairs, every lexical metric's one path: the references
    from ``prepared`` or ``build`` (:func:`references_of`), each distinct hypothesis tokenised by ``tokenize`` once."""
    if len(references) != len(hypotheses):
        raise ValueError(f"{len(references)} references but {len(hypotheses)} hypotheses")
    grams, ref_index = references_of(references, prepared, build)
    texts, hyp_index = distinct(hypotheses)
    hyps = grams.encode([tokenize(t) for t in texts])
    return MatchedPairs(grams, ref_index, hyps, hyp_index, grams.matches(ref_index, hyps, hyp_index))


def prepared_references(inputs: dict, name: str, build):
    """The group's references prepared by ``build`` for metric ``name`` (:class:`radrank.metrics.prepared.
    PreparedReferences`, which the scoring job passes as ``inputs["references"]``), or None outside a group."""
    references = inputs.get("references")
    return None if references is None else references.prepared(name, build)
