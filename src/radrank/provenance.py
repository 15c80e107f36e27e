"""Provenance recorded in every stage's output (parquet metadata, CSV side files).

Only facts that change numbers go in: code and metric versions, environment,
package versions, models, settings and a hash of the config. Nothing that
depends on the time or the host, so rerunning gives byte-identical files.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import sys
from importlib import metadata
from pathlib import Path

import radrank

BASE_PACKAGES = ("numpy", "pandas", "pyarrow")


def stable_hash(obj) -> str:
    """sha256 of the canonical JSON of ``obj`` (first 16 hex digits)."""
    blob = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def file_sha256(path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def package_versions(names) -> dict:
    out = {}
    for name in names:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def _interpreter() -> str:
    exe = Path(sys.executable)
    try:
        return str(exe.relative_to(Path.cwd()))
    except ValueError:
        return str(exe)


def environment(packages=()) -> dict:
    return {
        "env": os.environ.get("RADRANK_ENV", "unmanaged"),
        "python": platform.python_version(),
        "interpreter": _interpreter(),
        "packages": package_versions(tuple(BASE_PACKAGES) + tuple(packages)),
    }


def record(stage: str, **fields) -> dict:
    return {"stage": stage, "radrank": radrank.__version__, **fields}


def read_pairs_identity(pairs_path) -> dict:
    """What identifies a pairs table: its sources' hashes and its policies."""
    from radrank import io

    meta = io.read_provenance(pairs_path)
    keep = ("dataset", "split", "model", "format", "sources", "ref_section", "empty_hypothesis",
            "max_report_chars", "n_pairs")
    return {k: meta.get(k) for k in keep}
