"""Dataset adapters: every published format, the row contract, and paths that try to leave the root."""

from __future__ import annotations

import json
import math
import os

import pytest

import tiny_data
from radrank import datasets
from radrank.datasets import make_adapter
from radrank.datasets.base import resolve_path
from radrank.errors import ConfigError, InputError
from radrank.sections import parse_section


def _ids(adapter):
    return [s.sample_id for s in adapter]


def _assert_under(paths, root):
    root = root.resolve()
    for p in paths:
        assert p.is_absolute() and (root in p.parents), p
        assert p.is_file(), p


# --- path rules ----------------------------------------------------------------------------------------------
def test_resolve_path_rules(tmp_path):
    root = tmp_path / "root"
    (root / "a").mkdir(parents=True)
    (root / "a" / "x.png").write_bytes(b"x")
    outside = tmp_path / "outside.png"
    outside.write_bytes(b"x")
    (root / "link.png").symlink_to(outside)
    (root / "linkdir").symlink_to(tmp_path)
    (root / "inner.png").symlink_to(root / "a" / "x.png")  # a link that stays inside is fine
    ok = dict(root=root, file="meta.json", field="image", row=3)
    assert resolve_path("a/x.png", **ok) == (root / "a" / "x.png").resolve()
    assert resolve_path("a/../a/x.png", **ok) == (root / "a" / "x.png").resolve()
    assert resolve_path("../x.png", base=root / "a", **ok) == (root / "x.png").resolve()
    assert resolve_path("inner.png", **ok) == (root / "a" / "x.png").resolve()
    for bad, words in (("../outside.png", "outside the dataset root"), ("/etc/passwd", "absolute"),
                       ("C:\\data\\x.png", "absolute"), ("link.png", "symbolic link"),
                       ("linkdir/outside.png", "symbolic link"), ("", "empty"), ("a/../../outside.png", "outside")):
        with pytest.raises(InputError) as e:
            resolve_path(bad, **ok)
        msg = str(e.value)
        assert "meta.json" in msg and "row 3" in msg and "field 'image'" in msg and words in msg, msg


def test_registry():
    assert set(datasets.names()) == {"mimic_cxr", "iu_xray", "chexpert_plus", "rexgradient", "vqa_rad", "slake",
                                     "mimic_ext_cxr_qba"}
    for name in datasets.names():
        cls = datasets.adapter_class(name)
        assert issubclass(cls, datasets.DatasetAdapter) and cls.__module__ == f"radrank.datasets.{name}"
    with pytest.raises(KeyError, match="unknown dataset 'nope'; known datasets: mimic_cxr"):
        make_adapter("nope", "/tmp")
    with pytest.raises(ConfigError):
        make_adapter("vqa_rad", "/definitely/not/here")


# --- MIMIC-CXR -----------------------------------------------------------------------------------------------
def test_mimic_split_file(tmp_path):
    root = tiny_data.mimic(tmp_path / "mimic")
    ad = make_adapter("mimic_cxr", root)
    samples = ad.samples()
    assert _ids(ad) == ["s50000001", "s50000002", "s50000003"]
    s1 = samples[0]
    assert [p.name for p in s1.images] == ["d1-b.dcm", "d1-a.dcm"]  # frontal (PA) first
    assert s1.split == "train" and s1.indication == "Cough."
    assert parse_section(s1.report, "findings") == "Lungs are clear."
    assert samples[1].indication is None  # no indication section: None, never the body
    _assert_under([p for s in samples for p in s.images], root)
    assert _ids(make_adapter("mimic_cxr", root, split="test")) == ["s50000003"]
    assert _ids(make_adapter("mimic_cxr", root, split=["train", "test"])) == ["s50000001", "s50000003"]


def test_mimic_reports_csv_and_tree(tmp_path):
    csv_root = tiny_data.mimic(tmp_path / "m1", reports="csv")
    ad = make_adapter("mimic_cxr", csv_root, reports_csv="reports.csv")
    assert [parse_section(s.report, "impression") for s in ad] == ["No acute process.", "Effusion.",
                                                                   "Stable cardiomegaly."]
    tree_root = tiny_data.mimic(tmp_path / "m2", split_file=False)
    ad = make_adapter("mimic_cxr", tree_root)
    assert _ids(ad) == ["s50000001", "s50000002", "s50000003"]
    assert all(s.split is None for s in ad)
    assert [p.name for p in ad.samples()[0].images] == ["d1-a.dcm", "d1-b.dcm"]
    (tree_root / "files" / "p10" / "p10000002" / "s50000003.txt").unlink()
    assert make_adapter("mimic_cxr", tree_root).samples()[2].report is None


def test_mimic_rejects_bad_ids_and_links(tmp_path):
    root = tiny_data.mimic(tmp_path / "mimic")
    split = root / "mimic-cxr-2.0.0-split.csv"
    text = split.read_text().replace("d3-a,", "../../../../../etc/passwd,")
    split.write_text(text)
    with pytest.raises(InputError) as e:
        make_adapter("mimic_cxr", root).samples()
    assert "mimic-cxr-2.0.0-split.csv" in str(e.value) and "row 5" in str(e.value) and "dicom_id" in str(e.value)

    root2 = tiny_data.mimic(tmp_path / "mimic2", split_file=False)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    tiny_data.write_dicom(outside / "x.dcm", tiny_data.pattern())
    study = root2 / "files" / "p10" / "p10000002" / "s50000003"
    for p in study.iterdir():
        p.unlink()
    study.rmdir()
    study.symlink_to(outside, target_is_directory=True)
    with pytest.raises(InputError, match="outside the dataset root"):
        make_adapter("mimic_cxr", root2).samples()


# --- IU-Xray -------------------------------------------------------------------------------------------------
def test_iu_kaggle_and_openi_agree(tmp_path):
    kaggle = make_adapter("iu_xray", tiny_data.iu_kaggle(tmp_path / "k"))
    openi = make_adapter("iu_xray", tiny_data.iu_openi(tmp_path / "o"))
    assert kaggle.form == "kaggle" and openi.form == "openi"
    assert _ids(kaggle) == _ids(openi) == ["CXR1", "CXR2", "CXR3"]
    for a, b in zip(kaggle, openi):
        assert a.report == b.report and a.indication == b.indication and a.split is None
    k1, o1 = kaggle.samples()[0], openi.samples()[0]
    assert parse_section(k1.report, "findings") == "The cardiac silhouette is normal. Lungs are clear."
    assert k1.indication == "Chest pain" and k1.meta["comparison"] == "None."
    assert "3001" in k1.images[0].name  # Kaggle: frontal first
    assert "4001" in o1.images[0].name  # OpenI: XML order
    assert kaggle.samples()[1].indication is None and parse_section(kaggle.samples()[1].report, "findings") == \
        "No active disease."
    assert kaggle.samples()[2].images == ()
    _assert_under([p for s in kaggle for p in s.images], tmp_path / "k")
    _assert_under([p for s in openi for p in s.images], tmp_path / "o")


def test_iu_rejects_escaping_paths(tmp_path):
    root = tiny_data.iu_kaggle(tmp_path / "k")
    proj = root / "indiana_projections.csv"
    proj.write_text(proj.read_text() + "3,../../../../secret.png,Frontal\n")
    with pytest.raises(InputError) as e:
        make_adapter("iu_xray", root).samples()
    assert "indiana_projections.csv" in str(e.value) and "field 'filename'" in str(e.value) and "row 5" in str(e.value)
    root2 = tiny_data.iu_openi(tmp_path / "o")
    xml = root2 / "ecgen-radiology" / "2.xml"
    xml.write_text(xml.read_text().replace('parentImage id="CXR2_IM-0652-1001"', 'parentImage id="/etc/passwd"'))
    with pytest.raises(InputError, match="absolute"):
        make_adapter("iu_xray", root2).samples()


# --- CheXpert-Plus -------------------------------------------------------------------------------------------
def test_chexpert_plus(tmp_path):
    ad = make_adapter("chexpert_plus", tiny_data.chexpert_plus(tmp_path / "c"))
    samples = ad.samples()
    assert _ids(ad) == ["train/patient00001/study1", "train/patient00002/study1", "valid/patient00003/study2"]
    s1, s2, s3 = samples
    assert len(s1.images) == 2 and s1.indication == "Fever." and s1.meta["age"] == 67 and s1.meta["sex"] == "Male"
    assert parse_section(s1.report, "findings") == "Clear lungs."
    # NaN sections are left out: findings fall back to the impression, the indication comes from section_history.
    assert "nan" not in s2.report.lower() and parse_section(s2.report, "findings") == "Bilateral effusions."
    assert s2.indication == "Shortness of breath" and math.isnan(s2.meta["age"])
    assert s3.report is None and s3.split == "valid"
    assert _ids(make_adapter("chexpert_plus", tmp_path / "c", split="valid")) == ["valid/patient00003/study2"]
    png = make_adapter("chexpert_plus", tiny_data.chexpert_plus(tmp_path / "p", png=True), image_dir="PNG",
                       image_ext=".png")
    assert all(p.suffix == ".png" and p.is_file() for s in png for p in s.images)


def test_chexpert_plus_rejects_escaping_paths(tmp_path):
    root = tiny_data.chexpert_plus(tmp_path / "c")
    csv_path = root / "df_chexpert_plus_240401.csv"
    csv_path.write_text(csv_path.read_text().replace("valid/patient00003/study2/view1_frontal.jpg",
                                                     "../../etc/view1_frontal.jpg"))
    with pytest.raises(InputError) as e:
        make_adapter("chexpert_plus", root).samples()
    assert "df_chexpert_plus_240401.csv" in str(e.value) and "path_to_image" in str(e.value) and "row 5" in str(e.value)


# --- ReXGradient ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("form", ["json", "csv"])
def test_rexgradient(tmp_path, form):
    root = tiny_data.rexgradient(tmp_path / "r", form=form)
    ad = make_adapter("rexgradient", root)
    samples = ad.samples()
    assert _ids(ad) == ["GRDN1_STUDYA", "GRDN2_STUDYB"]
    a, b = samples
    assert a.split == "test" and a.indication == "Cough" and a.meta["age"] == 67 and a.meta["sex"] == "F"
    assert [p.name for p in a.images] == ["a.png", "b.png"]
    _assert_under([p for s in samples for p in s.images], root)
    assert parse_section(a.report, "findings") == "Lungs clear."
    assert parse_section(a.report, "impression") == "Normal."
    assert b.indication is None and parse_section(b.report, "findings") == "Cardiomegaly."
    assert _ids(make_adapter("rexgradient", root, split="train")) == []


def test_rexgradient_rejects_escaping_paths(tmp_path):
    root = tiny_data.rexgradient(tmp_path / "r")
    meta = root / "metadata" / "test_metadata_view_position.json"
    data = json.loads(meta.read_text())
    data["GRDN2_STUDYB"]["ImagePath"] = ["../../outside.png"]
    meta.write_text(json.dumps(data))
    with pytest.raises(InputError) as e:
        make_adapter("rexgradient", root).samples()
    assert "test_metadata_view_position.json" in str(e.value) and "ImagePath" in str(e.value)
    assert "GRDN2_STUDYB" in str(e.value)
    # a symbolic link out of the root, inside the image tree
    outside = tmp_path / "outside.png"
    tiny_data.write_png(outside, tiny_data.gray8())
    data["GRDN2_STUDYB"]["ImagePath"] = ["../deid_png/GRDN2/STUDYB/link.png"]
    meta.write_text(json.dumps(data))
    os.symlink(outside, root / "deid_png" / "GRDN2" / "STUDYB" / "link.png")
    with pytest.raises(InputError, match="symbolic link"):
        make_adapter("rexgradient", root).samples()


# --- VQA-RAD -------------------------------------------------------------------------------------------------
def _vqa_records(n_test_free=3, n_test_para=2, n_train=4):
    recs, qid = [], 0
    for phrase, n in (("freeform", n_train), ("test_freeform", n_test_free), ("test_para", n_test_para)):
        for _ in range(n):
            closed = qid % 2 == 0
            recs.append((qid, f"synpic{qid % 3}.jpg", f"Question {qid}?", "Yes" if closed else "left lung",
                         "CLOSED" if closed else "OPEN ", phrase))
            qid += 1
    return recs


def test_vqa_rad_test_split(tmp_path):
    root = tiny_data.vqa_rad(tmp_path / "v", _vqa_records())
    everything = make_adapter("vqa_rad", root)
    test = make_adapter("vqa_rad", root, split="test")
    assert len(everything) == 9 and len(test) == 5
    assert {s.meta["phrase_type"] for s in test} == {"test_freeform", "test_para"}
    s = test.samples()[0]
    assert s.sample_id == "4" and s.answer_type == "closed" and s.answer == "Yes" and s.question == "Question 4?"
    assert test.samples()[1].answer_type == "open"  # "OPEN " with a stray space
    assert s.images[0].name == "synpic1.jpg" and s.images[0].is_file()


def test_vqa_rad_answers_and_ids(tmp_path):
    root = tiny_data.vqa_rad(tmp_path / "v", [(7, "a.jpg", "How many?", 2, "OPEN", "test_freeform"),
                                                (7, "a.jpg", "Size?", 1.5, "OPEN", "test_freeform"),
                                                (8, "a.jpg", "Devices?", "none", "OPEN", "freeform")])
    samples = make_adapter("vqa_rad", root).samples()
    assert [s.sample_id for s in samples] == ["7", "7#2", "8"]
    assert [s.answer for s in samples] == ["2", "1.5", "none"]  # "none" is an answer, not a missing value


def test_vqa_rad_rejects_escaping_paths(tmp_path):
    root = tiny_data.vqa_rad(tmp_path / "v", [(1, "../../x.jpg", "Q?", "yes", "CLOSED", "freeform")])
    with pytest.raises(InputError) as e:
        make_adapter("vqa_rad", root).samples()
    assert "VQA_RAD Dataset Public.json" in str(e.value) and "row 0" in str(e.value) and "image_name" in str(e.value)


def test_vqa_rad_tolerates_the_full_451_question_test_split(tmp_path):
    root = tiny_data.vqa_rad(tmp_path / "v", _vqa_records(n_test_free=251, n_test_para=200, n_train=30))
    assert len(make_adapter("vqa_rad", root, split="test")) == 451


# --- SLAKE ---------------------------------------------------------------------------------------------------
def test_slake_english_only(tmp_path):
    root = tiny_data.slake(tmp_path / "s")
    ad = make_adapter("slake", root)
    assert _ids(ad) == ["train-1", "validate-3", "test-1"]  # the Chinese questions are left out
    assert [s.split for s in ad] == ["train", "validate", "test"]
    test = make_adapter("slake", root, split="test").samples()
    assert [(s.question, s.answer, s.answer_type) for s in test] == [("What modality is used?", "X-Ray", "open")]
    _assert_under([p for s in ad for p in s.images], root)
    with pytest.raises(ConfigError):
        make_adapter("slake", root, split="dev")


def test_slake_rejects_escaping_paths(tmp_path):
    root = tiny_data.slake(tmp_path / "s")
    data = json.loads((root / "test.json").read_text())
    data[0]["img_name"] = "../../../etc/hosts"
    (root / "test.json").write_text(json.dumps(data))
    with pytest.raises(InputError, match="img_name"):
        make_adapter("slake", root).samples()


# --- MIMIC-Ext-CXR-QBA ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("qa, index", [("zip", True), ("dir", False)])
def test_qba(tmp_path, qa, index):
    images = tmp_path / "mimic" / "files"
    root = tiny_data.qba(tmp_path / "qba", images, qa=qa, index=index)
    ad = make_adapter("mimic_ext_cxr_qba", root, image_root=images)
    samples = ad.samples()
    assert _ids(ad) == ["s50000001/q01", "s50000001/q02", "s50000003/q01"]
    q1, q2, q3 = samples
    assert q1.question == "Describe the lungs." and q1.answer == "Lungs are clear. No effusion."
    assert [p.name for p in q2.images] == ["d1-a.dcm", "d1-b.dcm"] and q2.answer == "No"
    assert q3.answer == "" and q3.split == "test"  # no QA text for that study
    assert q1.meta["question_type"] == "describe"
    _assert_under([p for s in samples for p in s.images], images)
    assert _ids(make_adapter("mimic_ext_cxr_qba", root, image_root=images, split="test")) == ["s50000003/q01"]


def test_qba_rejects_bad_ids(tmp_path):
    import pandas as pd

    images = tmp_path / "mimic" / "files"
    root = tiny_data.qba(tmp_path / "qba", images)
    path = root / "metadata" / "question_image_metadata.parquet"
    df = pd.read_parquet(path)
    df.loc[2, "image_id"] = "../../../../etc/passwd"
    df.to_parquet(path, index=False)
    with pytest.raises(InputError) as e:
        make_adapter("mimic_ext_cxr_qba", root, image_root=images).samples()
    assert "question_image_metadata.parquet" in str(e.value) and "image_id" in str(e.value) and "row 2" in str(e.value)
