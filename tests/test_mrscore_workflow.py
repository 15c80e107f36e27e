"""MRScore training end to end (make mrscore-demo, smaller): the workflow builds tiny random models, writes
and grades tiered candidates in the judge environment, trains a LoRA reward model in the train environment,
keeps the checkpoint that agrees best with RadPref, and a second run ranks the example with it. Checked
against what each stage's own outputs say, not against stored numbers: the numbers of random models mean
nothing, the path and its bookkeeping do."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pandas as pd
import pytest
import yaml

from _workflow import REPO, make_workdir, planned_jobs

sys.path.insert(0, str(REPO / "src"))
from radrank.io import read_provenance  # noqa: E402
from radrank.mrscore_train.config import read_tiers  # noqa: E402

pytestmark = [
    pytest.mark.workflow,
    pytest.mark.skipif(bool(os.environ.get("RADRANK_SKIP_ENV_BUILDS")), reason="needs the judge and train envs"),
]

ENVS_PY = [sys.executable, str(REPO / "src/radrank/envs.py")]
OFFLINE = {**os.environ, "HF_HUB_OFFLINE": "1"}
TRAIN = ["mrscore_train", "--configfile", "config/config.yaml", "config/mrscore-demo.yaml"]
OUT = "results/mrscore/demo"


def snakemake(work, *args, check=True):
    proc = subprocess.run([*ENVS_PY, "snakemake", *args, "--profile", "profiles/venv", "--cores", "2"], cwd=work,
                          capture_output=True, text=True, env=OFFLINE)
    if check:
        assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-6000:]
    return proc


def _edit_demo(work, **parts):
    path = work / "config/mrscore-demo.yaml"
    config = yaml.safe_load(path.read_text())
    for part, values in parts.items():
        config["mrscore_training"].setdefault(part, {}).update(values)
    path.write_text(yaml.safe_dump(config))


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    work = make_workdir(tmp_path_factory.mktemp("mrscore"), splits=["findings"], metaeval={"sets": []})
    _edit_demo(work, sources={"max_references": 24}, candidates={"cache_dir": str(work / "judge-cache")},
               rubric={"cache_dir": str(work / "judge-cache")})
    snakemake(work, *TRAIN)
    return work


def test_every_stage_keeps_its_books(trained):
    out = trained / OUT
    refs = pd.read_parquet(out / "references.parquet")
    assert len(refs) == 24 and refs["reference_id"].is_unique
    cands = pd.read_parquet(out / "candidates.parquet")
    write_drops = pd.read_csv(out / "candidates.drops.csv", keep_default_na=False)
    assert len(cands) + len(write_drops) == 24 * 3 * 2  # every reference × tier × k written or listed
    graded = pd.read_parquet(out / "graded.parquet")
    dropped = pd.read_csv(out / "dropped.csv", keep_default_na=False)
    assert len(graded) + (dropped["stage"] == "grade").sum() == len(cands)  # nothing vanishes
    tiers = {t.name: (t, i == 2) for i, t in enumerate(read_tiers([[0, 40], [40, 70], [70, 100]]))}
    flags = graded[[c for c in graded.columns if c.startswith("mrscore_rubric_")]]
    weights = [30, 20, 20, 10, 10, 5, 5]
    assert (graded["score"] == 100 - flags.to_numpy() @ weights).all()  # the total is the error vector's
    assert all(tiers[t][0].holds(s, tiers[t][1]) for t, s in zip(graded["tier"], graded["score"]))
    for reason, tier in zip(dropped["reason"], dropped["tier"]):
        score = float(reason.split()[1].rstrip(","))
        assert reason.startswith("graded") and not tiers[tier][0].holds(score, tiers[tier][1])
    pairs = pd.read_parquet(out / "pairs.parquet")
    assert (pairs.groupby("reference_id")["split"].nunique() == 1).all()
    assert set(pairs["split"]) == {"train", "validation"}
    assert ((pairs["score_chosen"] - pairs["score_rejected"]) / 20 == pairs["margin"]).all()


def test_the_kept_model_is_the_best_checkpoint_and_its_card_says_so(trained):
    out = trained / OUT
    selection = pd.read_csv(out / "selection.csv")
    state = json.loads((out / "train/train_state.json").read_text())
    steps = sorted(int(p.name.split("-")[1]) for p in (out / "train/checkpoints").glob("checkpoint-*"))
    assert selection["step"].tolist() == steps and steps[-1] == state["global_step"]
    best = selection.loc[selection["selected"]]
    assert len(best) == 1 and best["kendall_tau_b"].iloc[0] == selection["kendall_tau_b"].max()
    assert (selection["human_items"] == 200).all()  # RadPref: 100 studies × 2 candidates
    # LoRA r 16 on q_proj and v_proj of 2 layers (hidden 64, 2 KV heads of 16) + the bias-free head
    assert state["trainable_parameters"] == 2 * 16 * ((64 + 64) + (64 + 32)) + 64
    meta = json.loads((out / "model/mrscore.json").read_text())
    assert meta["training"]["checkpoint"] == best["checkpoint"].iloc[0]
    assert meta["base_model"] == f"{OUT}/demo-models/base" and meta["prompt"]["max_length"] == 768
    card = (out / "model/MODEL_CARD.md").read_text()
    assert f"Selected: `{best['checkpoint'].iloc[0]}`" in card and "Trainable parameters: 7,232" in card
    assert "Demo run" in card and f"{len(pd.read_parquet(out / 'graded.parquet'))} kept" in card


def test_only_what_changed_reruns(trained):
    plan = lambda: {r for r, _ in planned_jobs(snakemake(trained, *TRAIN, "-n").stdout)}  # noqa: E731
    assert plan() == set()
    _edit_demo(trained, rubric={"batch_size": 3}, train={"logging_steps": 2})  # speed only
    assert plan() == set()
    _edit_demo(trained, pairs={"margin_scale": 10})
    assert plan() == {"mrscore_pairs", "mrscore_train_model", "mrscore_select", "mrscore_train"}
    _edit_demo(trained, pairs={"margin_scale": 20})


def test_a_killed_training_resumes_from_its_last_checkpoint(trained):
    train = trained / OUT / "train"
    steps = sorted(int(p.name.split("-")[1]) for p in (train / "checkpoints").glob("checkpoint-*"))
    # as if the job was killed before its last save: no final checkpoint, no state, nothing after it
    shutil.rmtree(train / f"checkpoints/checkpoint-{steps[-1]}")
    (train / "train_state.json").unlink()
    shutil.rmtree(trained / OUT / "model")
    (trained / OUT / "selection.csv").unlink()
    snakemake(trained, *TRAIN)
    log = (trained / "logs/mrscore/train.log").read_text()
    assert any("resuming from" in line and line.rstrip().endswith(f"checkpoint-{steps[-2]} (step {steps[-2]})")
               for line in log.splitlines()), log[-2000:]
    assert json.loads((train / "train_state.json").read_text())["global_step"] == steps[-1]


def test_the_leaderboard_scores_with_the_trained_model(trained):
    snakemake(trained, "--configfile", "config/config.yaml", "config/mrscore-demo-use.yaml")
    board = pd.read_csv(trained / "results/leaderboard/demo_cxr_findings.csv")
    assert board["MRScore"].between(0, 1, inclusive="neither").all()
    prov = read_provenance(trained / "results/scores/demo_cxr/findings/mrscore/careful.parquet")
    settings = prov["settings"]
    assert settings["trained"].startswith(f"{OUT}/model@") and settings["adapter"] == f"{OUT}/model/adapter"
    assert prov["models"]["demo"] is True  # make mrscore-demo's random base: the page says so first
    page = (trained / "results/report/demo_cxr_findings.html").read_text()
    assert page.index("Demo weights: MRScore on this page was scored by tiny random models") < page.index("Leaderboard</h2>")
