"""Provenance recorded in every stage's output (parquet metadata, CSV side files).

Only facts that change numbers go in: code and metric versions, environment,
package versions, models, settings and a hash of the config. Nothing that
depends on the time or the host, so rerunning gives byte-identical files: the
environment is named by its lock key (the hash of its pins, Python version and
torch build — see radrank.envs), never by an interpreter path. URLs are
recorded without credentials, query or fragment (``https://user:key@host/v1?k=x``
→ ``https://host/v1``): an endpoint's key never reaches an output file.

Credentials in an endpoint URL never reach a log or Snakemake's stored params
either: :func:`redact_url` removes (identities, rule params) or masks (logs,
messages) the user name and password and every query parameter whose name looks
like a secret (``token``, ``key``, ``api_key``, ``access_token``, ``password``,
``secret``, ``sig``, …), and :func:`mask_logs` masks them in every log record of
the process (radrank's, the HTTP clients', anyone's) before any handler sees it.

The environment is named by the interpreter that runs, not by how it was started:
a radrank venv's build stamp (``<envs dir>/<family>/.radrank-env.json``) names its
family; a conda env built from ``envs/<family>.yaml`` names it through the
``RADRANK_ENV`` variable its activation sets; anything else is ``unmanaged``.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import sys
from functools import lru_cache
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
    return {name: _version(name) for name in names}


@lru_cache(maxsize=None)
def _version(name: str) -> str | None:
    """The installed version of ``name``, looked up once per process (each lookup walks sys.path's dist-info
    folders: 2-3 ms; a scoring job asked for its environment's twice). A package upgraded while a run goes on is
    seen by the next run's processes, as the modules the process imported are the ones it started with."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


@lru_cache(maxsize=8)
def code_digest(packages: tuple = ()) -> str:
    """sha256 of every module of the radrank package (path and bytes) and of the versions of ``packages``: what a
    result kept for reuse was computed by (radrank.report.reuse, radrank.stats.bootstrap.ReplicateMemo)."""
    root = Path(radrank.__file__).resolve().parent
    h = hashlib.sha256(json.dumps(package_versions(packages), sort_keys=True).encode())
    for path in sorted(root.rglob("*.py")):
        h.update(path.relative_to(root).as_posix().encode() + b"\0")
        h.update(path.read_bytes() + b"\0")
    return h.hexdigest()


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


def _stamp() -> dict | None:
    try:
        stamp = json.loads((Path(sys.prefix) / STAMP).read_text())
    except (OSError, ValueError):
        return None
    return stamp if isinstance(stamp, dict) else None


def env_name() -> str:
    """The radrank environment this interpreter belongs to (see the module docstring): the same whether
    Snakemake was started through ``envs.py snakemake`` / ``make`` (which export ``RADRANK_ENV``) or as
    ``.venvs/core/bin/snakemake`` (which does not)."""
    stamp = _stamp()
    if stamp is not None:  # a radrank venv names its family in its build stamp
        return str(stamp.get("family") or "unmanaged")
    if (Path(sys.prefix) / "conda-meta").is_dir() and os.environ.get("RADRANK_ENV"):
        return os.environ["RADRANK_ENV"]  # set by the activation of this conda env (envs/<family>.yaml)
    return "unmanaged"


def environment(packages=()) -> dict:
    env = env_name()
    stamp = _stamp()
    return {
        "env": env,
        "lock_key": stamp.get("key") if stamp is not None else (None if env == "unmanaged" else lock_key(env)),
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


# --- credentials in endpoint URLs: out of identities, params, logs and messages -------------------------------

MASK = "***"
# A query parameter whose name contains one of these is taken for a credential.
_SECRET_NAME = re.compile(r"token|secret|passw|pwd|key|sig|auth|credential|session|cookie", re.I)
# scheme://userinfo@ (the last @ before the host: a password may hold an unencoded @)
_USERINFO_IN_TEXT = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://)[^\s/?#'\"<>]+@")
# name=value after ? & ; or #, in a URL or not ("POST /v1/chat?token=x HTTP/1.1")
_PARAM_IN_TEXT = re.compile(r"(?<=[?&;#])([^=&;\s'\"<>#?]+)=([^&;\s'\"<>#]*)")
_MIN_SECRET = 4  # registered secrets shorter than this are masked inside URLs only
_SECRETS: set = set()


def is_secret_param(name: str) -> bool:
    """True when a query parameter called ``name`` looks like a credential."""
    from urllib.parse import unquote_plus

    return bool(_SECRET_NAME.search(unquote_plus(name)))


def _split_netloc(netloc: str) -> tuple[str, str]:
    userinfo, at, host = netloc.rpartition("@")
    return (userinfo, host) if at else ("", netloc)


def url_secrets(url: str) -> list[str]:
    """The secrets in ``url``: its password and the values of its secret-looking query (and fragment)
    parameters, raw and percent-decoded. (The user name is masked wherever it appears in a URL, but not
    elsewhere: it is seldom secret and often a common word.)"""
    from urllib.parse import unquote_plus

    out = []
    try:
        parts = urlsplit(str(url))
    except ValueError:
        return out
    userinfo, _ = _split_netloc(parts.netloc)
    if ":" in userinfo:
        password = userinfo.split(":", 1)[1]
        out += [password, unquote_plus(password)]
    for piece in [*parts.query.split("&"), *parts.fragment.split("&")]:
        name, _, value = piece.partition("=")
        if value and is_secret_param(name):
            out += [value, unquote_plus(value)]
    return [v for v in dict.fromkeys(out) if v]


def redact_url(url: str, mask: str | None = MASK) -> str:
    """``url`` without its credentials: user name and password, and the value of every query parameter whose
    name looks like a secret (:func:`is_secret_param`). ``mask``: what stands in their place
    (``https://***@host/v1?api-version=1&token=***``, for logs and messages); None removes them
    (``https://host/v1?api-version=1``: an identity that a change of credentials leaves alone). Other query
    parameters, the host, port and path are kept as written; a URL without credentials is returned as it is."""
    try:
        parts = urlsplit(str(url))
    except ValueError:  # not a URL a client could send; nothing of it is shown
        return mask or ""
    userinfo, host = _split_netloc(parts.netloc)
    pieces = parts.query.split("&") if parts.query else []
    secret = [is_secret_param(piece.partition("=")[0]) for piece in pieces]
    hidden_fragment = any(is_secret_param(piece.partition("=")[0]) for piece in parts.fragment.split("&") if piece)
    if not userinfo and not any(secret) and not hidden_fragment:
        return str(url)
    netloc = (f"{mask}@" if mask else "") + host if userinfo else host
    query = [f"{piece.partition('=')[0]}={mask}" if hidden else piece
             for piece, hidden in zip(pieces, secret) if piece and (mask is not None or not hidden)]
    fragment = redact_text("#" + parts.fragment)[1:] if parts.fragment and mask is not None else ""
    return urlunsplit((parts.scheme, netloc, parts.path, "&".join(query), fragment))


def redact_text(text, *secrets) -> str:
    """``text`` with the user name and password of every URL in it masked, every ``name=value`` piece after
    ``?``, ``&``, ``;`` or ``#`` with a secret-looking name masked (``POST /v1/chat?token=***``), and every
    secret (``secrets`` and those registered with :func:`protect_url` / :func:`protect_secret`) replaced by
    ``***``."""
    out = str(text)
    given = {str(s) for s in secrets if s}
    for secret in sorted(given | _SECRETS, key=len, reverse=True):
        if len(secret) >= _MIN_SECRET or secret in given:
            out = out.replace(secret, MASK)
    out = _USERINFO_IN_TEXT.sub(lambda m: f"{m.group(1)}{MASK}@", out)
    return _PARAM_IN_TEXT.sub(lambda m: f"{m.group(1)}={MASK}" if is_secret_param(m.group(1)) else m.group(0), out)


def protect_url(url) -> None:
    """Remember the credentials of ``url`` (a configured endpoint) and mask them in every log record of this
    process from now on (:func:`mask_logs`)."""
    if isinstance(url, str) and url:
        _SECRETS.update(v for v in url_secrets(url) if len(v) >= _MIN_SECRET)
    mask_logs()


def protect_secret(value) -> None:
    """Mask ``value`` (an API key) in every log record of this process from now on."""
    if isinstance(value, str) and len(value) >= _MIN_SECRET:
        _SECRETS.add(value)
    mask_logs()


def _redact_record(record) -> None:
    try:
        message = record.getMessage()
    except Exception:  # noqa: BLE001 -- a broken format is the handler's to report
        return
    clean = redact_text(message)
    if clean != message:
        record.msg, record.args = clean, ()
    if record.exc_info and record.exc_info[0] is not None and not record.exc_text:
        import traceback

        text = "".join(traceback.format_exception(*record.exc_info)).rstrip("\n")
        clean = redact_text(text)
        if clean != text:  # what logging.Formatter would print, masked; it prints exc_text when set
            record.exc_text = clean


def mask_logs() -> None:
    """Mask credentials (:func:`redact_text`) in every log record made in this process from now on, whichever
    logger makes it (radrank's, ``httpx`` / ``httpx2``'s request lines, ``urllib3``, ``openai``): the record
    factory redacts the message and the traceback before any handler formats them. Installed once."""
    import logging

    current = logging.getLogRecordFactory()
    if getattr(current, "radrank_masks", False):
        return

    def factory(*args, **kwargs):
        record = current(*args, **kwargs)
        _redact_record(record)
        return record

    factory.radrank_masks = True
    logging.setLogRecordFactory(factory)


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
