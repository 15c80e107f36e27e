"""RadCliQ end to end: the example scored with the model panel (BERTScore, SembScore, RadGraph on
tiny random models of the real classes, in the rexrank environment) through the venv route; the
leaderboard ranks by RadCliQ-v1 and every number traces back in provenance to its model."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

import yaml

from _workflow import REPO, make_workdir, planned_jobs

sys.path.insert(0, str(REPO / "src"))
from radrank import envs  # noqa: E402
from radrank.io import read_provenance  # noqa: E402
from radrank.metrics import radcliq  # noqa: E402
from radrank.runtime import weights_digest  # noqa: E402

pytestmark = [
    pytest.mark.workflow,
    pytest.mark.skipif(bool(os.environ.get("RADRANK_SKIP_ENV_BUILDS")), reason="needs the rexrank environment"),
]

PANEL = ["bleu2", "bleu4", "rouge", "bertscore", "semb", "radgraph", "radcliq"]
ENVS_PY = [sys.executable, str(REPO / "src/radrank/envs.py")]


@pytest.fixture(scope="module")
def panel_run(tmp_path_factory):
    subprocess.run([*ENVS_PY, "build", "core", "rexrank"], check=True, capture_output=True)
    models = tmp_path_factory.mktemp("tiny-models")
    rexrank_python = envs.env_path("rexrank") / "bin" / "python"
    built = subprocess.run([str(rexrank_python), str(REPO / "tests/envs/rexrank/build_tiny_panel.py"), str(models)],
                           check=True, capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    settings = json.loads(built.stdout.strip().splitlines()[-1])
    work = make_workdir(tmp_path_factory.mktemp("panel"), metrics=PANEL, metric_settings=settings,
                        splits=["findings"])
    sheet = work / "config/submissions.tsv"
    sheet.write_text("".join(line for line in sheet.read_text().splitlines(True) if "demo_clinic" not in line))
    proc = subprocess.run([*ENVS_PY, "snakemake", "--profile", "profiles/venv", "--cores", "2"], cwd=work,
                          capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-5000:]
    return work, settings


def test_leaderboard_ranks_by_radcliq_v1(panel_run):
    work, _ = panel_run
    board = pd.read_csv(work / "results/leaderboard/demo_cxr_findings.csv")
    assert board["Ranked by"].iloc[0] == "RadCliQ-v1 (radcliq_v1) mean, lower is better"
    assert board["RadCliQ-v1"].is_monotonic_increasing and list(board["Rank"]) == [1, 2, 3]
    for col in ["BertScore", "SembScore", "RadGraph", "1/RadCliQ-v1", "RadCliQ-v0"]:
        assert board[col].notna().all(), col
    assert np.allclose(board["1/RadCliQ-v1"], (1 / board["RadCliQ-v1"]).round(3), atol=2e-3)


def test_radcliq_is_recomputed_from_its_component_files(panel_run):
    work, _ = panel_run
    scores = work / "results/scores/demo_cxr/findings"
    frames = {m: pd.read_parquet(scores / m / "careful.parquet") for m in ("radgraph", "bertscore", "semb", "bleu2")}
    features = np.column_stack([frames[m][col] for m, col in radcliq.FEATURES])
    out = pd.read_parquet(scores / "radcliq/careful.parquet")
    assert np.allclose(out["radcliq_v1"], radcliq.radcliq_v1(features), rtol=0, atol=1e-12)
    assert np.allclose(out["radcliq_v0"], radcliq.radcliq_v0(features), rtol=0, atol=1e-12)


def test_every_model_number_traces_to_its_model(panel_run):
    work, settings = panel_run
    scores = work / "results/scores/demo_cxr/findings"
    bert = read_provenance(scores / "bertscore/careful.parquet")
    assert bert["environment"]["env"] == "rexrank"
    assert bert["environment"]["packages"]["transformers"].startswith("4.")
    assert bert["settings"]["model"] == settings["bertscore"]["model"]
    assert json.dumps(bert["models"]).count(weights_digest(settings["bertscore"]["model"])) >= 1
    semb = read_provenance(scores / "semb/careful.parquet")
    assert weights_digest(settings["semb"]["checkpoint"]) in json.dumps(semb["models"])
    radgraph = read_provenance(scores / "radgraph/careful.parquet")
    assert radgraph["environment"]["env"] == "rexrank" and radgraph["models"]
    core = read_provenance(scores / "bleu2/careful.parquet")
    assert core["environment"]["env"] == "core"


def _planned_rules(work, metric_settings: dict) -> list:
    """The rules a dry run plans once ``metric_settings`` are changed as given (then put back)."""
    path = work / "config/config.yaml"
    original = path.read_text()
    config = yaml.safe_load(original)
    for metric, changes in metric_settings.items():
        config["metric_settings"][metric] = {**config["metric_settings"][metric], **changes}
    path.write_text(yaml.safe_dump(config))
    try:
        proc = subprocess.run([*ENVS_PY, "snakemake", "--profile", "profiles/venv", "-n"], cwd=work,
                              capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        return [rule for rule, _ in planned_jobs(proc.stdout)]
    finally:
        path.write_text(original)


def test_a_speed_setting_rescores_nothing_and_a_scored_one_only_its_metric(panel_run):
    """The model metric's identity holds only the settings that change its scores: a new batch size or device
    plans no job; idf re-scores BERTScore and RadCliQ, which reads it, and nothing else is scored again."""
    work, _ = panel_run
    assert _planned_rules(work, {"bertscore": {"batch_size": 3, "device": "cpu"}}) == []
    rules = _planned_rules(work, {"bertscore": {"idf": True}})
    scored = {r for r in rules if r.startswith("score")}  # one job per metric and group
    assert {r.split("_")[1] for r in scored} == {"bertscore", "radcliq"}, rules
    assert "ingest" not in rules and "bootstrap" in rules
