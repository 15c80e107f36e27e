"""A group's score files that are still right, kept instead of scored again.

One scoring job covers every model of a dataset × split, so adding a model reruns it. Its per-model score
files are declared ``update()`` outputs (Snakemake leaves them in place and restores them if the job fails),
and each records a *reuse key*: a digest of everything its numbers depend on —

* the metric's cache namespace (identity: version and scoring settings; the content of every weight file it
  loads: :func:`radrank.scoring.cache_key`) and the versions of the packages it runs on;
* the bytes of the model's pairs file (what it submitted, as ingested);
* the group's case set as :func:`radrank.ingest.casesets.align` reads it (sample ids and references);
* the bytes of each score file the metric reads (RadCliQ reads its components').

A file whose recorded key equals the key the job computes now, whose rows are the case set's count and whose
columns are the metric's, is kept (touched, so that it is newer than its inputs); every other model — a new
one, a changed submission, a changed case set or setting — is scored, through the pair cache as before. A
per-model score is a function of that model's own pairs (a corpus statistic such as BERTScore's idf is its
own corpus), so keeping one never depends on which other models share the group. Nothing is kept when the
score cache is off (``score_cache.dir: off`` rescores everything) or for a sharded metric (its shards go
through the pair cache); the key is recorded either way.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

FIELD = "reuse_key"  # the provenance field of a score file that holds its key


def cases_digest(cases) -> str:
    """What alignment reads of a case set: its sample ids and references, in order (one sha256 over their
    encodings: 4 ms for 10,000 cases, against 22 for a digest per case joined)."""
    from radrank.score_cache import rows_digest

    return rows_digest(cases, ("sample_id", "reference"))


def reuse_key(namespace: dict, environment: dict, pairs_digest: str, cases: str | None, required: dict) -> str:
    # the whole sha256, not provenance.stable_hash's 64 bits: a submitter must not be able to make a changed file
    # hit the key of the scores it had before
    blob = json.dumps({"namespace": namespace, "environment": environment, "pairs": pairs_digest, "cases": cases,
                       "required": required}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def recorded(path, columns, n_rows: int | None) -> str | None:
    """The key a score file records, if it is whole (readable footer, ``n_rows`` rows, the metric's columns)."""
    import pyarrow.parquet as pq

    try:
        meta = pq.read_metadata(path)
    except (OSError, ValueError):  # absent, truncated, not parquet: scored again
        return None
    if n_rows is not None and meta.num_rows != n_rows:
        return None
    if list(meta.schema.names) != ["sample_id", *columns]:
        return None
    from radrank.io import PROVENANCE_KEY

    raw = (meta.metadata or {}).get(PROVENANCE_KEY)
    try:
        return json.loads(raw).get(FIELD) if raw else None
    except ValueError:
        return None


@dataclass
class GroupReuse:
    """Which models of a scoring job keep their score file (``kept``) and each model's key (``keys``)."""

    keys: dict = field(default_factory=dict)  # model -> its reuse key now
    kept: dict = field(default_factory=dict)  # model -> its score file, still right

    @classmethod
    def of(cls, metric, settings, models, pair_paths, score_paths, cases=None, required_paths=None, *,
           keep: bool = True, runtime=None, digests=None):
        """``cases``: the group's case set (None: a meta-evaluation set, which has none); ``required_paths``:
        required metric -> model -> its score file; ``keep``: whether still-right files are kept (else only the
        keys are computed: every file records its key, cache on or off, sharded or not, so that the files are
        the same bytes either way); ``digests``: path -> sha256 of the file (a remembering
        :class:`radrank.digests.FileDigests`; default: each file read)."""
        from radrank import provenance
        from radrank.provenance import file_sha256
        from radrank.runtime import Runtime
        from radrank.scoring import cache_key

        namespace = cache_key(metric, settings, runtime or Runtime())
        environment = provenance.environment(metric.packages)
        set_digest = cases_digest(cases) if cases is not None else None
        n_rows = len(cases) if cases is not None else None
        digest = digests or file_sha256
        out = cls()
        for model, pairs_path, score_path in zip(models, pair_paths, score_paths):
            required = {req: digest(files[model]) for req, files in sorted((required_paths or {}).items())}
            key = reuse_key(namespace, environment, digest(pairs_path), set_digest, required)
            out.keys[model] = key
            if keep and recorded(score_path, metric.columns, n_rows) == key:
                out.kept[model] = score_path
        return out

    def touch_kept(self) -> None:
        """The kept files newer than the inputs they were checked against (else Snakemake would plan their job
        again on the next run)."""
        for path in self.kept.values():
            os.utime(Path(path))
