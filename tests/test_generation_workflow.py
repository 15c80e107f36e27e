"""Generation through the workflow: an image dataset → generated pairs → scores → leaderboard,
and a VQA dataset → answers → vqa rows. The generators are plain callables given by import path
(the backbones themselves are tested in their own environments)."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from _workflow import make_workdir

pytestmark = pytest.mark.workflow

FINDINGS = ["The lungs are clear.", "Small left pleural effusion.", "Mild cardiomegaly without edema.",
            "Right lower lobe opacity, possibly pneumonia.", "No pneumothorax. Heart size normal.",
            "Bibasilar atelectasis.", "Hyperinflated lungs.", "Left apical pneumothorax, small."]

FAKE_GENERATORS = '''
import json
from pathlib import Path

TRUTH = json.loads((Path(__file__).parent / "truth.json").read_text())


def _key(paths):
    return Path(paths[0]).name


def careful(imgs, indications=None):
    """Knows the answer for every image (stands in for a good model)."""
    return [TRUTH["reports"][_key(p)] for p in imgs]


def template(imgs):  # a legacy one-argument generator
    return ["The lungs are clear." for _ in imgs]


def vqa_careful(imgs, questions):
    return [TRUTH["answers"][q] for q in questions]


def vqa_always_yes(imgs, questions):
    return ["yes" for _ in questions]
'''


def write_iu_xray(root: Path) -> dict:
    reports, proj = {}, []
    with open(root / "indiana_reports.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["uid", "MeSH", "Problems", "image", "indication", "comparison", "findings", "impression"])
        for k, text in enumerate(FINDINGS, start=1):
            w.writerow([k, "normal", "normal", "Xray Chest PA", "Cough.", "", text, "See findings."])
            name = f"{k}_IM-{k:04d}-1001.dcm.png"
            (root / "images" / "images_normalized").mkdir(parents=True, exist_ok=True)
            (root / "images" / "images_normalized" / name).write_bytes(b"not read: image_format is path")
            proj.append((k, name, "Frontal"))
            reports[name] = text
    with open(root / "indiana_projections.csv", "w", newline="") as f:
        csv.writer(f).writerows([("uid", "filename", "projection"), *proj])
    return reports


def write_vqa_rad(root: Path) -> dict:
    folder = root / "VQA_RAD Image Folder"
    folder.mkdir(parents=True)
    questions = [("Is there a pleural effusion?", "yes", "CLOSED"), ("Is the heart enlarged?", "no", "CLOSED"),
                 ("Where is the opacity?", "right lower lobe", "OPEN"), ("Is there a pneumothorax?", "no", "CLOSED"),
                 ("What organ is abnormal?", "left lung", "OPEN"), ("Is this a PA film?", "yes", "CLOSED")]
    records = []
    for qid, (q, a, atype) in enumerate(questions):
        image = f"synpic{qid}.jpg"
        (folder / image).write_bytes(b"not read")
        records.append({"qid": qid, "image_name": image, "image_organ": "CHEST", "answer": a, "answer_type": atype,
                        "question_type": "PRES", "question": q, "phrase_type": "test_freeform"})
    (root / "VQA_RAD Dataset Public.json").write_text(json.dumps(records))
    return {q: a for q, a, _ in questions}


@pytest.fixture(scope="module")
def generation_run(tmp_path_factory):
    work = tmp_path_factory.mktemp("generation")
    iu, vqa = work / "data/iu", work / "data/vqa"
    iu.mkdir(parents=True)
    vqa.mkdir(parents=True)
    truth = {"reports": write_iu_xray(iu), "answers": write_vqa_rad(vqa)}
    make_workdir(work, generation=[
        {"model": "careful", "dataset": "iu_demo", "adapter": "iu_xray", "root": "data/iu",
         "generator": "fakegen:careful", "image_format": "path", "shards": 3, "batch_size": 2},
        {"model": "template", "dataset": "iu_demo", "adapter": "iu_xray", "root": "data/iu",
         "generator": "fakegen:template", "image_format": "path"},
        {"model": "careful", "dataset": "vqarad_demo", "adapter": "vqa_rad", "root": "data/vqa",
         "adapter_options": {"split": "test"}, "generator": "fakegen:vqa_careful", "image_format": "path",
         "splits": ["vqa"]},
        {"model": "always_yes", "dataset": "vqarad_demo", "adapter": "vqa_rad", "root": "data/vqa",
         "adapter_options": {"split": "test"}, "generator": "fakegen:vqa_always_yes", "image_format": "path",
         "splits": ["vqa"]},
    ], submissions="config/none.tsv")
    (work / "config/none.tsv").write_text("model\tdataset\tpath\n")
    (work / "fakegen.py").write_text(FAKE_GENERATORS)
    (work / "truth.json").write_text(json.dumps(truth))
    env = {**os.environ, "PYTHONPATH": str(work)}
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "2"], cwd=work, env=env,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    return work


def test_report_generation_reaches_the_leaderboard(generation_run):
    board = pd.read_csv(generation_run / "results/leaderboard/iu_demo_findings.csv")
    assert list(board["model"]) == ["careful", "template"]
    assert board.loc[0, "BLEU"] == 1.0 and board.loc[0, "ROUGE-L"] == 1.0  # it returned the references
    assert board.loc[1, "BLEU"] < 0.5
    pairs = pd.read_parquet(generation_run / "results/pairs/iu_demo/findings/careful.parquet")
    assert len(pairs) == len(FINDINGS) and (pairs["reference"] == pairs["hypothesis"]).all()
    assert list(pairs["study_id"]) == sorted(pairs["study_id"])  # three shards merged in dataset order
    shards = sorted(p.name for p in (generation_run / "results/generated/iu_demo/findings").glob("careful.shards/*.parquet"))
    assert shards == ["0-of-3.parquet", "1-of-3.parquet", "2-of-3.parquet"]


def test_vqa_generation_gives_vqa_rows(generation_run):
    board = pd.read_csv(generation_run / "results/leaderboard/vqarad_demo_vqa.csv").set_index("model")
    assert list(board.index) == ["careful", "always_yes"]
    assert board["rank_metric"].eq("vqa_token_f1").all()
    assert "higher is better" in board["Ranked by"].iloc[0] and "not computed" not in board["Ranked by"].iloc[0]
    summary = pd.read_csv(generation_run / "results/summary/vqarad_demo/vqa/always_yes/results_summary.csv")
    values = summary.set_index("metric")["estimate"]
    # always "yes": closed questions right 2 of 4 (accuracy 0.5); open answers share no token.
    assert values["vqa_closed_accuracy"] == pytest.approx(0.5)
    assert values["vqa_open_token_f1"] == pytest.approx(0.0)
    assert values["vqa_token_f1"] == pytest.approx(2 / 6)
    careful = pd.read_csv(generation_run / "results/summary/vqarad_demo/vqa/careful/results_summary.csv")
    assert careful.set_index("metric")["estimate"]["vqa_token_f1"] == pytest.approx(1.0)
    pairs = pd.read_parquet(generation_run / "results/pairs/vqarad_demo/vqa/careful.parquet")
    assert set(pairs["context"]) == set(json.loads((generation_run / "truth.json").read_text())["answers"])


def test_samples_per_call_and_an_unrelated_allow_list_id_plan_no_job(generation_run, monkeypatch):
    """A generation job's params hold what changes its reports: a new batch size (samples per generator call)
    or another id on the trust_remote_code list plans no job (Snakemake's dry run)."""
    from _workflow import planned_jobs, snakemake

    path = generation_run / "config/config.yaml"
    original = path.read_text()
    monkeypatch.setenv("PYTHONPATH", str(generation_run))
    try:
        config = yaml.safe_load(original)
        config["generation"][0]["batch_size"] = 3
        config["generation"][1]["batch_size"] = 5
        config["trust_remote_code"] = [*(config.get("trust_remote_code") or []), "someone/unrelated-model"]
        path.write_text(yaml.safe_dump(config))
        assert planned_jobs(snakemake(generation_run, "-n").stdout) == []
    finally:
        path.write_text(original)
