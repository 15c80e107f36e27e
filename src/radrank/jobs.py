"""Job plumbing: one job object per workflow stage, built by the Plan, run by a rule.

Each stage is a frozen dataclass (:class:`Job`) whose fields are what its outputs depend on —
a rule's ``params: job=`` holds them as a plain dict (``Job.params()``), which is what Snakemake
compares to decide a rerun — and whose :meth:`Job.run` reads the rule's ``input``, computes with
the library, and writes the ``output`` atomically with provenance, so a job leaves complete
outputs or none. Input files come in the rule's input lists, in the order the job's fields give
(e.g. models × metrics); no path is passed twice.

The core environment's rules hand their job to :func:`radrank.workers.run_in_process` (``run:``: a
long-lived worker process of the run, so no interpreter start-up or re-import per job and every
core in use); the other families' rules call :func:`run_script` from a thin script in scripts/ in
their own environment. Logging is per job (:func:`job_log`): a job's records go to its log file
and stderr, also when jobs share a process.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field

from radrank import io, metrics, provenance, score_reuse
from radrank.digests import FileDigests
from radrank.errors import InputError

log = logging.getLogger("radrank")

# True in a radrank worker process (radrank.workers): its only other threads (a watchdog blocked in a read, numpy's
# and pyarrow's fork-aware pools) hold no lock a child could need, so a job there forks its helper processes, which
# start with what it has imported, instead of spawning fresh interpreters that import it all again.
FORK_SAFE = False
# set by a pool worker (radrank.workers), which runs one job at a time: a job's CPU is then its process's, the
# threads its libraries start included (pyarrow decompresses parquet pages on its own threads)
ALONE_IN_PROCESS = False
# a group's file digest memo, relative to the workflow's working directory (Snakemake's own state is beside it);
# by path, size, mtime, inode and ctime: kept out of results/, whose files are compared across runs and machines
GROUP_DIGESTS = ".snakemake/radrank/file-digests/{dataset}-{split}.json"
# where a group's scoring jobs keep its references as each lexical metric prepared them (radrank.metrics.prepared)
GROUP_REFERENCES = ".snakemake/radrank/references/{dataset}-{split}"


FORMAT = "%(levelname)s %(name)s: %(message)s"


class JobFailed(Exception):
    """A job failed; the message is the one line its log ends with."""


class _ThreadRouter(logging.Handler):
    """One root handler that hands each record to the handlers of the job running in the record's thread.

    Jobs sharing a process register and unregister their handlers here instead of adding them to
    the root logger: a handler removed from the root's list while another thread walks that list
    makes the walk skip the next handler, and a concurrent job lost a line that way.
    """

    def __init__(self):
        super().__init__()
        self.jobs: dict[int, list] = {}

    def emit(self, record):
        for handler in self.jobs.get(record.thread, ()):
            if record.levelno >= handler.level:
                handler.handle(record)


_ROUTER = _ThreadRouter()
_ROUTER_LOCK = threading.Lock()


@contextmanager
def job_log(log_path=None, *, this_thread_only=False):
    """Log records to the job's log file (if any) and stderr while the job runs.

    ``this_thread_only``: the job shares its process with other jobs (Snakemake's ``run:``
    jobs run in threads of one process), so the job's handlers take only the records logged
    by this thread (through one shared root handler, :class:`_ThreadRouter`), and the
    process-wide logging setup is left as it is, apart from radrank's loggers logging INFO.
    Otherwise the process is the job's: every record of the process, INFO and up, as
    ``logging.basicConfig`` would.
    """
    import sys

    handlers = [logging.StreamHandler(sys.stderr)]
    if log_path:
        handlers.append(logging.FileHandler(log_path, mode="w"))
    for handler in handlers:
        handler.setFormatter(logging.Formatter(FORMAT))
    root = logging.getLogger()
    if not this_thread_only:
        root.setLevel(logging.INFO)
        for handler in handlers:
            root.addHandler(handler)
        try:
            yield
        finally:
            for handler in handlers:
                root.removeHandler(handler)
                handler.close()
        return
    thread = threading.get_ident()
    log.setLevel(logging.INFO)
    with _ROUTER_LOCK:
        _ROUTER.jobs[thread] = handlers
        if len(_ROUTER.jobs) == 1:  # the first job of the process now: route through the root logger
            root.addHandler(_ROUTER)
    try:
        yield
    finally:
        with _ROUTER_LOCK:
            del _ROUTER.jobs[thread]
            if not _ROUTER.jobs:  # no job left whose records could be skipped
                root.removeHandler(_ROUTER)
        for handler in handlers:
            handler.close()


def run_logged(work, *, rule, log_path=None, this_thread_only=True):
    """Run ``work()`` for one Snakemake job with :func:`job_log`; a failure is logged (radrank's own errors
    as their one clear line, anything else with its traceback) and raised as :class:`JobFailed` with that
    line, so Snakemake marks the job failed and shows the line."""
    from radrank.errors import RadrankError

    io.use_job_memory_pool()
    with job_log(log_path, this_thread_only=this_thread_only):
        # a job sharing its process counts its own thread's CPU; one alone counts every thread of the process
        clock = time.process_time if ALONE_IN_PROCESS else time.thread_time
        wall, cpu, children = time.perf_counter(), clock(), _children_cpu()
        try:
            work()
        except RadrankError as e:
            log.error("%s", e)
            raise JobFailed(str(e)) from None
        except Exception as e:
            log.exception("rule %s failed", rule)
            where = f" (traceback in {log_path})" if log_path else ""
            raise JobFailed(f"rule {rule} failed: {type(e).__name__}: {e}{where}") from e
        # what the job cost (its thread, as jobs may share a process, and the processes it waited for), for
        # whoever sizes a run
        log.info("rule %s done in %.2f s, %.2f CPU-s (%.2f in its own processes)", rule, time.perf_counter() - wall,
                 clock() - cpu, _children_cpu() - children)


def _children_cpu() -> float:
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


# --- jobs ---------------------------------------------------------------------------------------------


def built(**metadata):
    """A field a job builds itself in :meth:`Job.from_params` (not a param: never a rerun trigger)."""
    return field(default=None, metadata={"param": False, **metadata})


@dataclass(frozen=True)
class Job:
    """A stage's job: its fields are what its outputs depend on (see the module docstring)."""

    def params(self) -> dict:
        """The rule's ``params: job=`` value: every field but the ones built from the config."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.metadata.get("param", True)}

    @classmethod
    def from_params(cls, params: dict, config: dict):
        return cls(**dict(params))

    def run(self, input, output) -> None:
        raise NotImplementedError


class Files(dict):
    """Files by name, as a rule's ``input`` / ``output`` give them: for running a job outside Snakemake
    (tests, benchmarks, the Python API), e.g. ``job.run(Files(pairs=p), Files(scores=out))``."""

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


def run_script(snakemake, job_type) -> None:
    """A rule script's body (a process of its own, the script's last statement): build the job and run it; a
    failure exits non-zero after its line is logged. The process then ends without the interpreter's teardown
    (:func:`radrank.snakemake_exit.end`): with torch, transformers and pandas loaded that teardown costs 0.8–1.1
    CPU-s and as much wall time per job (``benchmarks/teardown.py``)."""
    from radrank import snakemake_exit

    job = job_type.from_params(snakemake.params.job, snakemake.config)
    try:
        run_logged(lambda: job.run(snakemake.input, snakemake.output), rule=snakemake.rule,
                   log_path=snakemake.log[0] if snakemake.log else None, this_thread_only=False)
    except JobFailed:
        snakemake_exit.end(1)
    snakemake_exit.end(0)


# --- ingest --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Ingest(Job):
    """One submission for one split → canonical pairs and its drop file.
    Input: ``submission``, optional ``reference``, optional ``generated_drops``."""

    dataset: str
    split: str
    model: str
    ref_section: str | None  # None: generated pairs, already cut to their section
    empty_hypothesis: str
    max_chars: int | None
    sources_sha256: dict = field(default_factory=dict)  # the submission's (and reference's) content: reruns it
    missing_section: str = "drop"  # config rexrank_missing_section
    canonical_ref_section: str = "full"  # the section of a canonical ground-truth CSV's reports
    on_mismatch: str = "error"  # config references.on_mismatch
    canonical_sha256: str | None = None  # the dataset's canonical references (input ``canonical``), if named

    def run(self, input, output):
        import pandas as pd

        from radrank.ingest import casesets, ingest_submission
        from radrank.ingest.references import read_canonical

        path = input.submission
        reference = input.get("reference")
        generated = input.get("generated_drops")
        canonical_path = input.get("canonical")
        canonical = read_canonical(canonical_path, self.split, ref_section=self.canonical_ref_section,
                                   missing_section=self.missing_section) if canonical_path else None
        pairs, drops, fmt = ingest_submission(path, self.split, reference_path=reference,
                                              ref_section=self.ref_section, empty_hypothesis=self.empty_hypothesis,
                                              max_chars=self.max_chars, missing_section=self.missing_section,
                                              canonical=canonical, canonical_path=canonical_path,
                                              dataset=self.dataset, on_mismatch=self.on_mismatch)
        if generated:  # what the generation job listed (no image, unreadable image, ...) stays listed
            listed = io.read_text_table(generated)
            drops = pd.concat([listed, drops.astype(str)], ignore_index=True) if len(listed) else drops
            fmt = "generated"
        sources = {"path": str(path), "sha256": provenance.file_sha256(path)}
        if reference:
            sources["reference_path"] = str(reference)
            sources["reference_sha256"] = provenance.file_sha256(reference)
        if canonical_path:
            sources["canonical_references"] = str(canonical_path)
            sources["canonical_references_sha256"] = provenance.file_sha256(canonical_path)
        prov = provenance.record("pairs", dataset=self.dataset, split=self.split, model=self.model, format=fmt,
                                 sources=sources, ref_section=self.ref_section if fmt != "rexrank_json" else None,
                                 rexrank_missing_section=self.missing_section if fmt == "rexrank_json" else None,
                                 references_on_mismatch=self.on_mismatch if canonical_path else None,
                                 empty_hypothesis=self.empty_hypothesis, max_report_chars=self.max_chars,
                                 n_pairs=len(pairs), n_listed=len(drops),
                                 **{casesets.REFERENCES_DIGEST: casesets.references_digest(pairs)})
        log.info("%s/%s/%s: %d pairs from %s (%s); %d listed in the drop file",
                 self.dataset, self.split, self.model, len(pairs), path, fmt, len(drops))
        if pairs.empty and not (canonical_path and len(drops)):
            raise InputError(path, f"no scorable pair for split {self.split!r} "
                             f"({len(drops)} listed, e.g. {drops['reason'].value_counts().to_dict()})")
        if pairs.empty:  # the case set is the canonical file's: the model misses every case, counted and flagged
            log.warning("%s/%s/%s: every case of %s was dropped (%s); the model counts as missing every case of "
                        "the set, and its leaderboard is built without it", self.dataset, self.split, self.model,
                        path, drops["reason"].value_counts().to_dict())
        io.write_csv(drops, output.drops)
        io.write_parquet(pairs, output.pairs, prov)


@dataclass(frozen=True)
class Cases(Job):
    """A dataset × split's case set (:mod:`radrank.ingest.casesets`), from every submission's pairs and its canonical
    references, if named, once the submissions are checked to agree on each case's reference and no two case ids
    are near-duplicates (:func:`radrank.ingest.references.check_group`); and per model what it lacks of the set or
    submitted outside it (the accounting). Input: ``pairs`` and ``drops`` (models, in order), optional
    ``canonical``. Output: ``cases``, ``accounting`` (parquet) and ``accounting_csv``. Every scoring job of the
    group waits for it and scores each model on the set's cases."""

    dataset: str
    split: str
    models: tuple
    missing_section: str
    ref_section: str
    canonical_sha256: str | None = None

    def run(self, input, output):
        from radrank.ingest import casesets
        from radrank.ingest.references import check_group, read_canonical

        canonical_path = input.get("canonical")
        canonical = read_canonical(canonical_path, self.split, ref_section=self.ref_section,
                                   missing_section=self.missing_section) if canonical_path else None
        pairs = read_references(self.models, input.pairs)
        cases = check_group(pairs, dataset=self.dataset, split=self.split, canonical=canonical,
                            canonical_path=canonical_path)
        drops = {m: io.read_text_table(p) for m, p in zip(self.models, input.drops)}
        accounting = casesets.account({m: table for m, (table, _) in pairs.items()}, drops, cases,
                                      canonical=canonical is not None)
        described = casesets.describe(len(cases), canonical_path=canonical_path, n_submissions=len(self.models))
        outside = int((accounting["status"] == casesets.OUTSIDE).sum())
        log.info("%s/%s: %s; %d submissions agree on every reference; %d (model, case) pairs missing from the set "
                 "(scored as empty), %d outside it (not scored)", self.dataset, self.split, described,
                 len(self.models), len(accounting) - outside, outside)
        prov = provenance.record(
            "cases", dataset=self.dataset, split=self.split, models=list(self.models), n_cases=len(cases),
            case_set=described, rule="canonical" if canonical_path else "majority of the submissions",
            canonical_references=str(canonical_path) if canonical_path else None,
            canonical_references_sha256=self.canonical_sha256)
        io.write_csv(accounting, output.accounting_csv)
        io.write_parquet(accounting, output.accounting, prov)
        io.write_parquet(cases, output.cases, prov)


def scored_pairs(pair_paths, models, columns, cases=None) -> dict:
    """{model: its pairs as they are scored}: the ``columns`` a metric reads, aligned to the group's case set
    ``cases`` (:func:`read_cases`; :func:`radrank.ingest.casesets.align`: the set's cases only, a case the model
    lacks scored as an empty report) when the group has one (meta-evaluation sets have none)."""
    from radrank.ingest import casesets

    pairs = {m: io.read_parquet(p, ["sample_id", *columns]) for m, p in zip(models, pair_paths)}
    if cases is None:
        return pairs
    return {m: casesets.align(frame, cases) for m, frame in pairs.items()}


def read_cases(cases_path):
    """A group's case set as alignment reads it (None for a group without one: a meta-evaluation set)."""
    return None if cases_path is None else io.read_parquet(cases_path, ["sample_id", "reference"])


def read_references(models, pair_paths) -> dict:
    """{model: (its pairs' sample_id and reference columns, the file its references came from: a CSV submission's
    ground truth, else the submission)}. A pairs file whose references digest (recorded by its ingest job:
    :func:`radrank.ingest.casesets.references_digest`) repeats one read before gets that table, not read again."""
    from radrank.ingest.casesets import REFERENCES_DIGEST

    read, out = {}, {}
    for model, path in zip(models, pair_paths):
        record = io.read_provenance(path)
        digest = record.get(REFERENCES_DIGEST)
        table = read.get(digest) if digest else None
        if table is None:
            table = io.read_parquet(path, ["sample_id", "reference"])
            if digest:
                read[digest] = table
        sources = record.get("sources", {})
        out[model] = (table, str(sources.get("reference_path") or sources.get("path") or path))
    return out


# --- scores --------------------------------------------------------------------------------------------


def _settings_for(name: str, identity: dict, config: dict):
    """A metric's settings from the config, checked against the identity the rule was planned with."""
    settings = metrics.configured(name, config)
    if metrics.get(name).identity(settings) != identity:
        raise RuntimeError(f"metric {name!r}: the settings in the config differ from the rule's identity "
                           f"({identity}); rerun Snakemake so that it plans the jobs again")
    return settings


def _score_provenance(metric_name: str, settings, models, pairs_identity, required_versions: dict, shard=None,
                      reuse_key: str | None = None):
    """What a score file records: the metric's identity, its models, environment, pairs and required scores —
    nothing from the rest of the config, and nothing of how the rows were found (cached or scored)."""
    metric = metrics.get(metric_name)
    identity = metric.identity(settings)
    return provenance.record(
        "scores", metric=metric_name, metric_version=identity["version"], settings=identity["settings"],
        models=models, environment=provenance.environment(metric.packages), pairs=pairs_identity,
        inputs=required_versions, shard=None if shard is None else {"index": shard[0], "count": shard[1]},
        **({score_reuse.FIELD: reuse_key} if reuse_key is not None else {}))


@dataclass(frozen=True)
class ScoreGroup(Job):
    """One metric over every model of one dataset × split, each distinct pair scored once (radrank.scoring).

    Input: ``pairs`` (one file per model, in :attr:`models` order) and, per required metric, its folder of
    score files (or its score files, same order). Output: ``score_dir``, the metric's folder of the group's score
    files (one per model: :func:`model_score_paths`), or ``scores`` (one file per model, same order) — or, for one
    shard of the group's distinct pairs, ``shard`` (the shard's table of pair keys and scores;
    :class:`CollectShards` joins them).
    """

    metric: str
    identity: dict
    dataset: str
    split: str
    models: tuple
    shard: tuple | None = None  # (index, count)
    settings: object = built()
    cache: object = built()  # radrank.score_cache.ScoreCache, or None
    # where the group's jobs remember the sha256 of the files they key on (radrank.digests.FileDigests), or None:
    # each metric's job of a 101-model group hashed the same 101 pairs files, and the next run hashed them again
    digest_memo: str | None = built()
    # where the group's references, as the metric prepared them, are kept between runs (None: in the job only):
    # a new submission's lexical scoring prepared the group's 10,000 references again for its 10,000 pairs
    reference_memo: str | None = built()

    @classmethod
    def from_params(cls, params, config):
        from radrank import score_cache

        job = cls(**dict(params))
        return dataclasses.replace(job, settings=_settings_for(job.metric, job.identity, config),
                                   cache=score_cache.ScoreCache.from_config(config),
                                   digest_memo=GROUP_DIGESTS.format(dataset=job.dataset, split=job.split),
                                   reference_memo=GROUP_REFERENCES.format(dataset=job.dataset, split=job.split))

    @classmethod
    def of(cls, metric: str, models, settings: dict | None = None, *, dataset="d", split="findings", shard=None,
           cache=None, digest_memo=None, reference_memo=None):
        """The job with ``settings`` (a ``metric_settings.<metric>`` mapping), outside a workflow run."""
        s = metrics.get(metric).settings(settings or {})
        return cls(metric=metric, identity=metrics.get(metric).identity(s), dataset=dataset, split=split,
                   models=tuple(models), shard=shard, settings=s, cache=cache, digest_memo=digest_memo,
                   reference_memo=reference_memo)

    def run(self, input, output):
        import pandas as pd

        from radrank.metrics.prepared import PreparedReferences
        from radrank.scoring import GroupScores, score_group

        metric = metrics.get(self.metric)
        # a required metric's folder of score files (a rule's input), or its files (the Python API's)
        required = {req: dict(zip(self.models, input[req] if isinstance(input[req], (list, tuple)) else
                                  model_score_paths(input[req], self.models))) for req in metric.requires}
        cases = read_cases(input.get("cases"))
        outputs = None if self.shard is not None else score_files(output, self.models, folders_key="score_dir")
        # a score file whose inputs are unchanged is kept (radrank.score_reuse): a new model pays for its own
        digests = FileDigests(self.digest_memo)
        reuse = None if self.shard is not None else score_reuse.GroupReuse.of(
            metric, self.settings, self.models, input.pairs, outputs, cases, required,
            keep=self.cache is not None and self.cache.enabled, digests=digests)
        digests.save()
        todo = [m for m in self.models if reuse is None or m not in reuse.kept]
        paths = dict(zip(self.models, input.pairs))
        # only the columns the metric reads: a group of 100 models holds every model's pairs at once
        pairs = scored_pairs([paths[m] for m in todo], todo, metric.reads, cases)
        references = PreparedReferences(cases["reference"], self.reference_memo, packages={
            metric.name: metric.packages}) if cases is not None and metric.prepares_references else None
        result = score_group(self.metric, self.settings, pairs, shard=self.shard, cache=self.cache,
                             required={req: {m: pd.read_parquet(files[m]) for m in todo}
                                       for req, files in required.items()},
                             references=references) if todo else GroupScores()
        c = result.counts
        kept = f" ({len(reuse.kept)} kept unchanged, {len(todo)} scored)" if reuse is not None and reuse.kept else ""
        log.info("%s on %s/%s: %d models%s, %d pairs, %d distinct%s", self.metric, self.dataset, self.split,
                 len(self.models), kept, c.get("rows", 0), c.get("distinct", c.get("rows", 0)),
                 f", {c['cached']} from the cache, {c['scored']} scored" if "cached" in c else "")
        if c.get("left_unread"):
            log.info("%s: about %d of the pairs scored are in score cache packs too large to read for so few at this "
                     "metric's speed (%g s a pair)", self.metric, c["left_unread"], metric.seconds_per_pair)
        if references is not None:  # the same line whether or not the pairs needed them (all from the cache)
            log.info("%s: the group's %d references, prepared once for every model: made here %d, from an earlier run "
                     "%d%s", self.metric, len(references.texts), len(references.made), len(references.served),
                     f" (kept in {self.reference_memo})" if self.reference_memo else "")
        if c.get("skipped_packs"):  # each named in a warning above: damaged, edited or foreign packs
            log.warning("%s: %d score cache pack(s) were not served (see the warnings above); their pairs were "
                        "scored again", self.metric, c["skipped_packs"])
        versions = {req: io.read_provenance(files[self.models[0]]).get("metric_version")
                    for req, files in required.items()}
        if self.shard is not None:
            prov = _score_provenance(self.metric, self.settings, result.models, None, versions, self.shard)
            io.write_parquet(result.keys, output.shard, prov)
            return
        outs = dict(zip(self.models, outputs))
        write_model_scores(self.metric, self.settings, result, todo, [paths[m] for m in todo],
                           [outs[m] for m in todo], versions, None if reuse is None else reuse.keys)
        if reuse is not None:
            reuse.touch_kept()
        if output.get("score_dir") is not None:
            remove_other_models(output.score_dir, self.models)


def write_model_scores(metric_name, settings, result, models, pair_paths, score_paths, versions: dict,
                       reuse_keys: dict | None = None):
    """One score file per model, each written after every model's table is ready (a failed job leaves none);
    ``reuse_keys``: model -> the key recorded for :mod:`radrank.score_reuse`."""
    metric = metrics.get(metric_name)
    records = []
    for model, pair_path, out in zip(models, pair_paths, score_paths):
        frame = result.by_model[model]
        # a file with a failed request's rows records no key: it is scored again, and those requests retried
        key = (reuse_keys or {}).get(model) if metric.cacheable(frame).all() else None
        prov = _score_provenance(metric_name, settings, result.models, provenance.read_pairs_identity(pair_path),
                                 versions, reuse_key=key)
        records.append((frame, out, prov))
    for frame, out, prov in records:
        io.write_parquet(frame, out, prov, compression=io.SCORE_COMPRESSION)


@dataclass(frozen=True)
class CollectShards(Job):
    """A sharded metric's group: the shards' tables joined, every model's score file written.
    Input: ``pairs`` (one file per model, in :attr:`models` order), ``shards`` and the group's ``cases`` (none for
    a meta-evaluation set). Output: ``score_dir`` (the metric's folder of the group's score files) or ``scores``
    (one file per model)."""

    metric: str
    identity: dict
    models: tuple
    settings: object = built()

    @classmethod
    def from_params(cls, params, config):
        job = cls(**dict(params))
        return dataclasses.replace(job, settings=_settings_for(job.metric, job.identity, config))

    def run(self, input, output):
        import pandas as pd

        from radrank.scoring import GroupScores, assemble, pair_keys

        metric = metrics.get(self.metric)
        cases = read_cases(input.get("cases"))
        pairs = scored_pairs(input.pairs, self.models, metric.reads, cases)
        rows = pd.concat([pd.read_parquet(p) for p in input.shards], ignore_index=True)
        keyed = {m: pair_keys(metric, self.settings, frame) for m, frame in pairs.items()}
        result = GroupScores(by_model=assemble(metric, rows, keyed, pairs),
                             models=io.read_provenance(input.shards[0]).get("models"))
        log.info("%s: %d shards, %d distinct pairs, %d models", self.metric, len(input.shards), len(rows),
                 len(self.models))
        outputs = score_files(output, self.models, folders_key="score_dir")
        keys = score_reuse.GroupReuse.of(metric, self.settings, self.models, input.pairs, outputs, cases,
                                         keep=False).keys
        write_model_scores(self.metric, self.settings, result, self.models, input.pairs, outputs, {}, keys)


def merge_scores(score_paths: list, shared=None) -> tuple:
    """(the score files of one model (one per metric) joined on sample_id, each file's provenance record), both
    from one read of each file; ``shared``: the job's :class:`radrank.io.SharedColumn` of sample ids (its models'
    files hold the same ones)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    tables = [io.read_table(p, shared=shared) for p in score_paths]
    provenance = [io.provenance_of(t.schema) for t in tables]
    ids = tables[0].column("sample_id")
    # ids in strictly increasing order are distinct and sorted already (the case set's order, when a model has
    # every case): the join below is then the columns side by side as they are
    increasing = (pa.types.is_string(ids.type) or pa.types.is_large_string(ids.type)) and ids.null_count == 0 and (
        len(ids) < 2 or pc.all(pc.less(ids.slice(0, len(ids) - 1), ids.slice(1))).as_py())
    if (len(tables) > 1 and all(t.column("sample_id").equals(ids) for t in tables[1:])
            and (increasing or pc.count_distinct(ids, mode="all").as_py() == len(ids))):
        # the usual case (every score file of a model is in its aligned pairs' order): the outer join's rows are
        # the ids sorted, its columns side by side, converted to pandas once (not once per file, then joined:
        # 3x the CPU at 100 models; tests/test_bootstrap.py compares the two)
        names = ["sample_id", *(n for t in tables for n in t.column_names if n != "sample_id")]
        columns = [ids, *(t.column(n) for t in tables for n in t.column_names if n != "sample_id")]
        joined = pa.Table.from_arrays(columns, names=names)
        if not increasing:
            joined = joined.take(pc.sort_indices(joined, [("sample_id", "ascending")]))
        # a block per column: the numeric columns are not copied into one 2-D block (consolidating 16 columns cost
        # ten times the rest of the conversion, 0.45 CPU-s of a statistics job at 100 models)
        return joined.to_pandas(split_blocks=True), provenance
    merged = tables[0].to_pandas()
    for table in tables[1:]:
        merged = merged.merge(table.to_pandas(), on="sample_id", how="outer", validate="one_to_one")
    return merged, provenance


def check_case_set(scores: dict, cases) -> None:
    """Every model's scores cover exactly the group's case set (the scoring jobs align them): else a score file
    is from another run of the case set, and statistics on it would rank models on different cases."""
    import numpy as np

    from radrank.ingest.casesets import distinct_tables

    expected = set(np.asarray(cases, dtype=object))
    same = distinct_tables(scores, ("sample_id",))  # a model whose ids repeat an earlier one's is checked with it
    for model, frame in scores.items():
        if same[model] != model:
            continue
        got = set(frame["sample_id"].to_numpy(dtype=object))  # not element by element from Arrow: ~10x the CPU
        if got != expected:
            raise RuntimeError(f"model {model!r}: its per-sample scores cover {len(got)} cases, {len(got - expected)} "
                               f"outside the group's case set of {len(expected)} and {len(expected - got)} of it "
                               "missing; rerun its scoring jobs (snakemake --forcerun cases)")


def model_score_paths(folders, models) -> list:
    """Each model's score file in each metric's folder of a group (``folders``: one folder or a list, in metric
    order), model by model as :func:`by_model` reads them: ``<folder>/<model>.parquet`` (rules/common.smk
    SCORES)."""
    import os

    folders = [folders] if isinstance(folders, (str, os.PathLike)) else list(folders)
    return [os.path.join(str(folder), f"{model}.parquet") for model in models for folder in folders]


def score_files(files, models, *, files_key: str = "scores", folders_key: str = "score_dirs") -> list:
    """A job's per-model score files: in the metric folders a rule names (``folders_key``), else as listed
    (``files_key``: the Python API's and the tests' explicit files)."""
    folders = files.get(folders_key)
    return model_score_paths(folders, models) if folders is not None else list(files[files_key])


def remove_other_models(folder, models) -> list:
    """Remove the score files in a metric's folder of models the group no longer has (a model taken off the
    sheet): the folder holds the group's models' files only. Returns the paths removed."""
    from pathlib import Path

    keep = {f"{model}.parquet" for model in models}
    gone = [p for p in sorted(Path(str(folder)).glob("*.parquet")) if p.name not in keep]
    for path in gone:
        path.unlink()
    return gone


def by_model(paths: list, models: list, per_model: int) -> dict:
    """model -> its ``per_model`` consecutive paths of a list laid out model by model."""
    paths = list(paths)
    if len(paths) != len(models) * per_model:
        raise RuntimeError(f"{len(paths)} input files for {len(models)} models × {per_model}")
    return {m: paths[i * per_model:(i + 1) * per_model] for i, m in enumerate(models)}


# --- statistics, leaderboard, report ----------------------------------------------------------------------


@dataclass(frozen=True)
class Bootstrap(Job):
    """Statistics of one dataset × split over every model (one shared resample matrix) and every model's
    RadHarmony-style files. Input: ``score_dirs`` (one folder per metric, in order: :func:`model_score_paths`)
    or ``scores`` (models × metrics, in order), ``drops`` (models), and the group's ``cases`` and ``accounting``
    (:class:`Cases`)."""

    dataset: str
    split: str
    models: tuple
    metrics: tuple
    n: int
    seed: int
    level: float
    rank_by: str = "radcliq_v1"
    fallback_rank_by: str = "bleu2"
    min_coverage: float = 0.9
    min_common_cases: int = 10
    missing_cases: str = "score_as_empty"  # config leaderboard.missing_cases
    judge_failures: str = "excluded"  # config leaderboard.judge_failures

    def run(self, input, output):
        import pandas as pd

        from radrank.leaderboard import rank_leaf_of
        from radrank.stats import bootstrap, coverage
        from radrank.stats.bootstrap import ReplicateMemo
        from radrank.stats.failures import failure_accounting, judges_of, score_failures
        from radrank.summaries import write_model_summaries

        score_paths = by_model(score_files(input, self.models), self.models, len(self.metrics))
        drops_paths = by_model(input.drops, self.models, 1)
        leaves = [leaf for name in self.metrics for leaf in metrics.leaves(name)]
        ids = io.SharedColumn("sample_id")  # every model's score files hold the case set's ids: decoded once
        merged = {model: merge_scores(paths, ids) for model, paths in score_paths.items()}
        scores = {model: frame for model, (frame, _) in merged.items()}
        cases = pd.read_parquet(input.cases)["sample_id"]
        accounting = pd.read_parquet(input.accounting)
        check_case_set(scores, cases)
        covered = coverage.model_coverage(scores, len(cases), accounting, min_coverage=self.min_coverage,
                                          missing_cases=self.missing_cases,
                                          case_set=io.read_provenance(input.cases).get("case_set", ""))
        ranked = list(covered.loc[covered["ranked"], "model"])
        if self.missing_cases == "not_ranked":  # an unranked model's numbers rest on the cases it answered
            for model in set(scores) - set(ranked):
                lacking = accounting.loc[(accounting["model"] == model) & (accounting["status"] == "missing"),
                                         "sample_id"]
                scores[model] = scores[model][~scores[model]["sample_id"].isin(set(lacking))]
        rank_leaf, _ = rank_leaf_of([leaf.name for leaf in leaves], self.rank_by, self.fallback_rank_by)
        judges = judges_of(self.metrics)
        # counted on the scores as the judges wrote them; then their failed pairs scored as the config says
        failures = failure_accounting(scores, judges, ranked)
        if self.judge_failures != "excluded":
            scores = {m: score_failures(frame, judges, self.judge_failures) for m, frame in scores.items()}
        # a model whose statistics were resampled before is served from the group's memo (an update() output)
        memo = ReplicateMemo(output.replicate_memo) if output.get("replicate_memo") else None
        result = bootstrap(scores, leaves, n_boot=self.n, seed=self.seed, level=self.level, common_to=ranked,
                           common_leaves=[rank_leaf], memo=memo)
        covered = coverage.flag_ranking(covered, result.common_cases, self.min_common_cases)
        result.comparisons["flag"] = coverage.comparison_flags(result.comparisons["n_common"], self.min_common_cases)
        common = result.common_replicates
        prov = provenance.record(
            "statistics", dataset=self.dataset, split=self.split, models=sorted(scores), metrics=list(self.metrics),
            n_bootstrap=self.n, seed=self.seed, level=self.level, n_cases=len(result.cases),
            n_dataset_cases=len(cases), ranked_models=ranked, n_rank_cases=result.common_cases,
            min_coverage=self.min_coverage, min_common_cases=self.min_common_cases, missing_cases=self.missing_cases,
            judge_failures=self.judge_failures,
            score_provenance={m: [record.get("metric") for record in records] for m, (_, records) in merged.items()},
            method="exact paired bootstrap over case ids from per-sample sufficient statistics "
                   "(radrank.stats.bootstrap)",
        )
        log.info("%s/%s: %d models, %d cases, %d resamples%s", self.dataset, self.split, len(scores),
                 len(result.cases), self.n, "" if memo is None else
                 f"; {memo.hits} models' replicates from the memo, {memo.stored} resampled; "
                 f"{memo.pairs_served} pairs' comparisons on all cases from the memo")
        io.write_parquet(result.comparisons, output.comparisons, prov)
        io.write_csv(result.comparisons, output.comparisons_csv)
        io.write_parquet(result.summary, output.summary, prov)
        io.write_parquet(result.replicates, output.replicates, prov)
        io.write_parquet(covered, output.coverage, prov)
        io.write_parquet(common, output.rank_replicates, prov)
        # the LLM judges' failed answers per model and the ranks under each failure policy (radrank.stats.failures)
        io.write_parquet(failures, output.failures, prov)
        write_model_summaries(result.replicates, result.summary, {m: p[0] for m, p in drops_paths.items()},
                              output.model_files)
        if memo is not None:
            memo.prune()


@dataclass(frozen=True)
class Leaderboard(Job):
    """The leaderboard CSV and the rank distribution it rests on. Input: ``summary``, ``replicates``,
    ``comparisons``, ``failures`` (:mod:`radrank.stats.failures`), ``drops`` (models, in order), optional
    ``models_sheet``."""

    dataset: str
    split: str
    models: tuple
    rank_by: str
    fallback_rank_by: str
    decimals: int
    level: float
    models_sheet_sha256: str | None = None  # its content, not its mtime, reruns the leaderboard
    min_common_cases: int = 10
    columns: str = "computed"  # config leaderboard.columns

    def run(self, input, output):
        import pandas as pd

        from radrank.leaderboard import build_leaderboard, rank_leaf_of, rank_uncertainty
        from radrank.sheets import read_models_sheet

        summary = pd.read_parquet(input.summary)
        rank_leaf, _ = rank_leaf_of(list(dict.fromkeys(summary["metric"])), self.rank_by, self.fallback_rank_by)
        # the rank leaf's resamples of the ranked models on the cases they share (radrank.stats.coverage)
        replicates = pd.read_parquet(input.rank_replicates)
        comparisons = pd.read_parquet(input.comparisons, filters=[("metric", "==", rank_leaf)])
        covered = pd.read_parquet(input.coverage)
        rank_summary, distribution, tied = rank_uncertainty(summary, replicates, comparisons, rank_by=self.rank_by,
                                                            fallback_rank_by=self.fallback_rank_by, level=self.level,
                                                            coverage=covered, min_common_cases=self.min_common_cases)
        drops = {m: io.read_text_table(p) for m, p in zip(self.models, input.drops)}
        sheet = input.get("models_sheet")
        meta = read_models_sheet(sheet) if sheet else None
        table = build_leaderboard(summary, drops, meta, rank_by=self.rank_by, fallback_rank_by=self.fallback_rank_by,
                                  decimals=self.decimals, rank_summary=rank_summary, tied=tied, coverage=covered,
                                  columns=self.columns, failures=pd.read_parquet(input.failures))
        first = table.iloc[0]
        log.info("%s/%s leaderboard: %d models, %s; rank 1: %s (P(rank=1) = %s, rank interval %s)", self.dataset,
                 self.split, len(table), first["Ranked by"], first["Model Name"], first["P(rank=1)"],
                 first["Rank CI"])
        prov = provenance.record("ranks", dataset=self.dataset, split=self.split, metric=rank_leaf, level=self.level,
                                 n_bootstrap=int(rank_summary["n_bootstrap"].iloc[0]) if len(rank_summary) else 0,
                                 method="competition ranks of the models on every shared bootstrap resample "
                                        "(radrank.stats.ranks)")
        io.write_parquet(distribution, output.ranks, prov)
        io.write_csv(table, output.board)


@dataclass(frozen=True)
class Report(Job):
    """The report: its index page (report.html), one page per dataset × split beside it (:meth:`page_name`), its
    Markdown summary and its figures. Input: ``group0``, ``group1``, … (per dataset × split: its ``GROUP_FILES``,
    then per model its ``MODEL_FILES`` (:mod:`radrank.report.data`) and score files, each by name: :meth:`inputs`),
    ``metaeval`` (one agreement table per set, in :attr:`metaeval_sets` order). Output: ``html``, ``markdown``,
    ``figures`` (a folder), ``pages`` (the group pages in group order; by default :meth:`page_name` beside ``html``)
    and ``appendix`` (the reporting appendix in Markdown; by default appendix.md beside ``html``, which links it by
    that name). A group page whose inputs, options and code are those it was built from is kept, not built again
    (:mod:`radrank.report.reuse`: the pages and the figures folder are ``update()`` outputs).

    ``processes``: how many groups are built at once, each in a process of its own (the rule's threads; not a
    param: the pages are the same bytes however many build them)."""

    groups: tuple  # ((dataset, split, models, metrics), ...)
    bootstrap: dict
    empty_hypothesis: str
    cases: int
    metaeval_sets: tuple
    config_hash: str
    processes: int = field(default=1, metadata={"param": False})
    # where each group's file digests are remembered (GROUP_DIGESTS, filled in per dataset × split), or None: the
    # page keys hashed every file of every group (1,000 at 100 models, 0.1 CPU-s), most of them unchanged
    digest_memo: str | None = built()
    # fewer (model, group) entries than this are built here when the helpers are spawned: a spawned process's
    # start (its imports, some 2 s) would cost more than it saves
    PARALLEL_MIN_ENTRIES = 60

    @classmethod
    def from_params(cls, params, config):
        return dataclasses.replace(cls(**dict(params)), digest_memo=GROUP_DIGESTS)

    def _digests(self, layout: list):
        """(path -> sha256 of a file the pages read (:func:`radrank.report.reuse.group_files`), the memos to save):
        from its group's memo where :attr:`digest_memo` is set (the memo the group's scoring jobs keep: its pairs
        files are there already), else read."""
        from radrank.provenance import file_sha256

        if self.digest_memo is None:
            return file_sha256, []
        from radrank.report.reuse import group_files

        memos, of_path = [], {}
        for entry in layout:
            memo = FileDigests(self.digest_memo.format(dataset=entry["dataset"], split=entry["split"]))
            memos.append(memo)
            of_path.update({path: memo for path in group_files(entry)})
        return (lambda path: of_path[str(path)](path)), memos

    @staticmethod
    def page_name(dataset: str, split: str) -> str:
        """The file name of a dataset × split's page, beside report.html (:func:`radrank.report.page_name`)."""
        from radrank.report import page_name

        return page_name(dataset, split)

    @classmethod
    def of_layout(cls, layout: list, *, bootstrap: dict, empty_hypothesis: str, cases: int, metaeval_sets=(),
                  config_hash: str = "", processes: int = 1):
        """The job for an explicit layout (files written elsewhere: tests, benchmarks); run it with :meth:`write`."""
        groups = tuple((g["dataset"], g["split"], tuple(g["models"]),
                        tuple(next(iter(g["models"].values()))["scores"]) if g["models"] else ()) for g in layout)
        return cls(groups=groups, bootstrap=dict(bootstrap), empty_hypothesis=empty_hypothesis, cases=cases,
                   metaeval_sets=tuple(metaeval_sets), config_hash=config_hash, processes=processes)

    def outputs(self, folder) -> "Files":
        """The job's output files in ``folder`` (as rules/report.smk declares them in results/report)."""
        import os

        folder = str(folder)
        from radrank.report.appendix import APPENDIX

        return Files(markdown=os.path.join(folder, "report.md"), html=os.path.join(folder, "report.html"),
                     figures=os.path.join(folder, "figures"), appendix=os.path.join(folder, APPENDIX),
                     pages=[os.path.join(folder, self.page_name(d, s)) for d, s, *_ in self.groups])

    @staticmethod
    def inputs(layout: list, metaeval_paths=()) -> dict:
        """The rule's input by name for ``layout`` (as :meth:`layout` gives it; :meth:`layout` reads it back). Per
        group ``i`` (page order): ``group{i}_leaderboard``, ``_ranks``, ``_summary``, ``_comparisons`` (one file
        each), ``group{i}_pairs`` and ``group{i}_drops`` (one per model, in the group's model order),
        ``group{i}_score_dirs`` (one folder of every model's score files per metric, in the group's metric order:
        the layout's score files must be :func:`model_score_paths`); ``metaeval``: one agreement table per set."""
        import os

        from radrank.report.data import GROUP_FILES, MODEL_FILES

        named = {}
        for i, entry in enumerate(layout):
            models = list(entry["models"].values())
            metric_names = list(models[0]["scores"]) if models else []
            named.update({f"group{i}_{kind}": str(entry[kind]) for kind in GROUP_FILES})
            named.update({f"group{i}_{kind}": [str(m[kind]) for m in models] for kind in MODEL_FILES})
            folders = [os.path.dirname(str(models[0]["scores"][name])) for name in metric_names]
            given = [str(m["scores"][name]) for m in models for name in metric_names]
            if given != model_score_paths(folders, entry["models"]):
                raise ValueError(f"group {i}: a model's score files must be <metric folder>/<model>.parquet, one "
                                 f"folder per metric (rules/common.smk SCORES); got {given[:len(metric_names)]}")
            named[f"group{i}_score_dirs"] = folders
        named["metaeval"] = [str(path) for path in metaeval_paths]
        return named

    def layout(self, input) -> list:
        """Per group the files it reads (the rule's input, named by :meth:`inputs`), as
        :func:`radrank.report.load_group` takes them."""
        from radrank.report.data import GROUP_FILES, MODEL_FILES

        out = []
        for i, (dataset, split, models, metric_names) in enumerate(self.groups):
            scores = by_model(model_score_paths(input[f"group{i}_score_dirs"], models), list(models),
                              len(metric_names))
            per_model = {kind: by_model(input[f"group{i}_{kind}"], list(models), 1) for kind in MODEL_FILES}
            entry = {"dataset": dataset, "split": split, "models": {},
                     **{kind: str(input[f"group{i}_{kind}"]) for kind in GROUP_FILES}}
            for model in models:
                entry["models"][model] = {**{kind: str(per_model[kind][model][0]) for kind in MODEL_FILES},
                                          "scores": dict(zip(metric_names, map(str, scores[model])))}
            out.append(entry)
        return out

    def run(self, input, output):
        self.write(self.layout(input), input["metaeval"], output)

    def _pages(self, layout: list, output) -> list:
        import os

        folder = os.path.dirname(str(output.html))
        names = [self.page_name(e["dataset"], e["split"]) for e in layout]
        given = output.get("pages") if isinstance(output, dict) else getattr(output, "pages", None)
        paths = [str(p) for p in given] if given else [os.path.join(folder, n) for n in names]
        wanted = [os.path.join(folder, n) for n in names]
        if [os.path.normpath(p) for p in paths] != [os.path.normpath(p) for p in wanted]:  # the index links by name
            raise RuntimeError(f"the report's pages must be {wanted} (beside {output.html}), not {paths}")
        return paths

    @staticmethod
    def _appendix(output) -> str:
        """The appendix's path: appendix.md beside the index, which links it by name."""
        import os

        from radrank.report.appendix import APPENDIX

        wanted = os.path.join(os.path.dirname(str(output.html)), APPENDIX)
        given = output.get("appendix") if isinstance(output, dict) else getattr(output, "appendix", None)
        if given and os.path.normpath(str(given)) != os.path.normpath(wanted):
            raise RuntimeError(f"the report's appendix must be {wanted} (beside {output.html}), not {given}")
        return str(given or wanted)

    def write(self, layout: list, metaeval_paths, output):
        """The report of ``layout`` (:meth:`layout`) and the sets' agreement tables (``metaeval_paths``): each group's
        page (in ``processes`` processes at once), then the index and the summary."""
        import os

        import pandas as pd

        from radrank.report import navigation, render_index
        from radrank.report.reuse import PageReuse

        pages, appendix_path = self._pages(layout, output), self._appendix(output)
        folder = os.path.dirname(str(output.html))
        options = {"cases": self.cases, "level": float(self.bootstrap["level"]), "link_base": folder,
                   "nav": navigation([(e["dataset"], e["split"]) for e in layout]),
                   "metaeval": bool(self.metaeval_sets), "config_hash": self.config_hash}
        # a directory output, complete once the index is written; it keeps the figures of the pages still right
        digest, memos = self._digests(layout)
        reuse = PageReuse(layout, options, pages, output.figures, digest)
        for memo in memos:
            memo.save()
        kept = reuse.kept()
        reuse.prepare(kept)
        todo = [(path, entry) for path, entry in zip(pages, layout) if os.path.basename(path) not in kept]
        built, n_figures = {}, 0
        memos = [reuse.drill_down_memo(path) for path, _ in todo]
        for (path, _), group in zip(todo, self._build([entry for _, entry in todo], options, memos)):
            log.info("%s", group.log)
            for name, svg in sorted(group.figures.items()):
                io.write_text(svg, os.path.join(str(output.figures), name))
            n_figures += len(group.figures)
            io.write_text(group.html, path)
            group.html, group.figures = "", {}  # written: only the index's parts are kept
            reuse.built(group)
            built[os.path.basename(path)] = group
        rendered = [built.get(os.path.basename(path)) or kept[os.path.basename(path)] for path in pages]
        if kept:
            log.info("report: %d of %d pages kept (their inputs, options and code unchanged): %s", len(kept),
                     len(pages), ", ".join(sorted(kept)))
        metaeval = {name: pd.read_csv(path) for name, path in zip(self.metaeval_sets, metaeval_paths)}
        markdown, html, figures, appendix = render_index(rendered, bootstrap=self.bootstrap,
                                                         empty_hypothesis=self.empty_hypothesis,
                                                         metaeval=metaeval or None, config_hash=self.config_hash)
        for name, svg in sorted(figures.items()):
            io.write_text(svg, os.path.join(str(output.figures), name))
        log.info("report: %d pages (%d built), %d figures written, %.1f kB of index", len(pages), len(todo),
                 n_figures + len(figures), len(html.encode()) / 1000)
        io.write_text(appendix, appendix_path)
        reuse.finish(kept)
        io.write_text(html, output.html)
        io.write_text(markdown, output.markdown)

    def _build(self, layout: list, options: dict, memos: list):
        """Each group's :class:`radrank.report.GroupPage` (``memos``: each one's drill-down memo), in order: here,
        or, for a report of at least :attr:`PARALLEL_MIN_ENTRIES` (model, group) entries, in ``processes``
        processes: forked in a radrank worker (:data:`FORK_SAFE`), else fresh ones (spawned: a fork of a process
        with running threads, Snakemake's, may hang; a script that runs the job so must guard its main code with
        ``if __name__ == "__main__"``, which a spawned process imports)."""
        from radrank.report import build_group

        workers = max(1, min(int(self.processes or 1), len(layout)))
        # a fork costs milliseconds, a spawned process its imports
        least = 0 if FORK_SAFE else self.PARALLEL_MIN_ENTRIES
        if workers == 1 or sum(len(e["models"]) for e in layout) < least:
            for entry, memo in zip(layout, memos):
                yield build_group(entry, options, memo)
            return
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        if FORK_SAFE:  # what drawing imports, imported once, before the fork
            from radrank.report.figures import import_for_drawing

            import_for_drawing()
        context = multiprocessing.get_context("fork" if FORK_SAFE else "spawn")
        with ProcessPoolExecutor(workers, mp_context=context) as pool:
            yield from pool.map(build_group, layout, [options] * len(layout), memos)


# --- generation ----------------------------------------------------------------------------------------


def generation_entry(config: dict, dataset: str, model: str) -> tuple[int, dict]:
    """(index, entry): the config ``generation`` entry that generates ``model`` on ``dataset`` (the Plan refuses
    two)."""
    for i, entry in enumerate(config.get("generation") or ()):
        if entry.get("dataset") == dataset and entry.get("model") == model:
            return i, entry
    raise RuntimeError(f"config 'generation' has no entry for model {model!r} on dataset {dataset!r}; rerun "
                       "Snakemake so that it plans the jobs again")


def generator_settings(generator: str, values: dict | None, where: str):
    """A generation entry's settings: a backbone's typed Settings (its defaults, checked), a callable's dict as
    given."""
    from radrank import backbones

    if generator in backbones.names():
        return backbones.get(generator).settings(values, where)
    return dict(values or {})


def samples_per_call(generator: str, settings, batch_size: int | None) -> int:
    """Samples per generator call: the entry's ``batch_size``, else the backbone's choice (a callable: 8)."""
    from radrank import backbones
    from radrank.backbones.base import DEFAULT_SAMPLES_PER_CALL

    if generator in backbones.names():
        return backbones.get(generator).samples_per_call(settings, batch_size)
    return int(batch_size or DEFAULT_SAMPLES_PER_CALL)


def generation_identity(generator: str, settings, allow_list=()) -> dict:
    """What a generation shard's reports depend on of its generator: a backbone's settings without device, batch
    size and placement, and whether its own model may run remote code (yes/no, never the allow-list); a user's
    callable's settings as given (radrank cannot tell which of them only change speed)."""
    from radrank import backbones

    if generator in backbones.names():
        return backbones.get(generator).identity(settings, allow_list)
    return {"callable": generator, "settings": dict(settings)}


@dataclass(frozen=True)
class Generate(Job):
    """One shard of a generation run: a backbone (radrank.backbones) or a user's callable over a dataset.

    Its params hold what changes the reports (``identity``: :func:`generation_identity`); the generator's full
    settings, the ``trust_remote_code`` allow-list and the samples per call are read from the config when the job
    runs, so a new device, batch size or an unrelated allow-list entry reruns no shard."""

    dataset: str
    model: str
    adapter: str
    root: str
    adapter_options: dict
    generator: str
    identity: dict
    task: str
    ref_section: str
    use_indication: bool
    image_format: str
    max_images: int | None
    max_samples: int | None
    empty_hypothesis: str
    max_chars: int | None
    shard: tuple
    settings: object = built()  # a backbone's Settings, or a callable's dict
    trust_remote_code: tuple = built()
    batch_size: int = built()

    @classmethod
    def from_params(cls, params, config):
        job = cls(**dict(params))
        i, entry = generation_entry(config, job.dataset, job.model)
        settings = generator_settings(job.generator, entry.get("settings"), f"generation[{i}].settings")
        allow = tuple(config.get("trust_remote_code") or ())
        if generation_identity(job.generator, settings, allow) != job.identity:
            raise RuntimeError(f"generation of {job.model!r} on {job.dataset!r}: the settings in the config differ "
                               f"from the job's identity ({job.identity}); rerun Snakemake so that it plans the jobs "
                               "again")
        return dataclasses.replace(job, settings=settings, trust_remote_code=allow,
                                   batch_size=samples_per_call(job.generator, settings, entry.get("batch_size")))

    def run(self, input, output):
        from radrank import backbones, generate
        from radrank.datasets import make_adapter

        if self.generator in backbones.names():
            fn = backbones.load(self.generator, self.settings, self.trust_remote_code, task=self.task)
        else:
            fn = self.generator  # "package.module:callable", resolved by the generation job
        generate.generate(make_adapter(self.adapter, self.root, **self.adapter_options), fn, shard=tuple(self.shard),
                          out_pairs=output.pairs, out_drops=output.drops, task=self.task, model=self.model,
                          generator_settings=self.identity["settings"], ref_section=self.ref_section,
                          use_indication=self.use_indication, image_format=self.image_format,
                          max_images=self.max_images, batch_size=self.batch_size,
                          max_samples=self.max_samples, empty_hypothesis=self.empty_hypothesis,
                          max_chars=self.max_chars)


@dataclass(frozen=True)
class MergeGenerated(Job):
    """A generated model's shards, in dataset order. Input: ``pairs`` and ``drops`` (shards, in order)."""

    def run(self, input, output):
        from radrank import generate

        generate.merge(pair_paths=list(input.pairs), drop_paths=list(input.drops), out_pairs=output.pairs,
                       out_drops=output.drops)


# --- meta-evaluation ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MetaevalPairs(Job):
    """A human-judged set → canonical pairs (scored like any submission) and its item table.
    Input: the set's files, named as its reader names them."""

    set_name: str
    reader: str
    options: dict
    files: tuple  # the input names holding one file each
    file_lists: tuple = ()  # the input names holding a list of files
    files_sha256: dict = field(default_factory=dict)  # their content, not their mtime, reruns the job

    def run(self, input, output):
        from radrank import metaeval

        files = {**{name: input[name] for name in self.files}, **{name: list(input[name]) for name in self.file_lists}}
        item_set = metaeval.read_set(self.set_name, self.reader, files, self.options)
        pairs = metaeval.pairs_table(item_set)
        paths = [p for value in files.values() for p in (value if isinstance(value, list) else [value])]
        sources = {str(p): provenance.file_sha256(p) for p in paths}
        prov = provenance.record("pairs", dataset=metaeval.dataset_name(self.set_name), split=metaeval.SPLIT,
                                 model=metaeval.MODEL, format=f"metaeval-{self.reader}", sources=sources,
                                 ref_section=None, empty_hypothesis="score", max_report_chars=None, n_pairs=len(pairs))
        log.info("meta-evaluation set %s: %d candidates in %d cases (%s)", self.set_name, len(pairs),
                 item_set.items["case"].nunique(), item_set.description)
        io.write_parquet(item_set.items, output.item_table, {**prov, "stage": "metaeval_items",
                                                             "metaeval": item_set.meta()})
        io.write_parquet(pairs, output.pairs, prov)


@dataclass(frozen=True)
class MetaevalAgreement(Job):
    """Per-item scores, agreement per metric leaf with its interval, and paired metric comparisons.
    Input: ``item_table`` and ``score_dirs`` (the set's folder per metric, in :attr:`metric_names` order) or
    ``scores`` (its file per metric, same order)."""

    set_name: str
    metric_names: tuple
    n_boot: int
    seed: int
    level: float
    tie_tolerance: float

    def run(self, input, output):
        from radrank.metaeval import agreement
        from radrank.metaeval.items import from_meta

        prov = io.read_provenance(input.item_table)
        item_set = from_meta(prov["metaeval"], io.read_parquet(input.item_table))
        leaves = [leaf for name in self.metric_names for leaf in metrics.leaves(name)]
        metric_of_leaf = {leaf.name: name for name in self.metric_names for leaf in metrics.leaves(name)}
        from radrank import metaeval

        scores, score_provenance = merge_scores(score_files(input, [metaeval.MODEL]))
        per_item, table, comparisons = agreement.evaluate(
            item_set, scores, leaves, n_boot=self.n_boot, seed=self.seed, level=self.level,
            tie_tolerance=self.tie_tolerance, metric_of_leaf=metric_of_leaf)
        skipped = table.loc[table["measure"] == "not_applicable", "metric"].tolist()
        if skipped:
            log.info("%s: %s are corpus statistics with no value per report; listed as not_applicable",
                     self.set_name, ", ".join(skipped))
        if item_set.fitted_metrics:
            log.info("%s: %s %s", self.set_name, ", ".join(item_set.fitted_metrics), item_set.fitted_note)
        out_prov = provenance.record(
            "metaeval", set=self.set_name, metrics=list(self.metric_names), n_bootstrap=self.n_boot, seed=self.seed,
            level=self.level, tie_tolerance=self.tie_tolerance, items=prov.get("sources"),
            score_provenance=[record.get("metric") for record in score_provenance],
            method="radrank.metaeval.agreement: bootstrap over cases with radrank.stats.bootstrap's draws")
        headline = table[table["headline"]]
        for row in headline.itertuples():
            log.info("%s %s %s: %.3f [%.3f, %.3f] (n=%d)", self.set_name, row.measure, row.metric, row.estimate,
                     row.ci_lower, row.ci_upper, row.n)
        io.write_csv(comparisons, output.comparisons)
        io.write_csv(table, output.agreement)
        io.write_parquet(per_item, output.scores, out_prov)
