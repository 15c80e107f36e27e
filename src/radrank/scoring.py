"""One metric over a whole group (every model of one dataset × split): each distinct pair scored once.

A leaderboard repeats each reference once per model, and many models write the same report for a
case (a template, "No acute cardiopulmonary process."), so a group of 100 models holds far fewer
distinct pairs than rows. :func:`score_group` takes every model's pairs, keys each pair by a digest
of the columns the metric reads (``Metric.reads``; with ``Metric.needs_corpus``, also by the
submission's corpus — BERTScore's idf), scores each distinct key once in one call of the metric (one
model load, its own length-sorted batches), and hands every model its rows back in its own order.

With a score cache (:mod:`radrank.score_cache`), keys scored before — by another job, split, dataset or
run — are not scored again: the cache namespace is the metric's identity (version and scoring
settings) and the content fingerprint of every model file it loads, so a changed setting or weight
file never reuses a score. Rows from the cache and freshly scored rows are the same numbers in the
same dtypes, so the per-model tables are identical either way; the model provenance is kept with the
cached rows, so a job that finds everything cached records what the job that computed them recorded.

A shard (index, count) takes the distinct keys whose digest falls in its slice of the hash space:
stable when models are added (a pair always lands in the same shard) and balanced.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import numpy as np

from radrank import metrics

log = logging.getLogger("radrank")

KEY = "_key"  # the pair key column while a group is scored (the metric sees it as sample_id)
MODEL = "_model"  # the model a pair came from


@dataclass
class GroupScores:
    """The scores of a group: per model its table (``sample_id`` + the metric's columns, in its pairs' order),
    or, for a shard, the table of its keys (``_key`` + columns); and the provenance of the models used."""

    by_model: dict = field(default_factory=dict)
    keys: object = None  # shard: DataFrame of _key + columns
    models: dict | None = None  # what the metric recorded about its models (attrs["models"])
    counts: dict = field(default_factory=dict)  # rows, distinct, cached, scored (for the log)


def shard_of(keys, count: int) -> np.ndarray:
    """The shard (0 … count-1) of each key: its digest's leading 32 bits modulo ``count``."""
    return np.fromiter((int(k[:8], 16) % count for k in keys), dtype="int64", count=len(keys))


def corpus_digest(pairs) -> str:
    """What a submission's corpus-level statistics depend on: the multiset of its references."""
    import hashlib

    from radrank.score_cache import pair_digests

    refs = np.sort(pair_digests(pairs, ("reference",)).astype(str))
    return hashlib.sha256("\n".join(refs).encode()).hexdigest()[:32]


def pair_keys(metric, settings, pairs) -> np.ndarray:
    """The key of each pair: a digest of the columns the metric reads (+ the corpus when it needs one)."""
    from radrank.score_cache import pair_digests

    keys = pair_digests(pairs, metric.reads)
    if metric.needs_corpus(settings):
        corpus = corpus_digest(pairs)
        keys = np.array([k[:16] + corpus[:16] for k in keys], dtype=object)
    return keys


def cache_key(metric, settings, runtime) -> dict:
    """The cache namespace of a metric with these settings: its identity and the content of what it loads."""
    from radrank.runtime import fingerprint

    weights = {ref.key: fingerprint(runtime.resolve(ref)) for ref in metric.weights(settings) if ref.ref}
    return {"metric": metric.name, **metric.identity(settings), "weights": weights}


def score_group(name: str, settings, pairs_by_model: dict, *, required: dict | None = None, shard=None,
                cache=None, runtime=None, references=None) -> GroupScores:
    """Metric ``name`` over every model of a group (see the module docstring).

    ``pairs_by_model``: model -> its pairs table; ``required``: required metric -> model -> its scores (a
    metric that reads other metrics' scores is scored model by model: a cheap combination); ``shard``:
    (index, count) — then only that slice of the distinct keys is scored and returned in ``keys``;
    ``cache``: a :class:`radrank.score_cache.ScoreCache` (None: no cache); ``references``: the group's references
    (:class:`radrank.metrics.prepared.PreparedReferences`), which a lexical metric prepares once.
    """
    import pandas as pd

    from radrank.runtime import Runtime

    metric = metrics.get(name)
    settings = metric.coerce(settings)
    runtime = runtime or Runtime()
    if metric.requires:
        if shard is not None:
            raise ValueError(f"metric {name!r} reads other metrics' scores: it is not sharded")
        out = GroupScores()
        for model, pairs in pairs_by_model.items():
            inputs = {req: frames[model] for req, frames in (required or {}).items()}
            out.by_model[model] = metrics.score(name, pairs, settings, inputs, runtime)
            out.models = out.models or out.by_model[model].attrs.pop("models", None)
        out.counts = {"rows": sum(map(len, pairs_by_model.values()))}
        return out

    keyed = {model: pair_keys(metric, settings, pairs) for model, pairs in pairs_by_model.items()}
    table = pd.concat([pairs.assign(**{KEY: keyed[model], MODEL: model}) for model, pairs in pairs_by_model.items()],
                      ignore_index=True)
    distinct = table.drop_duplicates(KEY)  # each key once, with the pairs table it first came from
    if shard is not None:
        distinct = distinct[shard_of(distinct[KEY], shard[1]) == shard[0]]
    counts = {"rows": len(table), "distinct": len(distinct)}

    cached = cache is not None and cache.enabled and metric.cache_scores
    namespace = cache.namespace(cache_key(metric, settings, runtime), columns=metric.columns) if cached else None
    found = namespace.lookup(distinct[KEY].tolist(), seconds_per_pair=metric.seconds_per_pair) \
        if namespace is not None else None
    found = found if found is not None and len(found) else None
    todo = distinct[~distinct[KEY].isin(found["digest"])] if found is not None else distinct
    if namespace is not None:
        counts.update(cached=len(distinct) - len(todo), scored=len(todo), skipped_packs=len(namespace.skipped),
                      left_unread=sum(namespace.left_unread.values()))
        namespace.record_hits(asked=len(distinct), served=len(distinct) - len(todo))
    parts, models_prov = [], None
    if found is not None:
        parts.append(found.rename(columns={"digest": KEY})[[KEY, *metric.columns]])
        models_prov = (namespace.answered_meta or {}).get("models")  # the packs read, not the oldest of all
    if len(todo):
        scored, models_prov = _score_keys(metric, settings, todo, pairs_by_model, runtime, references)
        if namespace is not None:
            keep = metric.cacheable(scored)
            if keep.any():
                namespace.store(scored.loc[keep, [KEY, *metric.columns]].rename(columns={KEY: "digest"})
                                .reset_index(drop=True),
                                {"models": models_prov})
        parts.append(scored)
    rows = pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0] if parts else \
        pd.DataFrame({KEY: [], **{c: [] for c in metric.columns}})
    out = GroupScores(models=models_prov, counts=counts)
    if shard is not None:
        out.keys = rows.sort_values(KEY, kind="stable").reset_index(drop=True)
        return out
    out.by_model = assemble(metric, rows, keyed, pairs_by_model)
    return out


def _score_keys(metric, settings, todo, pairs_by_model: dict, runtime, references=None):
    """The metric's scores of the distinct pairs ``todo`` (one call in all, or one per corpus when it needs its
    submission's corpus), as ``_key`` + columns, and what it recorded about its models."""
    import pandas as pd

    corpora = todo.groupby(MODEL, sort=False) if metric.needs_corpus(settings) else [(None, todo)]
    frames, models_prov = [], None
    for corpus_model, part in corpora:
        table = part.drop(columns=[MODEL]).assign(sample_id=part[KEY]).drop(columns=[KEY]).reset_index(drop=True)
        inputs = {"corpus_pairs": pairs_by_model[corpus_model]} if corpus_model is not None else {}
        if references is not None:
            inputs["references"] = references
        scored = metrics.score(metric.name, table, settings, inputs, runtime)
        models_prov = models_prov or scored.attrs.pop("models", None)
        frames.append(scored.rename(columns={"sample_id": KEY}))
    return (frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)), models_prov


def assemble(metric, rows, keyed: dict, pairs_by_model: dict) -> dict:
    """Every model's table from the group's rows: its pairs' sample ids, in its order, with their key's scores."""
    import pandas as pd

    index = pd.Index(rows[KEY])
    if not index.is_unique:
        raise RuntimeError(f"metric {metric.name!r}: a pair was scored twice")
    scores = rows[list(metric.columns)]
    out = {}
    for model, keys in keyed.items():
        at = index.get_indexer(keys)  # one hash lookup per pair, in C
        if (at < 0).any():
            missing = len(set(np.asarray(keys, dtype=object)[at < 0]))
            raise RuntimeError(f"metric {metric.name!r}: {missing} pair(s) of model {model!r} have no score")
        frame = scores.iloc[at].reset_index(drop=True)
        frame.insert(0, "sample_id", pairs_by_model[model]["sample_id"].to_numpy())
        out[model] = metrics.checked(metric, pairs_by_model[model], frame)
    return out
