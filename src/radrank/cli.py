"""The ``radrank`` command: run the workflow, say what is built and what would run, show the results.

Run it in the radrank checkout (the folder with the ``Snakefile``; ``-C DIR`` points at it)::

    radrank run [--route auto|here|venv|conda] [--slurm] [--envs LIST] [--torch V] [SNAKEMAKE ARGS ...]
    radrank status [--configfile FILE ...]
    radrank results [--configfile FILE ...]
    radrank clean [-n] [--configfile FILE ...]
    radrank cache info|prune [--max-gb N] [--older-than-days D] [--dry-run] [--configfile FILE ...]

``run`` chooses how the rules find their packages (``--route``):

* ``here`` — every rule runs in the Python environment ``radrank`` is installed in (after
  ``pip install -e .``, which brings Snakemake and the core metrics). Enough when the config
  needs only the core family (the default config: BLEU, BLEU-4, ROUGE).
* ``venv`` — every rule outside the core family runs in its family's pinned venv
  (``.venvs/<family>``, built first, cached by its pins) through Environment Modules:
  ``python3 src/radrank/envs.py snakemake``.
* ``conda`` — Snakemake's own ``--sdm conda`` with ``envs/<family>.yaml``.

Whatever the route, the core family's rules (ingest, lexical scoring, statistics, leaderboard,
report) run in the Snakemake process or its worker processes (radrank.workers), so Snakemake is started
from an environment with the core family: this one, or ``.venvs/core`` on the venv route.
* ``auto`` (default) — ``here`` when the config needs only the core family and Snakemake is
  importable here, else ``venv``.

``--slurm`` adds the SLURM workflow profile (``profiles/slurm``). Every other argument goes to
Snakemake unchanged (``--cores 8``, ``-n``, ``--configfile my.yaml``, ``--unlock``...).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import subprocess
import sys
from pathlib import Path

from radrank import console
from radrank.errors import RadrankError

DEFAULT_CONFIG = Path("config") / "config.yaml"
SLURM_PROFILE = "profiles/slurm"
REPORT_FILES = ("results/report/report.md", "results/report/report.html", "results/report/appendix.md")
LEADERBOARD = "results/leaderboard/{dataset}_{split}.csv"
REPORT_FILES_NAMES = tuple(Path(p).name for p in REPORT_FILES)


class CliError(Exception):
    """Printed as one line; exit status 2."""


def say(msg: str) -> None:
    print(f"[radrank] {msg}", file=sys.stderr, flush=True)


# --- the checkout and its config ---------------------------------------------------------------


def workflow_dir(directory: str | None) -> Path:
    """The checkout to run in: ``directory`` or the current folder; it must hold the Snakefile."""
    root = Path(directory or ".").resolve()
    if not (root / "Snakefile").is_file():
        raise CliError(f"{root} has no Snakefile: run radrank in the radrank checkout (the folder with the "
                       "Snakefile, config/ and rules/), or point at it with -C DIR")
    return root


def config_files(snakemake_args: list[str]) -> list[str]:
    """The config files a snakemake command line names (``--configfile(s) A B``), else the default."""
    return console.config_files(snakemake_args) or [str(DEFAULT_CONFIG)]


def load_plan(files: list[str]):
    """The workflow's Plan for these config files, validated (and defaulted) as the Snakefile does."""
    from radrank.workflow import Plan, read_config

    return Plan.from_config(read_config(files))


def needed_envs(plan) -> list[str]:
    return sorted(set(plan.envs()) | set(plan.generation_envs()) | {"core"})


def snakemake_here() -> bool:
    """Whether this Python environment can run Snakemake itself."""
    import importlib.util

    return importlib.util.find_spec("snakemake") is not None


# --- run -----------------------------------------------------------------------------------------


def choose_route(route: str, plan) -> str:
    if route != "auto":
        return route
    return "here" if needed_envs(plan) == ["core"] and snakemake_here() else "venv"


def run_command(route: str, args: list[str], slurm: bool) -> list[str]:
    """The command line for ``route`` (the venv route is run in-process, see :func:`run`)."""
    profile = ["--workflow-profile", SLURM_PROFILE] if slurm else []
    if route == "here":
        return [sys.executable, "-m", "snakemake", *profile, *args]
    if route == "conda":
        return [sys.executable, "-m", "snakemake", "--sdm", "conda", *profile, *args]
    raise ValueError(route)


def run(ns, args: list[str]) -> int:
    plan = load_plan(config_files(args))
    plan.check_weights()  # before any environment is built: a missing model costs seconds, not GBs of installs
    route = choose_route(ns.route, plan)
    if route == "here" and not snakemake_here():
        raise CliError(f"Snakemake is not installed in this environment ({sys.executable}): "
                       "pip install -e . (or use --route venv)")
    if route == "here" and needed_envs(plan) != ["core"]:
        say(f"warning: the config needs the environments {needed_envs(plan)}; with --route here their "
            "jobs run in this environment and fail unless it has their packages (--route venv builds them)")
    say(f"route: {route} (environments needed: {', '.join(needed_envs(plan))})")
    if route == "venv":
        from radrank import envs

        profile = ["--workflow-profile", SLURM_PROFILE] if ns.slurm else []
        try:
            return envs.snakemake([*profile, *args], ns.envs, ns.torch)
        except envs.EnvError as e:
            raise CliError(str(e)) from None
    cmd = run_command(route, args, ns.slurm)
    say("$ " + " ".join(shlex.quote(c) for c in cmd))
    return console.run_snakemake(cmd)  # its few lines per stage; a signal forwarded, nothing of it left behind


# --- status and results ------------------------------------------------------------------------


def dry_run(args: list[str]) -> tuple[int, str]:
    """(exit status, output) of ``snakemake --dry-run --quiet rules`` with the Snakemake available."""
    from radrank import envs

    if snakemake_here():
        exe = [sys.executable, "-m", "snakemake"]
    elif envs.is_built("core"):
        exe = [str(envs.env_path("core") / "bin" / "snakemake")]
    else:
        return 1, "Snakemake is not installed here and the core environment is not built"
    proc = subprocess.run([*exe, "--dry-run", "--quiet", "rules", *args], capture_output=True, text=True)
    return proc.returncode, (proc.stdout + proc.stderr).strip()


def expected_leaderboards(plan) -> list[Path]:
    """One leaderboard per dataset × split of this config."""
    return [Path(LEADERBOARD.format(dataset=d, split=s)) for d, s in plan.groups()]


def expected_report_files(plan) -> list[Path]:
    """The report's index and summary, then its page per dataset × split (radrank.jobs.Report.page_name)."""
    from radrank.jobs import Report

    folder = Path(REPORT_FILES[0]).parent
    return [Path(p) for p in REPORT_FILES] + [folder / Report.page_name(d, s) for d, s in plan.groups()]


def expected_results(plan) -> list[Path]:
    return expected_leaderboards(plan) + expected_report_files(plan)


@contextlib.contextmanager
def use_checkout(root: Path):
    """While the command runs, point radrank.envs at the checkout it runs in: its env files (``envs/``) and,
    unless ``RADRANK_ENVS_DIR`` says otherwise, its ``.venvs``. radrank.envs otherwise finds the checkout its own
    file lies in, which is another one when this ``radrank`` command was installed (editable) from elsewhere.
    Restored afterwards, so a command called in-process (from Python, a test) leaves the module as it was."""
    from radrank import envs

    before, envs.REPO = envs.REPO, root
    try:
        yield
    finally:
        envs.REPO = before


def code_checkout() -> Path | None:
    """The checkout whose ``src/`` this process imported radrank from (None: an installed, non-editable copy)."""
    import radrank

    root = Path(radrank.__file__).resolve().parents[2]
    return root if (root / "Snakefile").is_file() else None


def other_checkout(family: str, root: Path) -> str:
    """A note when the venv of ``family`` has another checkout installed (its ``radrank`` runs that code)."""
    from radrank import envs

    runs = envs.installed_checkout(family) if family in envs.PROJECT_ENVS else None
    if runs is None or Path(os.path.normpath(runs)) == root:
        return ""
    venv = envs.env_path(family).resolve()
    if root.resolve() in venv.parents or not (runs / "src" / "radrank").is_dir():
        return f"  (runs the checkout {runs}; the next build re-points it here)"
    return (f"  (runs the checkout {runs}, which still exists: a build here stops unless "
            f"{envs.REPOINT_VAR}=1; better, one envs dir per checkout)")


def counted(what: str, paths: list[Path], where: str, verb: str = "exist") -> str:
    """``what: k of n exist (where)`` — of the n files this config expects."""
    done = sum(p.is_file() for p in paths)
    return f"{what}: {done} of {len(paths)} {verb} ({where})"


def status(ns, args: list[str]) -> int:
    from radrank import envs

    root = Path.cwd()
    files = config_files(args)
    plan = load_plan(files)
    print(f"Checkout: {root} (config: {', '.join(files)})")
    code = code_checkout()
    if code is not None and code != root:
        print(f"  note: this `radrank` command was installed from another checkout and runs its code, "
              f"{code / 'src'}; the Snakefile here runs {root / 'src'}. This checkout's own command is "
              f"{envs.env_path('core') / 'bin' / 'radrank'} (`make example` builds it)")
    route = choose_route("auto", plan)
    print(f"`radrank run` would take the {route} route"
          + (f" (rules run in this Python: {sys.executable})" if route == "here" else ""))
    print(f"Environments the config needs (venv route), in {envs.envs_dir()}:")
    for family in needed_envs(plan):
        built = envs.is_built(family)
        print(f"  {family:14s} {'built' if built else 'not built':10s} {envs.env_path(family)}"
              + (other_checkout(family, root) if built else ""))
    boards = expected_leaderboards(plan)
    print("Results of this config (`radrank results` lists their paths):")
    print("  " + counted("leaderboards", boards,
                         f"one per dataset × split; {LEADERBOARD.format(dataset='<dataset>', split='<split>')}"))
    pages = expected_report_files(plan)
    print("  " + counted("report files", pages, f"{', '.join(REPORT_FILES)} and {len(pages) - len(REPORT_FILES)} "
                         "pages, one per dataset × split"))
    if plan.metaeval_sets:
        agreement = [Path(f"results/metaeval/{name}/agreement.csv") for name in plan.metaeval_sets]
        print("  " + counted("meta-evaluation sets", agreement,
                             f"{', '.join(plan.metaeval_sets)}; results/metaeval/<set>/agreement.csv",
                             verb="scored"))
    code, out = dry_run(args)
    if code != 0:
        print("What would run: cannot tell, the dry run failed:")
        print("\n".join("  " + line for line in out.splitlines()[-15:]))
        return 1
    table = job_table(out)
    if not table:
        print("What would run: nothing, everything is up to date")
    else:
        print("What would run (`radrank run` starts it):")
        print("\n".join("  " + line for line in table))
    return 0


def job_table(dry_run_output: str) -> list[str]:
    """The first "Job stats" table of a dry run (rule and job count, then the total); [] if none."""
    lines = dry_run_output.splitlines()
    for i, line in enumerate(lines):
        if line.strip() == "Job stats:":
            table = []
            for row in lines[i + 1:]:
                table.append(row)
                if row.split()[:1] == ["total"]:
                    return table
    return []


# results/<folder>/<dataset>/<split>/ of each dataset x split (and of each meta-evaluation set's pairs); the
# leaderboards, report pages and case sets are files named by dataset and split (radrank.jobs, rules/common.smk)
GROUP_FOLDERS = ("pairs", "scores", "stats", "summary")
PER_MODEL = ("pairs", "summary")  # <split>/<model>.parquet, .drops.csv or <model>/
PER_METRIC = ("scores",)  # <split>/<metric>/<model>.parquet (rules/common.smk SCORES)
INDEX_PAGE = Path(REPORT_FILES[1])


def report_pages_linked(index: Path = INDEX_PAGE) -> set[str]:
    """The group pages a built report index links to: the datasets x splits it covers."""
    import re

    try:
        text = index.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return set()
    return set(re.findall(r'href="([^"#/?:]+\.html)"', text)) - {index.name}


def foreign_outputs(plan) -> list[Path]:
    """What in results/ this config does not produce: the leaderboards, report pages and per-group folders of
    datasets x splits (or meta-evaluation sets, or models) it does not have — another sheet's, left by an
    earlier run. The report's figures are rebuilt whole with the report; results/mrscore and generated
    reports are left alone."""
    from radrank import metaeval

    groups = set(plan.groups())
    expected = set(expected_results(plan))
    found = [p for p in Path("results/leaderboard").glob("*.csv") if p not in expected]
    found += [p for p in Path(REPORT_FILES[1]).parent.glob("*.html") if p not in expected]
    sets = {metaeval.dataset_name(name) for name in plan.metaeval_sets}
    for folder in GROUP_FOLDERS:
        for dataset in sorted(p for p in Path("results", folder).glob("*") if p.is_dir()):
            if dataset.name.startswith(metaeval.DATASET_PREFIX):
                if dataset.name not in sets:
                    found.append(dataset)
                continue
            splits = [p for p in sorted(dataset.iterdir()) if p.is_dir()]
            if not any((dataset.name, p.name) in groups for p in splits):
                found.append(dataset)  # none of its splits: the dataset's folder
                continue
            for split in splits:
                if (dataset.name, split.name) not in groups:
                    found.append(split)
                    continue
                models = set(plan.models_for(dataset.name, split.name))
                if folder in PER_MODEL:
                    found += [p for p in sorted(split.iterdir()) if not p.name.startswith(".")
                              and p.name.split(".", 1)[0] not in models]  # a model no longer in the sheet
                elif folder in PER_METRIC:
                    found += _other_scores(split, set(plan.metrics_for_split(split.name)), models)
    for cases in sorted(Path("results/cases").glob("*/*.parquet")):
        if (cases.parent.name, cases.stem) not in groups:
            found.append(cases)
    found += [p for p in sorted(Path("results/metaeval").glob("*")) if p.is_dir() and p.name not in
              plan.metaeval_sets]
    return sorted(dict.fromkeys(found))


def _other_scores(split: Path, metric_names: set, models: set) -> list[Path]:
    """In a group's scores folder: the folders of metrics this config does not have, and in its metrics'
    folders the score files of models no longer in the sheet."""
    found = []
    for folder in sorted(p for p in split.iterdir() if not p.name.startswith(".")):
        if not folder.is_dir() or folder.name not in metric_names:
            found.append(folder)
            continue
        found += [p for p in sorted(folder.iterdir()) if not p.name.startswith(".")
                  and p.name.removesuffix(".parquet") not in models]
    return found


def results(ns, args: list[str]) -> int:
    plan = load_plan(config_files(args))
    expected = expected_results(plan)
    n_report = len(expected_report_files(plan))
    print(f"Leaderboards ({len(expected) - n_report}: one per dataset x split of this config) and the "
          f"report ({n_report} files: index, summary, appendix and a page per dataset x split):")
    pages = {p.name for p in expected_report_files(plan)[len(REPORT_FILES):]}
    linked = report_pages_linked()
    missing = 0
    for path in expected:
        if not path.is_file():
            missing += 1
            print(f"  {path.resolve()}  (not built yet)")
        elif path.parent == INDEX_PAGE.parent and path.name in REPORT_FILES_NAMES and linked != pages:
            # built by a run of another config: its pages are not this config's datasets x splits
            print(f"  {path.resolve()}  (of another config: it covers {', '.join(sorted(linked)) or 'no page'}, "
                  f"this config has {', '.join(sorted(pages))}; radrank run rebuilds it)")
        else:
            print(f"  {path.resolve()}")
    others = foreign_outputs(plan)
    if others:
        print(f"Not of this config ({len(others)}: another sheet's datasets x splits, models or meta-evaluation "
              "sets; `radrank clean` removes them, `radrank clean -n` lists them first):")
        for path in others:
            print(f"  {path.resolve()}{'/' if path.is_dir() else ''}")
    print(f"Per-model summaries: {Path('results/summary').resolve()}/<dataset>/<split>/<model>/; "
          f"per-sample scores: {Path('results/scores').resolve()}; drops: results/pairs/**/*.drops.csv")
    if missing:
        print(f"{missing} of the {len(expected)} files this config expects are not built yet: radrank run")
    return 0


def clean(ns, args: list[str]) -> int:
    """Removes what :func:`foreign_outputs` lists (``--dry-run``: lists it)."""
    import shutil

    plan = load_plan(config_files(args))
    others = foreign_outputs(plan)
    if not others:
        print("Nothing to remove: everything in results/ is of this config")
        return 0
    print(f"{'Would remove' if ns.dry_run else 'Removing'} {len(others)} output(s) this config does not produce:")
    for path in others:
        print(f"  {path.resolve()}{'/' if path.is_dir() else ''}")
        if not ns.dry_run:
            shutil.rmtree(path) if path.is_dir() else path.unlink()
    if not ns.dry_run and report_pages_linked() != {p.name for p in expected_report_files(plan)[len(REPORT_FILES):]}:
        print("The report index covers other datasets x splits: radrank run rebuilds it")
    return 0


# --- the score cache ---------------------------------------------------------------------------


def cache_of(args: list[str]):
    """The score cache of the checkout's config (``score_cache.dir``, else the defaults; its secret file)."""
    from radrank import score_cache
    from radrank.workflow import read_config

    files = config_files(args)
    config = {} if files == [str(DEFAULT_CONFIG)] and not DEFAULT_CONFIG.is_file() else read_config(files)
    return score_cache.ScoreCache.from_config(config)


def human_bytes(n: float) -> str:
    """Decimal units, as --max-gb counts them."""
    if n < 1000:
        return f"{n:.0f} B"
    for unit in ("kB", "MB", "GB"):
        n /= 1000
        if n < 1000 or unit == "GB":
            return f"{n:.1f} {unit}"


def cache(ns, args: list[str]) -> int:
    import time

    from radrank import score_cache

    if ns.action == "info" and (ns.max_gb is not None or ns.older_than_days is not None or ns.dry_run
                                or ns.damaged):
        raise CliError("--max-gb, --older-than-days, --damaged and --dry-run are options of `radrank cache prune`")
    if (ns.max_gb or 0) < 0 or (ns.older_than_days or 0) < 0:
        raise CliError("--max-gb and --older-than-days cannot be negative")
    store = cache_of(args)
    if store.root is None:
        print(f"The score cache is off (score_cache.dir or ${score_cache.ENV_VAR} says so)")
        return 0
    print(f"Score cache: {store.root}" + (" (packs checked with score_cache.secret_file)" if store.secret else ""))
    if ns.action == "info":
        spaces = score_cache.info(store.root, store.secret)
        if not spaces:
            print("  empty")
            return 0
        print(f"  {'namespace':12s} {'metric':16s} {'entries':>11s} {'packs':>6s} {'unserved':>8s} {'size':>9s}  "
              f"{'last used':16s}  last run's hits")
        for space in spaces:
            used = time.strftime("%Y-%m-%d %H:%M", time.localtime(space.last_used)) if space.last_used else "-"
            run = space.last_run
            hits = (f"{run['served']:,d} of {run['asked']:,d} pairs ({100 * run['served'] / run['asked']:.0f} %), "
                    f"run {run['run']}" if run and run["asked"] else "-")
            print(f"  {space.id[:12]:12s} {space.metric[:16]:16s} {space.entries:>11,d} {len(space.packs):>6d} "
                  f"{len(space.skipped):>8d} {human_bytes(space.bytes):>9s}  {used:16s}  {hits}")
        print(f"  {len(spaces)} namespace(s), {sum(s.entries for s in spaces):,d} entries, "
              f"{human_bytes(sum(s.bytes for s in spaces))}")
        for path, reason in (item for s in spaces for item in s.skipped):
            print(f"  not served: {path} {reason}")
        return 0
    result = score_cache.prune(store.root, max_bytes=None if ns.max_gb is None else int(ns.max_gb * 1e9),
                               older_than_days=ns.older_than_days, dry_run=ns.dry_run, damaged=ns.damaged,
                               secret=store.secret)
    would = "would " if ns.dry_run else ""
    merged = sum(len(inputs) for inputs, _ in result.compacted)
    for p, reason in result.damaged:
        print(f"  {would}remove {p.path}: it {reason}")
    for path, reason in result.kept_damaged:
        print(f"  not removed: {path} {reason}; remove it yourself")
    print(f"  {would}remove {len(result.removed) + len(result.damaged)} pack(s) ({human_bytes(result.removed_bytes)}"
          f"{f', {len(result.damaged)} damaged' if ns.damaged else ''}) and {len(result.stale_temporaries)} stale "
          f"temporary file(s); {would}compact {merged} small pack(s) into {len(result.compacted)}")
    print(f"  size: {human_bytes(result.bytes_before)} -> {human_bytes(result.bytes_after)}"
          + (" (before compaction)" if ns.dry_run else ""))
    return 0


# --- entry point -------------------------------------------------------------------------------


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="radrank", description=__doc__.split("\n\n")[0], allow_abbrev=False,
                                epilog="Every argument the command does not know goes to Snakemake.")
    p.add_argument("-C", "--directory", help="the radrank checkout (default: the current folder)")
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="run the workflow (every unknown argument goes to Snakemake)",
                       allow_abbrev=False)
    r.add_argument("--route", choices=("auto", "here", "venv", "conda"), default="auto",
                   help="where the rules' packages come from (default auto: 'here' when the config needs "
                        "only the core family, else 'venv')")
    r.add_argument("--slurm", action="store_true", help=f"submit jobs to SLURM (workflow profile {SLURM_PROFILE})")
    r.add_argument("--envs", help="venv route: families to build besides core (comma list, 'all', 'auto')")
    r.add_argument("--torch", help="venv route: torch build, cpu | cuda | cuXYZ | auto")
    sub.add_parser("status", help="for the checkout it runs in: which environments are built, how many of the "
                   "leaderboards and report files this config expects exist, what would run", allow_abbrev=False)
    sub.add_parser("results", help="where the leaderboards and the report are, and what in results/ this config "
                   "does not produce", allow_abbrev=False)
    k = sub.add_parser("clean", help="remove what in results/ this config does not produce (another sheet's "
                       "leaderboards, pages and per-group outputs)", allow_abbrev=False)
    k.add_argument("-n", "--dry-run", action="store_true", help="list what would be removed, remove nothing")
    c = sub.add_parser("cache", help="the per-pair score cache (score_cache.dir): what it holds, and bound it",
                       allow_abbrev=False)
    c.add_argument("action", choices=("info", "prune"),
                   help="info: namespaces, entries, size, last use; prune: remove the least recently used packs "
                        "and compact small ones")
    c.add_argument("--max-gb", type=float, help="prune: keep at most this many GB (least recently used go first)")
    c.add_argument("--older-than-days", type=float, help="prune: remove what was not used for this many days")
    c.add_argument("--damaged", action="store_true", help="prune: also remove the packs that fail their checks "
                   "(damaged, edited, foreign or written without the secret; `info` lists them)")
    c.add_argument("--dry-run", action="store_true", help="prune: say what would be removed, remove nothing")
    return p


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ns, rest = parser().parse_known_args(argv)
    if rest[:1] == ["--"]:
        rest = rest[1:]
    try:
        root = workflow_dir(ns.directory)
        os.chdir(root)
        with use_checkout(root):  # its envs/ and .venvs, whichever checkout this command was installed from
            return {"run": run, "status": status, "results": results, "clean": clean,
                    "cache": cache}[ns.command](ns, rest)
    except (CliError, RadrankError) as e:
        say(f"error: {e}")
        return 2
    except BrokenPipeError:  # `radrank results | head`
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
