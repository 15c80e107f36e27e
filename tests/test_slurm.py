"""The example workflow on a real single-node SLURM cluster, through profiles/slurm and the venv route.

One run of the repository's Snakefile with config/config.yaml (in a copy, bootstrap shortened)
plus one extra GPU rule, submitted with sbatch by snakemake-executor-plugin-slurm 2.8.0 to a
cluster started here (tests/slurm_cluster.py). By default the submissions sheet is cut to two
models of demo_cxr, findings only (9 SLURM jobs covering every rule; each SLURM job starts
Snakemake twice, ~10-15 s on these 2-core machines); RADRANK_SLURM_FULL_EXAMPLE=1 runs the whole
example (27 SLURM jobs). Checked afterwards, from SLURM's own records:
every job went through sbatch and completed, CPU jobs ran on the cpu partition and the GPU
rule on the gpu partition with a GPU allocated (CUDA_VISIBLE_DEVICES), the profile's retries
resubmitted a failed job with more memory, and each job ran inside the core venv.

Needs root (slurmd) and, when SLURM is missing, apt-get. RADRANK_SKIP_SLURM=1 skips it, and so
does RADRANK_SKIP_ENV_BUILDS=1 (the run uses the core venv).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _workflow import make_workdir  # noqa: E402
from slurm_cluster import SlurmCluster, SlurmUnavailable  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
from radrank import envs  # noqa: E402

pytestmark = [
    pytest.mark.workflow,
    pytest.mark.skipif(bool(os.environ.get("RADRANK_SKIP_SLURM")), reason="RADRANK_SKIP_SLURM is set"),
    pytest.mark.skipif(bool(os.environ.get("RADRANK_SKIP_ENV_BUILDS")), reason="RADRANK_SKIP_ENV_BUILDS is set"),
]

GPU_RULES = '''
include: "Snakefile"


rule gpu_probe:
    """A GPU job: records what SLURM gave it. Its first attempt fails on purpose, so that the
    profile's retries must resubmit it with the memory of attempt 2."""
    output:
        "results/gpu_probe.txt",
    envmodules: "radrank/core"
    resources:
        gpu=1,
        mem_mb=lambda wildcards, attempt: 500 * attempt,
        runtime=5,
    shell:
        "if [ {resources.mem_mb} -lt 1000 ]; then echo 'failing attempt 1 on purpose' >&2; exit 1; fi; "
        "echo CUDA_VISIBLE_DEVICES=${{CUDA_VISIBLE_DEVICES:-unset}} SLURM_JOB_ID=${{SLURM_JOB_ID:-none}}"
        " SLURM_JOB_PARTITION=${{SLURM_JOB_PARTITION:-none}} RADRANK_ENV=${{RADRANK_ENV:-unset}}"
        " mem_mb={resources.mem_mb} > {output}"
'''

PARTITIONS = """
partitions:
  cpu:
    max_mem_mb: 16000
  gpu:
    max_mem_mb: 16000
    max_gpu: 2
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.skip("a SLURM node (slurmd) needs root")
    cluster = SlurmCluster(tmp_path_factory.mktemp("slurm"))
    try:
        try:
            cluster.start()
        except SlurmUnavailable as e:
            pytest.skip(str(e))
        yield cluster
    finally:
        cluster.stop()
    assert all(p.poll() is not None for p in cluster.procs.values())


def test_example_workflow_runs_through_sbatch_with_gpus_and_retries(cluster, tmp_path):
    (tmp_path / "repo").mkdir()
    full = bool(os.environ.get("RADRANK_SLURM_FULL_EXAMPLE"))
    work = make_workdir(tmp_path / "repo", **({} if full else {"splits": ["findings"]}))
    if not full:
        sheet = (work / "config/submissions.tsv").read_text().splitlines()
        keep = [row for row in sheet[1:] if row.split("\t")[:2] in (["careful", "demo_cxr"], ["hasty", "demo_cxr"])]
        (work / "config/submissions.tsv").write_text("\n".join([sheet[0], *keep]) + "\n")
    (work / "Snakefile.slurmtest").write_text(GPU_RULES)
    (work / "partitions.yaml").write_text(PARTITIONS)
    env = cluster.env()
    env["RADRANK_ENVS_DIR"] = str(envs.envs_dir())  # the checkout's venvs (built once, reused)
    env.pop("RADRANK_ENV", None)
    cmd = [sys.executable, "src/radrank/envs.py", "snakemake", "--envs", "core",
           "--workflow-profile", "profiles/slurm", "-s", "Snakefile.slurmtest",
           "--slurm-status-command", "squeue", "--slurm-init-seconds-before-status-checks", "2",
           "--slurm-partition-config", "partitions.yaml", "--slurm-keep-successful-logs",
           "all", "gpu_probe"]
    start = time.monotonic()
    proc = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=1500)
    seconds = time.monotonic() - start
    (tmp_path / "snakemake.log").write_text(proc.stdout + proc.stderr)
    assert proc.returncode == 0, (f"snakemake failed after {seconds:.0f} s:\n{proc.stderr[-6000:]}\n"
                                  f"slurmctld:\n{cluster.log('slurmctld')[-2000:]}")
    print(f"SLURM run of the example: {seconds:.1f} s")

    # The workflow's products.
    assert (work / "results/report/report.html").is_file()
    leaderboards = sorted(p.name for p in (work / "results/leaderboard").glob("*.csv"))
    assert leaderboards == (["demo_clinic_findings.csv", "demo_cxr_findings.csv", "demo_cxr_reports.csv"]
                            if full else ["demo_cxr_findings.csv"])

    # Every job went through sbatch: the plugin's per-job logs name rule and SLURM job id, and
    # SLURM's job-completion log has each of those ids.
    logs = sorted((work / ".snakemake/slurm_logs").rglob("*.log"))
    submitted = {}  # SLURM job id -> rule
    for path in logs:  # .../rule_<rule>/... for a job, .../group_<group>_<its rules>/... for a group job
        part = next(p for p in path.relative_to(work).parts if p.startswith(("rule_", "group_")))
        submitted[path.stem] = part[len("rule_"):] if part.startswith("rule_") else part
    rules = set(submitted.values())
    # the ingest jobs reach SLURM bundled (the profile's group `prep`), the rest one cluster job each
    assert {"group_prep_ingest", "bootstrap", "leaderboard", "report", "gpu_probe",
            "score_bleu2_demo_cxr_findings"} <= rules
    assert "ingest" not in rules
    jobs = {job["JobId"]: job for job in cluster.completed_jobs()}
    assert set(submitted) <= set(jobs), f"jobs without a SLURM record: {set(submitted) - set(jobs)}"
    states = {jid: jobs[jid]["JobState"] for jid in submitted}
    probes = sorted((jid for jid, rule in submitted.items() if rule == "gpu_probe"), key=int)
    assert [states[j] for j in probes] == ["FAILED", "COMPLETED"]
    assert all(state == "COMPLETED" for jid, state in states.items() if jid not in probes), states
    dry = subprocess.run([str(envs.env_path("core") / "bin" / "snakemake"), "-n", "--forceall", "-s",
                          "Snakefile.slurmtest", "--workflow-profile", "none", "all", "gpu_probe"],
                         cwd=work, env=env, capture_output=True, text=True, check=True)
    stats = dry.stdout.split("Job stats:", 1)[1].split("\n\n", 1)[0]
    planned = {rule: int(n) for rule, n in re.findall(r"^(\w+)\s+(\d+)$", stats, re.M)}
    bundles = -(-planned["ingest"] // 100)  # group-components: prep=100
    # every job but `all` went through sbatch, the ingest jobs in bundles; + gpu_probe's failed first attempt
    assert len(submitted) == planned["total"] - planned["all"] - planned["ingest"] + bundles + 1

    # Partitions and the GPU.
    assert all(jobs[j]["Partition"] == "cpu" for j, rule in submitted.items() if rule != "gpu_probe")
    assert all(jobs[j]["Partition"] == "gpu" for j in probes)
    probe = dict(kv.split("=", 1) for kv in (work / "results/gpu_probe.txt").read_text().split())
    assert probe["CUDA_VISIBLE_DEVICES"] in ("0", "1")
    assert probe["SLURM_JOB_ID"] == probes[-1] and probe["SLURM_JOB_PARTITION"] == "gpu"
    # Retries with memory growing per attempt (sbatch --mem from mem_mb = 500 × attempt).
    assert probe["mem_mb"] == "1000"
    mems = [re.search(r"mem=(\d+)M", jobs[j]["Tres"]).group(1) for j in probes]
    assert mems == ["500", "1000"]

    # Each job ran in the core venv, loaded by Environment Modules inside the SLURM job.
    assert probe["RADRANK_ENV"] == "core"
    prov = scores_provenance(work)
    assert prov["env"] == "core"
    assert prov["lock_key"] == envs.read_stamp("core")["key"]  # the env by its pins, not a host path


def scores_provenance(work: Path) -> dict:
    score = next((work / "results/scores").rglob("rouge/*.parquet"))
    code = ("import json, sys; sys.path.insert(0, 'src'); from radrank import io; "
            f"print(json.dumps(io.read_provenance({str(score)!r})['environment']))")
    out = subprocess.run([str(envs.env_path("core") / "bin" / "python"), "-c", code], cwd=work,
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)
