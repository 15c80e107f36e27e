"""The Python API (ReportGenerationEvaluator, VQAEvaluator) and the generation job, with fake generators.

Core environment: images are passed as paths (``image_format="path"``) or through a
test loader, so neither MONAI nor PIL is needed; tiny datasets are written here.
"""

from __future__ import annotations

import csv
import json
import math
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from radrank import io, metrics
from radrank.api import ReportGenerationEvaluator, VQAEvaluator, score_pairs
from radrank.datasets import make_adapter
from radrank.errors import ConfigError
from radrank.generate import generate, merge
from radrank.ingest.pairs import DROPS_COLUMNS, PAIRS_COLUMNS
from radrank.stats import resample_indices

# --- tiny datasets -------------------------------------------------------------------------------------------

IU_ROWS = [
    # uid, indication, comparison, findings, impression
    ("1", "Chest pain.", "None.", "The lungs are clear. Heart size is normal.", "No acute disease."),
    ("2", "", "", "", "Stable cardiomegaly."),  # findings fall back to impression
    ("3", "Dyspnea.", "", "", ""),  # nothing to score against: empty_reference
    ("4", "", "", "Small left pleural effusion.", "Effusion."),  # no image: no_image
    ("5", "Cough, evaluate pneumonia", "", "Right lower lobe opacity. No pneumothorax.", "Pneumonia."),
    ("6", "", "", "No focal consolidation. Normal heart size.", "Normal chest."),
    ("7", "Fever.", "", "Mild cardiomegaly with clear lungs.", "Cardiomegaly."),
]
IU_IMAGES = [("1", "1_frontal.png", "Frontal"), ("1", "1_lateral.png", "Lateral"), ("2", "2_f.png", "Frontal"),
             ("3", "3_f.png", "Frontal"), ("5", "5_f.png", "Frontal"), ("6", "6_f.png", "Frontal"),
             ("6", "6_missing.png", "Lateral"), ("7", "7_f.png", "Frontal")]


@pytest.fixture
def iu_root(tmp_path):
    root = tmp_path / "iu"
    images = root / "images" / "images_normalized"
    images.mkdir(parents=True)
    with open(root / "indiana_reports.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["uid", "MeSH", "Problems", "image", "indication", "comparison", "findings", "impression"])
        for uid, ind, comp, fin, imp in IU_ROWS:
            w.writerow([uid, "", "", "", ind, comp, fin, imp])
    with open(root / "indiana_projections.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["uid", "filename", "projection"])
        w.writerows(IU_IMAGES)
    for _, name, _ in IU_IMAGES:
        if "missing" not in name:
            (images / name).write_bytes(b"img")
    return root


VQA_RECORDS = [
    # answer, answer_type, phrase_type, question
    ("yes", "CLOSED", "test_freeform", "Is there an effusion?"),
    ("No", "CLOSED", "test_para", "Is the heart enlarged?"),
    ("left pleural effusion", "OPEN", "test_freeform", "What is abnormal?"),
    ("none", "OPEN", "freeform", "Which devices are present?"),
    ("right", "CLOSED", "test_para", "Which side is the mass on?"),
    ("2", "OPEN", "test_freeform", "How many nodules?"),
]


@pytest.fixture
def vqa_root(tmp_path):
    root = tmp_path / "vqa"
    (root / "VQA_RAD Image Folder").mkdir(parents=True)
    recs = []
    for i, (ans, atype, phrase, q) in enumerate(VQA_RECORDS):
        recs.append({"qid": i, "image_name": f"synpic{i}.jpg", "question": q,
                     "answer": int(ans) if ans.isdigit() else ans, "answer_type": atype, "phrase_type": phrase,
                     "question_type": "PRES", "image_organ": "CHEST"})
        (root / "VQA_RAD Image Folder" / f"synpic{i}.jpg").write_bytes(b"img")
    (root / "VQA_RAD Dataset Public.json").write_text(json.dumps(recs))
    return root


def strict_loader(path):
    """A test image loader: the path, or an error for a missing file (as a real loader would)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"image {path} does not exist")
    return path


GENERATED = {
    "1": "The lungs are clear. Heart size is normal.",
    "2": "Cardiomegaly, stable.",
    "5": "Right lower lobe pneumonia.",
    "6": "",  # silent (its second image is missing anyway)
    "7": "Mild cardiomegaly. Lungs are clear.",
}


def uid_of(images):
    return Path(images[0]).name.split("_")[0]


def fake_generator(imgs, indications=None):
    return [GENERATED[uid_of(i)] for i in imgs]


# --- report generation ---------------------------------------------------------------------------------------
def test_report_evaluate_layout_and_point_estimates(iu_root):
    ev = ReportGenerationEvaluator(fake_generator, dataset=("iu_xray", iu_root), image_format=strict_loader,
                                   n_bootstrap=25, bootstrap_seed=3, batch_size=2, num_workers=2)
    df = ev.evaluate()
    assert list(df.columns) == ["label", "fold", "seed", "bootstrap", "bleu2", "bleu4", "rouge1", "rouge2", "rougeL"]
    assert df["bootstrap"].tolist() == list(range(-1, 25))
    assert set(df["label"]) == {"report"} and set(df["fold"]) == {-1} and set(df["seed"]) == {-1}
    pairs = ev.pairs_
    assert list(pairs.columns) == list(PAIRS_COLUMNS)
    assert pairs["sample_id"].tolist() == ["CXR1", "CXR2", "CXR5", "CXR7"]
    assert pairs["reference"].tolist()[:2] == ["The lungs are clear. Heart size is normal.", "Stable cardiomegaly."]
    # The point estimates are the metrics on the pairs.
    point = df[df["bootstrap"] == -1].iloc[0]
    direct = metrics.score("bleu2", pairs)
    assert point["bleu2"] == pytest.approx(direct["bleu2"].mean())
    rouge = metrics.score("rouge", pairs)
    assert point["rougeL"] == pytest.approx(rouge["rougeL"].mean())


def test_report_drops_are_reported(iu_root):
    ev = ReportGenerationEvaluator(fake_generator, dataset=("iu_xray", iu_root), image_format=strict_loader,
                                   num_workers=0)
    ev.evaluate()
    drops = ev.drops_
    assert list(drops.columns) == list(DROPS_COLUMNS)
    reasons = dict(zip(drops["sample_id"], drops["reason"]))
    assert reasons == {"CXR3": "empty_reference", "CXR4": "no_image", "CXR6": "image_error"}
    detail = drops.set_index("sample_id").loc["CXR6", "detail"]
    assert "6_missing.png" in detail
    assert drops.set_index("sample_id").loc["CXR3", "row"] == "indiana_reports.csv:4"


def test_empty_hypothesis_policies(iu_root, tmp_path):
    gen = dict(GENERATED, **{"7": "   "})

    def silent(imgs, indications=None):
        return [gen[uid_of(i)] for i in imgs]

    drop = ReportGenerationEvaluator(silent, dataset=("iu_xray", iu_root), image_format="path", metrics=("bleu2",))
    drop.evaluate()
    assert "CXR7" not in set(drop.pairs_["sample_id"])
    assert drop.drops_.set_index("sample_id").loc["CXR7", "action"] == "dropped"
    keep = ReportGenerationEvaluator(silent, dataset=("iu_xray", iu_root), image_format="path", metrics=("bleu2",),
                                     empty_hypothesis="score")
    keep.evaluate()
    assert keep.pairs_.set_index("sample_id").loc["CXR7", "hypothesis"] == ""
    assert keep.drops_.set_index("sample_id").loc["CXR7", "action"] == "scored_as_empty"


def test_bootstrap_is_exact_and_metrics_run_once(iu_root, monkeypatch):
    calls = []
    real = metrics.score

    def counting(name, *a, **k):
        calls.append(name)
        return real(name, *a, **k)

    monkeypatch.setattr(metrics, "score", counting)
    ev = ReportGenerationEvaluator(fake_generator, dataset=("iu_xray", iu_root), image_format="path",
                                   n_bootstrap=30, bootstrap_seed=5, metrics=("bleu2", "bleu4"))
    df = ev.evaluate()
    assert sorted(calls) == ["bleu2", "bleu4"]  # once each, whatever n_bootstrap
    monkeypatch.setattr(metrics, "score", real)
    pairs = ev.pairs_
    cases = sorted(pairs["sample_id"])
    by_id = pairs.set_index("sample_id")
    idx = resample_indices(len(cases), 30, 5)
    for b in range(30):
        chosen = by_id.loc[[cases[k] for k in idx[b]]].reset_index()
        chosen["sample_id"] = [f"r{i}" for i in range(len(chosen))]
        bleu2 = real("bleu2", chosen)["bleu2"].mean()
        stats = real("bleu4", chosen)
        leaf = metrics.get("bleu4").leaves[0]
        bleu4 = float(leaf.value(leaf.statistics(stats).sum(axis=0)))
        row = df[df["bootstrap"] == b].iloc[0]
        assert row["bleu2"] == pytest.approx(bleu2, abs=1e-12)
        assert row[leaf.name] == pytest.approx(bleu4, abs=1e-12)


def test_use_indication_passes_the_section_never_the_body(iu_root):
    seen = []

    def gen(imgs, indications):
        seen.extend(indications)
        return ["Report." for _ in imgs]

    ev = ReportGenerationEvaluator(gen, dataset=("iu_xray", iu_root), image_format="path", use_indication=True,
                                   metrics=("bleu2",), batch_size=3)
    ev.evaluate()
    # Generated for, in dataset order: 1, 2, 5, 6, 7 (3 has no reference, 4 no image); 2 and 6 have no indication.
    assert seen == ["Chest pain.", None, "Cough, evaluate pneumonia", None, "Fever."]
    assert ev.pairs_.set_index("sample_id").loc["CXR1", "context"] == "Chest pain."
    assert ev.pairs_.set_index("sample_id").loc["CXR2", "indication"] is None

    seen.clear()
    off = ReportGenerationEvaluator(gen, dataset=("iu_xray", iu_root), image_format="path", metrics=("bleu2",))
    with pytest.raises(TypeError):  # without use_indication the second argument is None
        off.evaluate()


def test_legacy_one_argument_generator(iu_root):
    def legacy(imgs):
        return ["The lungs are clear." for _ in imgs]

    ev = ReportGenerationEvaluator(legacy, dataset=("iu_xray", iu_root), image_format="path", metrics=("bleu2",))
    assert len(ev.evaluate()) == 1
    with pytest.raises(ConfigError, match="use_indication"):
        ReportGenerationEvaluator(legacy, dataset=("iu_xray", iu_root), image_format="path", metrics=("bleu2",),
                                  use_indication=True).evaluate()


def test_keyword_only_indications(iu_root):
    seen = []

    def gen(imgs, *, indications=None):
        seen.extend(indications)
        return ["Report." for _ in imgs]

    ReportGenerationEvaluator(gen, dataset=("iu_xray", iu_root), image_format="path", use_indication=True,
                              metrics=("bleu2",), max_samples=2).evaluate()
    assert seen == ["Chest pain.", None]


def test_generator_output_is_checked(iu_root):
    ev = ReportGenerationEvaluator(lambda imgs, ind=None: ["x"], dataset=("iu_xray", iu_root), image_format="path",
                                   batch_size=4, metrics=("bleu2",))
    with pytest.raises(ValueError, match="returned 1 texts for 4 samples"):
        ev.evaluate()
    ev = ReportGenerationEvaluator(lambda imgs, ind=None: "x", dataset=("iu_xray", iu_root), image_format="path",
                                   metrics=("bleu2",))
    with pytest.raises(TypeError, match="list of strings"):
        ev.evaluate()


def test_import_path_generator_and_max_samples(iu_root, tmp_path, monkeypatch):
    pkg = tmp_path / "plugins"
    pkg.mkdir()
    (pkg / "my_gen.py").write_text(textwrap.dedent("""
        def generate(imgs, indications=None):
            return ["No acute disease." for _ in imgs]

        class Model:
            def __init__(self, device="cpu"):
                self.device = device
            def __call__(self, imgs, indications=None):
                return [self.device for _ in imgs]
    """))
    monkeypatch.syspath_prepend(str(pkg))
    ev = ReportGenerationEvaluator("my_gen:generate", dataset=("iu_xray", iu_root), image_format="path",
                                   metrics=("bleu2",), max_samples=2)
    ev.evaluate()
    assert ev.pairs_["sample_id"].tolist() == ["CXR1", "CXR2"]
    ev = ReportGenerationEvaluator("my_gen:Model", dataset=("iu_xray", iu_root), image_format="path",
                                   metrics=("bleu2",), device="cpu", max_samples=1)
    ev.evaluate()
    assert ev.pairs_["hypothesis"].tolist() == ["cpu"]
    with pytest.raises(ConfigError, match="cannot import"):
        ReportGenerationEvaluator("no_such_module_xyz:f", dataset=("iu_xray", iu_root))
    sys.modules.pop("my_gen", None)


def test_save_results_files(iu_root, tmp_path):
    out = tmp_path / "out"
    ev = ReportGenerationEvaluator(fake_generator, dataset=make_adapter("iu_xray", iu_root), image_format=strict_loader,
                                   n_bootstrap=10, output_dir=out)
    df = ev.evaluate()
    assert ev.save_results(df) == str(out)
    assert sorted(p.name for p in out.iterdir()) == ["drops.csv", "generations.csv", "results.csv",
                                                     "results_summary.csv"]
    results = pd.read_csv(out / "results.csv")
    pd.testing.assert_frame_equal(results, df, check_dtype=False)
    summary = pd.read_csv(out / "results_summary.csv")
    assert list(summary["metric"]) == ["bleu2", "bleu4", "rouge1", "rouge2", "rougeL"]
    assert {"estimate", "mean", "std", "ci_lower", "ci_upper", "n", "n_bootstrap"} <= set(summary.columns)
    assert (summary["n"] == 4).all() and (summary["n_bootstrap"] == 10).all()
    gens = pd.read_csv(out / "generations.csv")
    assert list(gens.columns) == ["sample_id", "reference", "hypothesis"] and len(gens) == 4
    drops = pd.read_csv(out / "drops.csv", dtype=str, keep_default_na=False)
    assert sorted(drops["reason"]) == ["empty_reference", "image_error", "no_image"]
    with pytest.raises(ValueError):
        ReportGenerationEvaluator(fake_generator, dataset=("iu_xray", iu_root)).save_results(df)


def test_generate_only_writes_canonical_pairs(iu_root, tmp_path):
    ev = ReportGenerationEvaluator(fake_generator, dataset=("iu_xray", iu_root), image_format="path",
                                   ref_section="impression")
    path = ev.generate_only(tmp_path / "gen" / "pairs.parquet")
    pairs = pd.read_parquet(path)
    assert list(pairs.columns) == list(PAIRS_COLUMNS)
    assert pairs.set_index("sample_id").loc["CXR1", "reference"] == "No acute disease."
    prov = io.read_provenance(path)
    assert prov["format"] == "generated" and prov["ref_section"] == "impression" and prov["dataset"] == "iu_xray"
    assert (tmp_path / "gen" / "pairs.drops.csv").is_file()
    assert not list((tmp_path / "gen").glob(".*progress*"))


# --- the generation job: shards and resuming -----------------------------------------------------------------
def test_shards_merge_to_the_whole(iu_root, tmp_path):
    whole, whole_drops = generate(("iu_xray", iu_root), fake_generator, out_pairs=tmp_path / "all.parquet",
                                  out_drops=tmp_path / "all.csv", image_format="path", empty_hypothesis="drop")
    parts = []
    for i in range(3):
        generate(("iu_xray", iu_root), fake_generator, shard=(i, 3), out_pairs=tmp_path / f"s{i}.parquet",
                 out_drops=tmp_path / f"s{i}.csv", image_format="path", empty_hypothesis="drop")
        parts.append(i)
    merged, merged_drops = merge(pair_paths=[tmp_path / f"s{i}.parquet" for i in parts],
                                 drop_paths=[tmp_path / f"s{i}.csv" for i in parts],
                                 out_pairs=tmp_path / "merged.parquet", out_drops=tmp_path / "merged.csv")
    def plain(df):  # an all-None shard column reads back untyped: compare values, missing as None
        return df.astype(object).where(df.notna(), None)

    pd.testing.assert_frame_equal(plain(merged), plain(pd.read_parquet(tmp_path / "all.parquet")))
    assert merged["sample_id"].tolist() == whole["sample_id"].tolist()
    assert sorted(merged_drops["sample_id"]) == sorted(whole_drops["sample_id"])
    assert io.read_provenance(tmp_path / "merged.parquet")["shard"] == {"count": 3, "merged": True}


def test_resume_after_a_crash(iu_root, tmp_path):
    seen = []

    def crashing(imgs, indications=None):
        uids = [uid_of(i) for i in imgs]
        if "6" in uids:
            raise RuntimeError("out of memory")
        seen.extend(uids)
        return [GENERATED[u] for u in uids]

    kwargs = dict(out_pairs=tmp_path / "p.parquet", out_drops=tmp_path / "d.csv", image_format="path",
                  batch_size=2, model="m")
    with pytest.raises(RuntimeError, match="out of memory"):
        generate(("iu_xray", iu_root), crashing, **kwargs)
    assert seen == ["1", "2"] and not (tmp_path / "p.parquet").exists()
    progress = tmp_path / ".p.parquet.progress.jsonl"
    assert len(progress.read_text().splitlines()) == 3  # header + two answers

    seen.clear()

    def fixed(imgs, indications=None):
        uids = [uid_of(i) for i in imgs]
        seen.extend(uids)
        return [GENERATED[u] for u in uids]

    fixed.__qualname__ = crashing.__qualname__  # the same generator, repaired
    pairs, _ = generate(("iu_xray", iu_root), fixed, **kwargs)
    assert sorted(seen) == ["5", "6", "7"]  # 1 and 2 came from the progress file
    assert pairs.set_index("sample_id").loc["CXR1", "hypothesis"] == GENERATED["1"]
    assert not progress.exists()
    seen.clear()
    generate(("iu_xray", iu_root), fixed, **kwargs)  # finished: nothing is generated again
    assert seen == []
    generate(("iu_xray", iu_root), fixed, **dict(kwargs, batch_size=1), ref_section="impression")
    assert seen  # other settings: generated afresh


# --- VQA -----------------------------------------------------------------------------------------------------
ANSWERS = {
    "Is there an effusion?": "Yes.",
    "Is the heart enlarged?": "Yes, mildly.",
    "What is abnormal?": "pleural effusion",
    "Which devices are present?": "None",
    "Which side is the mass on?": "Right side",
    "How many nodules?": "two",
}


def answerer(imgs, questions):
    assert all(len(i) == 1 for i in imgs)
    return [ANSWERS[q] for q in questions]


def test_vqa_rows(vqa_root, tmp_path):
    ev = VQAEvaluator(answerer, dataset=("vqa_rad", vqa_root), image_format="path", n_bootstrap=8,
                      output_dir=tmp_path / "out")
    df = ev.evaluate()
    assert list(df.columns) == ["label", "fold", "seed", "bootstrap", "token_f1", "accuracy", "token_recall"]
    assert df["label"].tolist()[:3] == ["overall", "closed", "open"] and len(df) == 27
    point = df[df["bootstrap"] == -1].set_index("label")
    from radrank.metrics.vqa import token_recall, tokenized_f1

    refs = [r for r, *_ in VQA_RECORDS]
    hyps = [ANSWERS[q] for *_, q in VQA_RECORDS]
    closed = [r.strip().lower() in ("yes", "no") for r in refs]
    f1 = [tokenized_f1(h, r) for r, h in zip(refs, hyps)]
    assert point.loc["overall", "token_f1"] == pytest.approx(np.mean(f1))
    assert point.loc["closed", "accuracy"] == pytest.approx(0.5)  # yes right, "No" answered yes
    assert point.loc["closed", "token_f1"] == pytest.approx(np.mean([f for f, c in zip(f1, closed) if c]))
    assert point.loc["open", "token_recall"] == pytest.approx(
        np.mean([token_recall(h, r) for r, h, c in zip(refs, hyps, closed) if not c]))
    assert math.isnan(point.loc["overall", "accuracy"])
    pairs = ev.pairs_
    assert pairs["context"].tolist() == [q for *_, q in VQA_RECORDS]  # context = question
    assert pairs.set_index("sample_id").loc["3", "reference"] == "none"  # "none" is an answer, not missing
    assert pairs.set_index("sample_id").loc["5", "reference"] == "2"
    ev.save_results(df)
    gens = pd.read_csv(tmp_path / "out" / "generations.csv", keep_default_na=False)
    assert list(gens.columns) == ["sample_id", "question", "reference", "hypothesis", "closed"]
    assert gens["closed"].tolist() == ["True" if c else "False" for c in closed] or \
        gens["closed"].tolist() == closed


def test_vqa_closed_subset_choices(vqa_root):
    by_type = VQAEvaluator(answerer, dataset=("vqa_rad", vqa_root), image_format="path", is_closed="answer_type")
    point = by_type.evaluate().set_index("label")
    # "right" is CLOSED in the dataset: its accuracy counts (and misses: no yes/no in the answer).
    assert point.loc["closed", "accuracy"] == pytest.approx(1 / 3)
    custom = VQAEvaluator(answerer, dataset=("vqa_rad", vqa_root), image_format="path",
                          is_closed=lambda ref: False)
    rows = custom.evaluate()
    assert rows["label"].tolist() == ["overall", "open"]  # no closed question: no closed row (RadHarmony)
    with pytest.raises(ConfigError):
        VQAEvaluator(answerer, dataset=("vqa_rad", vqa_root), is_closed="yes")


def test_vqa_test_split_and_task_checks(vqa_root, iu_root):
    ev = VQAEvaluator(answerer, dataset=("vqa_rad", vqa_root, {"split": "test"}), image_format="path")
    ev.evaluate()
    assert ev.pairs_["sample_id"].tolist() == ["0", "1", "2", "4", "5"]
    with pytest.raises(ConfigError, match="needs a vqa dataset"):
        VQAEvaluator(answerer, dataset=("iu_xray", iu_root))
    with pytest.raises(ConfigError, match="answerer\\(imgs, questions\\)"):
        VQAEvaluator(lambda imgs: ["yes"] * len(imgs), dataset=("vqa_rad", vqa_root), image_format="path").evaluate()


def test_score_pairs_and_metric_names(vqa_root):
    pairs = pd.DataFrame({"sample_id": ["a", "b"], "reference": ["yes", "left lung"], "hypothesis": ["no", "left"]})
    out = score_pairs(pairs, ["vqa", "bleu2"])
    assert list(out.columns) == ["sample_id", *metrics.get("vqa").columns, "bleu2"]
    with pytest.raises(ConfigError, match="unknown metric 'nope'"):
        VQAEvaluator(answerer, dataset=("vqa_rad", vqa_root), metrics=("nope",))


def test_vqa_with_extra_metrics(vqa_root):
    ev = VQAEvaluator(answerer, dataset=("vqa_rad", vqa_root), image_format="path", metrics=("vqa", "bleu2"))
    rows = ev.evaluate().set_index("label")
    assert rows.loc["overall", "bleu2"] == pytest.approx(ev.scores_["bleu2"].mean())
    assert math.isnan(rows.loc["closed", "bleu2"])


# --- bad arguments: a ConfigError naming the argument, before any generation or scoring ----------------------
def never_called(imgs, indications=None):
    raise AssertionError("the generator ran although an argument was bad")


@pytest.mark.parametrize("arguments, message", [
    ({"max_chars": -5}, "max_chars must be None (no cut) or a whole number >= 1; got -5"),
    ({"max_chars": 0}, "max_chars must be None (no cut) or a whole number >= 1; got 0"),
    ({"max_samples": -1}, "max_samples must be None (every sample) or a whole number >= 1; got -1"),
    ({"max_samples": 0}, "max_samples must be None (every sample) or a whole number >= 1; got 0"),
    ({"n_bootstrap": -5}, "n_bootstrap must be a whole number >= 0 (0: the point estimate only); got -5"),
    ({"level": 1.5}, "level must be a number strictly between 0 and 1 (e.g. 0.95); got 1.5"),
    ({"level": float("nan")}, "level must be a number strictly between 0 and 1 (e.g. 0.95); got nan"),
    ({"metrics": "bleu2"}, "metrics must be a list or tuple of metric names, e.g. ('bleu2',); got the string "
                           "'bleu2', which would be read letter by letter"),
    ({"metrics": ()}, f"metrics is empty: name at least one metric; known metrics: {metrics.names()}"),
])
def test_bad_arguments_are_refused_before_any_work(iu_root, arguments, message):
    with pytest.raises(ConfigError) as info:
        ReportGenerationEvaluator(never_called, dataset=("iu_xray", iu_root), image_format="path", **arguments)
    assert str(info.value) == message


def test_an_unknown_dataset_option_is_named(iu_root):
    with pytest.raises(ConfigError) as info:
        ReportGenerationEvaluator(never_called, dataset=("iu_xray", iu_root, {"bogus_option": 1}))
    assert str(info.value).startswith("dataset iu_xray: unknown option(s) ['bogus_option']; iu_xray takes split, ")
    with pytest.raises(ConfigError, match=r"unknown option\(s\) \['bogus_option'\]"):
        make_adapter("iu_xray", iu_root, bogus_option=1)
    assert make_adapter(("iu_xray", iu_root, {"split": None})).name == "iu_xray"  # a real option still works


def test_an_output_dir_that_is_a_file_is_refused(iu_root, tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("x")
    message = f"output_dir {afile} is a file, not a folder: the results are written into a folder"
    with pytest.raises(ConfigError) as info:
        ReportGenerationEvaluator(never_called, dataset=("iu_xray", iu_root), output_dir=afile)
    assert str(info.value) == message
    ev = ReportGenerationEvaluator(fake_generator, dataset=("iu_xray", iu_root), image_format="path",
                                   metrics=("bleu2",))
    df = ev.evaluate()
    with pytest.raises(ConfigError) as info:
        ev.save_results(df, afile)
    assert str(info.value) == message


def test_a_lone_surrogate_from_the_generator_is_named():
    from radrank.backbones.base import check_outputs

    with pytest.raises(ValueError) as info:
        check_outputs(["fine", "bad \ud800 text"], 2)
    assert str(info.value) == ("generator returned text holding a lone UTF-16 surrogate at [1] (first: \\ud800 at "
                               "character 4): half of a surrogate pair is not text, and no file can store it; "
                               "return whole characters (decode bytes with errors='replace')")


def test_a_lone_surrogate_from_the_generator_fails_evaluate_with_that_message(iu_root):
    ev = ReportGenerationEvaluator(lambda imgs, ind=None: ["\ud800"] * len(imgs), dataset=("iu_xray", iu_root),
                                   image_format="path", metrics=("bleu2",))
    with pytest.raises(ValueError, match="generator returned text holding a lone UTF-16 surrogate at \\[0"):
        ev.evaluate()
