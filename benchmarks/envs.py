"""Environment costs: cold and warm build of each family's venv, and the per-job overhead of
running a trivial script inside a family's env compared with the core env.

    python3 benchmarks/envs.py [--families core rexrank] [--jobs 10] [--repeat 10] [--cold-cache]

* cold build: a new venv in a temporary RADRANK_ENVS_DIR (uv's package cache as it is, so this
  is the rebuild a new checkout or a pin change costs; --cold-cache also times it with an empty
  uv cache, i.e. with every download);
* warm build: the same `envs.py build` again (the pins' hash matches: nothing to do);
* module load: `module load radrank/<family>; python -c pass` in bash, against a bare
  `<core venv>/bin/python -c pass`;
* per job: a workflow of N trivial `script:` rules run with --sdm env-modules --cores 1; the
  per-job figure is (T(N + 2 jobs) - T(2 jobs)) / N, so Snakemake's start-up cancels out, in wall
  seconds and in CPU seconds (CPU time barely moves with other load on the machine; wall time
  does). The core row is the baseline the others' overhead is measured against; "no --sdm" runs
  the same jobs in Snakemake's own interpreter (no environment switching at all).

Uses only the standard library and src/radrank/envs.py; the families measured must be lockable
(their env files exist) and the machine must have Environment Modules (make sysdeps).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
from radrank import envs  # noqa: E402

ENVS_PY = REPO / "src" / "radrank" / "envs.py"

WORKFLOW = '''
FAMILY = config["family"]
N = int(config["njobs"])

rule all:
    input:
        expand("out/{i}.txt", i=range(N)),

rule job:
    output:
        "out/{i}.txt",
    envmodules: f"radrank/{FAMILY}"
    script:
        "job.py"
'''
JOB = "import sys\nopen(snakemake.output[0], 'w').write(sys.executable)\n"


def timed(cmd, env=None, cwd=None) -> float:
    return measured(cmd, env, cwd)[0]


def measured(cmd, env=None, cwd=None) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the command and everything it waited for)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run([str(c) for c in cmd], env=env, cwd=cwd, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"failed: {' '.join(map(str, cmd))}\n{proc.stderr[-3000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def tree_bytes(path: Path) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            p = Path(root) / name
            if not p.is_symlink():
                total += p.stat().st_size
    return total


def build_times(family: str, cold_cache: bool) -> dict:
    out = {}
    with tempfile.TemporaryDirectory(prefix="radrank-bench-envs-") as tmp:
        env = {**os.environ, "RADRANK_ENVS_DIR": tmp, "RADRANK_UV": envs.find_uv()}
        if cold_cache:
            env["UV_CACHE_DIR"] = str(Path(tmp) / "uv-cache")
            out["cold_cache_s"] = timed([sys.executable, ENVS_PY, "build", family], env)
            shutil.rmtree(Path(tmp) / family)
            env.pop("UV_CACHE_DIR")
        out["cold_s"] = timed([sys.executable, ENVS_PY, "build", family], env)
        out["warm_s"] = statistics.median(timed([sys.executable, ENVS_PY, "build", family], env) for _ in range(3))
        out["size_gb"] = tree_bytes(Path(tmp) / family) / 1e9
    return out


def module_load_time(family: str, repeat: int, base_env: dict) -> float:
    cmd = ["bash", "-c", f"module purge && MODULES_VERBOSITY=concise module load radrank/{family}; python -c pass"]
    for _ in range(2):
        timed(cmd, base_env)  # warm the page cache
    return statistics.median(timed(cmd, base_env) for _ in range(repeat))


def workflow_time(family: str | None, n: int, base_env: dict) -> tuple[float, float]:
    snakemake = envs.env_path("core") / "bin" / "snakemake"
    with tempfile.TemporaryDirectory(prefix="radrank-bench-jobs-") as tmp:
        (Path(tmp) / "Snakefile").write_text(WORKFLOW)
        (Path(tmp) / "job.py").write_text(JOB)
        cmd = [snakemake, "all", "--cores", "1", "--quiet", "--config", f"family={family or 'core'}",
               f"njobs={n}", "--workflow-profile", "none"]
        if family:
            cmd += ["--sdm", "env-modules"]
        return measured(cmd, base_env, cwd=tmp)


def per_job(variants: list, jobs: int, base_env: dict, repeat: int) -> dict:
    """Per trivial script job, for each variant (a family, or None: no --sdm): the median over
    `repeat` rounds of (T(jobs + 2) - T(2)) / jobs, wall and CPU seconds. Rounds interleave the
    variants, so that a change in the machine's load hits all of them alike."""
    samples = {v: [] for v in variants}
    for _ in range(repeat):
        for v in variants:
            small, large = workflow_time(v, 2, base_env), workflow_time(v, jobs + 2, base_env)
            samples[v].append(((large[0] - small[0]) / jobs, (large[1] - small[1]) / jobs))
    return {v: (statistics.median(s[0] for s in samples[v]), statistics.median(s[1] for s in samples[v]))
            for v in variants}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--families", nargs="+", default=["core", "rexrank"])
    parser.add_argument("--jobs", type=int, default=20, help="trivial jobs per per-job measurement")
    parser.add_argument("--job-repeat", type=int, default=3, help="per-job measurements (median)")
    parser.add_argument("--repeat", type=int, default=10, help="module-load repetitions (median)")
    parser.add_argument("--cold-cache", action="store_true", help="also time a build with an empty uv cache")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    families = list(dict.fromkeys(["core", *args.families]))
    for family in families:  # the per-job runs use the checkout's venvs
        envs.build_report(envs.build(family))
    base_env = envs.workflow_env()
    base_env.pop("RADRANK_ENV", None)
    core_python = str(envs.env_path("core") / "bin" / "python")
    bare = statistics.median(timed([core_python, "-c", "pass"]) for _ in range(args.repeat))

    jobs = per_job([None, *families], args.jobs, base_env, args.job_repeat)
    no_sdm = jobs[None]
    rows = []
    for family in families:
        row = {"family": family, **build_times(family, args.cold_cache)}
        row["module_python_s"] = module_load_time(family, args.repeat, base_env)
        row["per_job_s"], row["per_job_cpu_s"] = jobs[family]
        rows.append(row)
    core_wall, core_cpu = jobs["core"]
    for row in rows:
        row["overhead_vs_core_s"] = row["per_job_s"] - core_wall
        row["overhead_cpu_vs_core_s"] = row["per_job_cpu_s"] - core_cpu

    if args.json:
        print(json.dumps({"bare_python_s": bare, "no_sdm_per_job_s": no_sdm[0], "no_sdm_per_job_cpu_s": no_sdm[1],
                          "rows": rows}, indent=1))
        return
    load = os.getloadavg()[0]
    print(f"\nradrank environments  (CPUs: {os.cpu_count()}, load average at end: {load:.1f})")
    head = (f"{'family':10s} {'cold build':>10s} {'warm build':>10s} {'size':>7s} {'module+python':>13s} "
            f"{'per job':>8s} {'vs core':>8s} {'job CPU':>8s} {'vs core':>8s}")
    if args.cold_cache:
        head += f" {'empty cache':>11s}"
    print(head)
    for r in rows:
        line = (f"{r['family']:10s} {r['cold_s']:9.1f}s {r['warm_s']:9.2f}s {r['size_gb']:5.2f}GB "
                f"{r['module_python_s']:12.3f}s {r['per_job_s']:7.2f}s {r['overhead_vs_core_s']:+7.2f}s "
                f"{r['per_job_cpu_s']:7.2f}s {r['overhead_cpu_vs_core_s']:+7.2f}s")
        if args.cold_cache:
            line += f" {r['cold_cache_s']:10.1f}s"
        print(line)
    print(f"bare core `python -c pass`: {bare:.3f} s. Per job without env switching (no --sdm): "
          f"{no_sdm[0]:.2f} s wall, {no_sdm[1]:.2f} s CPU. Per-job figures: median of {args.job_repeat} "
          f"rounds of (T({args.jobs + 2} jobs) - T(2 jobs)) / {args.jobs}, --cores 1.")


if __name__ == "__main__":
    main()
