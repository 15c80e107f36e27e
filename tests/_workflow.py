"""Helpers for tests that run the workflow in a throw-away copy of the repository."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
COPY = ("Snakefile", "workflow", "rules", "scripts", "src", "config", "schemas", "envs", "example", "profiles", "report", "resources")


def make_workdir(dest: Path, **config_overrides) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    for name in COPY:
        src = REPO / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy2(src, dest / name)
    config = yaml.safe_load((dest / "config/config.yaml").read_text())
    config["bootstrap"] = {"n": 200, "seed": 7, "level": 0.95}
    config.update(config_overrides)
    (dest / "config/config.yaml").write_text(yaml.safe_dump(config))
    return dest


def snakemake(workdir: Path, *args, check=True):
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "2", *args], cwd=workdir,
                          capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise AssertionError(f"snakemake {' '.join(args)} failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    return proc


def planned_jobs(dry_run_output: str) -> list:
    """[(rule, wildcards dict)] of every job a dry run's output plans."""
    jobs = []
    for block in re.split(r"\n(?=(?:local)?rule \w+:)", dry_run_output):
        head = re.match(r"(?:local)?rule (\w+):", block.strip())
        if head:
            found = re.search(r"^\s+wildcards: (.*)$", block, re.M)
            wildcards = dict(kv.split("=", 1) for kv in found.group(1).split(", ")) if found else {}
            jobs.append((head.group(1), wildcards))
    return jobs


def result_files(workdir: Path) -> dict:
    """Relative path -> bytes of every file under results/."""
    root = workdir / "results"
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}
