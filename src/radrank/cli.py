"""The ``radrank`` command: run the workflow, say what is built and what would run, show the results.

Run it in the radrank checkout (the folder with the ``Snakefile``; ``-C DIR`` points at it)::

    radrank run [--route auto|here|venv|conda] [--slurm] [--envs LIST] [--torch V] [SNAKEMAKE ARGS ...]
    radrank status [--configfile FILE ...]
    radrank results [--configfile FILE ...]

``run`` chooses how the rules find their packages (``--route``):

* ``here`` — every rule runs in the Python environment ``radrank`` is installed in (after
  ``pip install -e .``, which brings Snakemake and the core metrics). Enough when the config
  needs only the core family (the default config: BLEU, BLEU-4, ROUGE).
* ``venv`` — every rule outside the core family runs in its family's pinned venv
  (``.venvs/<family>``, built first, cached by its pins) through Environment Modules:
  ``python3 src/radrank/envs.py snakemake``.
* ``conda`` — Snakemake's own ``--sdm conda`` with ``envs/<family>.yaml``.

Whatever the route, the core family's rules (ingest, lexical scoring, statistics, leaderboard,
report) run inside the Snakemake process itself (radrank.jobs.run_in_process), so Snakemake is started
from an environment with the core family: this one, or ``.venvs/core`` on the venv route.
* ``auto`` (default) — ``here`` when the config needs only the core family and Snakemake is
  importable here, else ``venv``.

``--slurm`` adds the SLURM workflow profile (``profiles/slurm``). Every other argument goes to
Snakemake unchanged (``--cores 8``, ``-n``, ``--configfile my.yaml``, ``--unlock``...).
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
from pathlib import Path

from radrank.errors import RadrankError

DEFAULT_CONFIG = Path("config") / "config.yaml"
SLURM_PROFILE = "profiles/slurm"
REPORT_FILES = ("results/report/report.md", "results/report/report.html")
LEADERBOARD = "results/leaderboard/{dataset}_{split}.csv"


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
    found, i = [], 0
    while i < len(snakemake_args):
        arg = snakemake_args[i]
        name, eq, value = arg.partition("=")
        if name in ("--configfile", "--configfiles"):
            if eq:
                found.append(value)
            else:
                i += 1
                while i < len(snakemake_args) and not snakemake_args[i].startswith("-"):
                    found.append(snakemake_args[i])
                    i += 1
                continue
        i += 1
    return found or [str(DEFAULT_CONFIG)]


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
    return subprocess.call(cmd)


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


def expected_results(plan) -> list[Path]:
    return [Path(LEADERBOARD.format(dataset=d, split=s)) for d, s in plan.groups()] + [Path(p) for p in REPORT_FILES]


def status(ns, args: list[str]) -> int:
    from radrank import envs

    plan = load_plan(config_files(args))
    route = choose_route("auto", plan)
    print(f"`radrank run` would take the {route} route"
          + (f" (rules run in this Python: {sys.executable})" if route == "here" else ""))
    print("Environments the config needs (venv route):")
    for family in needed_envs(plan):
        state = "built" if envs.is_built(family) else "not built"
        print(f"  {family:14s} {state:10s} {envs.env_path(family)}")
    results = expected_results(plan)
    done = [p for p in results if p.is_file()]
    print(f"Results: {len(done)} of {len(results)} final files exist "
          f"({len(plan.groups())} leaderboards + the report; `radrank results` lists them)")
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


def results(ns, args: list[str]) -> int:
    plan = load_plan(config_files(args))
    expected = expected_results(plan)
    print("Leaderboards (one per dataset x split) and the report:")
    missing = 0
    for path in expected:
        if path.is_file():
            print(f"  {path.resolve()}")
        else:
            missing += 1
            print(f"  {path.resolve()}  (not built yet)")
    others = sorted(set(Path("results/leaderboard").glob("*.csv")) - set(expected))
    if others:
        print("Other leaderboards in results/leaderboard (not in this config):")
        for path in others:
            print(f"  {path.resolve()}")
    print(f"Per-model summaries: {Path('results/summary').resolve()}/<dataset>/<split>/<model>/; "
          f"per-sample scores: {Path('results/scores').resolve()}; drops: results/pairs/**/*.drops.csv")
    if missing:
        print(f"{missing} file(s) not built yet: radrank run")
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
    sub.add_parser("status", help="which environments are built, how many results exist, what would run",
                   allow_abbrev=False)
    sub.add_parser("results", help="where the leaderboards and the report are", allow_abbrev=False)
    return p


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ns, rest = parser().parse_known_args(argv)
    if rest[:1] == ["--"]:
        rest = rest[1:]
    try:
        os.chdir(workflow_dir(ns.directory))
        return {"run": run, "status": status, "results": results}[ns.command](ns, rest)
    except (CliError, RadrankError) as e:
        say(f"error: {e}")
        return 2
    except BrokenPipeError:  # `radrank results | head`
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
