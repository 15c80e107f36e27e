"""Provenance recorded in every stage's output (parquet metadata, CSV side files).

Only facts that change numbers go in: code and metric versions, environment,
package versions, models, settings and a hash of the config. Nothing that
depends on the time or the host, so rerunning gives byte-identical files: the
environment is named by its lock key (the hash of its pins, Python version and
torch build — see radrank.envs), never by an interpreter path. URLs are
recorded without credentials, query or fragment (``https://user:key@host/v1?k=x``
→ ``https://host/v1``): an endpoint's key never reaches an output file.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import sys
from importlib import metadata
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

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


STAMP = ".radrank-env.json"  # written into every venv by radrank.envs.build (radrank.envs.STAMP)
_URL_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def lock_key(env: str | None = None) -> str | None:
    """The running environment's lock key: from the venv's build stamp, else (a conda env built
    from envs/<family>.yaml) the key of that env file's pins; None outside radrank's envs."""
    try:
        stamp = json.loads((Path(sys.prefix) / STAMP).read_text())
        return stamp.get("key")
    except (OSError, ValueError):
        pass
    family = env or os.environ.get("RADRANK_ENV")
    if not family:
        return None
    from radrank import envs

    try:
        return envs.read_spec(family).key(None)
    except envs.EnvError:
        return None


def environment(packages=()) -> dict:
    env = os.environ.get("RADRANK_ENV", "unmanaged")
    return {
        "env": env,
        "lock_key": lock_key(None if env == "unmanaged" else env),
        "python": platform.python_version(),
        "packages": package_versions(tuple(BASE_PACKAGES) + tuple(packages)),
    }


def scrub_url(url: str) -> str:
    """``url`` without user name, password, query or fragment."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:  # IPv6
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    netloc = host + (f":{port}" if port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def scrub(obj):
    """``obj`` with every URL string scrubbed (:func:`scrub_url`), recursively."""
    if isinstance(obj, str):
        return scrub_url(obj) if _URL_RE.match(obj) else obj
    if isinstance(obj, dict):
        return {k: scrub(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [scrub(v) for v in obj]
    return obj


def record(stage: str, **fields) -> dict:
    return {"stage": stage, "radrank": radrank.__version__, **scrub(fields)}


def read_pairs_identity(pairs_path) -> dict:
    """What identifies a pairs table: its sources' hashes and its policies."""
    from radrank import io

    meta = io.read_provenance(pairs_path)
    keep = ("dataset", "split", "model", "format", "sources", "ref_section", "empty_hypothesis",
            "max_report_chars", "n_pairs")
    return {k: meta.get(k) for k in keep}
