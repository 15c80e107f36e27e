"""radrank's radgraph metric (env rexrank: radgraph 0.1.18, transformers 4.x).

* F1 over sets and the combined score on hand-computed sets (empty cases included);
* the annotation -> sets path on the package's own output structure;
* end to end on a tiny random model of RadGraph's architecture that the package's own
  ``RadGraph(...)`` loads offline (tiny_radgraph.py): our annotations equal the package's,
  our reward columns equal ``F1RadGraph(reward_level="all")`` per sample, from an unpacked
  directory, a ``.tar.gz`` and the package's own cache;
* every local layout the metric loads passes the load-time check (standard library only);
* missing weights / encoder fail with MissingWeightsError naming the config key, before any model is
  loaded and without touching the network.

Run: python -m pytest tests/envs/rexrank/test_radgraph.py (with the rexrank env's python).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import tiny_radgraph
from _strict import reference
from radrank import metrics
from radrank.errors import ConfigError, MissingWeightsError
from radrank.metrics import radgraph as rg
from radrank.runtime import Runtime, available


@pytest.fixture(scope="module", autouse=True)
def _radgraph_package():
    """The reference package: the rewards and the annotator are its own code."""
    reference("radgraph")


# --- F1 over sets ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "ref, hyp, expected",
    [
        ({"a", "b", "c"}, {"b", "c", "d", "e"}, 4 / 7),  # TP 2, P 2/4, R 2/3 -> 2*(1/2)(2/3)/(7/6)
        ({"a", "b"}, {"a", "b"}, 1.0),
        ({"a"}, {"a", "b", "c", "d"}, 0.4),  # P 1/4, R 1 -> 0.5/1.25
        ({"a", "b", "c", "d"}, {"a"}, 0.4),  # symmetric
        ({"a"}, {"b"}, 0.0),  # disjoint
        (set(), set(), 0.0),  # empty vs empty is 0, not 1
        ({"a"}, set(), 0.0),  # empty hypothesis
        (set(), {"a"}, 0.0),  # empty reference
    ],
)
def test_set_f1_hand_computed(ref, hyp, expected):
    assert rg.set_f1(ref, hyp) == pytest.approx(expected, abs=1e-15)


def _ann(*entities):
    """The radgraph package's annotation structure: {"entities": {"1": {...}, ...}}."""
    ents = {}
    for i, (tokens, label, relations) in enumerate(entities, start=1):
        ents[str(i)] = {"tokens": tokens, "label": label, "start_ix": i, "end_ix": i,
                        "relations": [list(r) for r in relations]}
    return {"text": " ".join(e[0] for e in entities), "entities": ents, "data_source": None,
            "data_split": "inference"}


REF = _ann(("effusion", "OBS-DP", [("located_at", "3")]),
           ("small", "OBS-DP", [("modify", "1")]),
           ("pleural", "ANAT-DP", []),
           ("atelectasis", "OBS-DP", []))
HYP = _ann(("effusion", "OBS-DP", [("located_at", "2")]),
           ("pleural", "ANAT-DP", []),
           ("pneumonia", "OBS-U", [("located_at", "2")]))


def test_entity_relation_sets_from_package_structure():
    ents, rels = rg.entity_relation_sets(REF)
    assert ents == {("effusion", "OBS-DP"), ("small", "OBS-DP"), ("pleural", "ANAT-DP"), ("atelectasis", "OBS-DP")}
    assert rels == {(("effusion", "OBS-DP"), ("pleural", "ANAT-DP"), "located_at"),
                    (("small", "OBS-DP"), ("effusion", "OBS-DP"), "modify")}
    assert rg.entity_relation_sets({"entities": {}}) == (set(), set())


def test_combined_score_hand_computed():
    cols = rg.score_annotations([REF, REF, rg.EMPTY, REF], [HYP, REF, rg.EMPTY, rg.EMPTY])
    # entities: ref 4, hyp 3, shared {effusion, pleural}: P 2/3, R 2/4 -> F1 4/7
    # relations: ref 2, hyp 2, shared {effusion located_at pleural}: P 1/2, R 1/2 -> F1 1/2
    assert cols["radgraph_entity_f1"].tolist() == pytest.approx([4 / 7, 1.0, 0.0, 0.0])
    assert cols["radgraph_relation_f1"].tolist() == pytest.approx([0.5, 1.0, 0.0, 0.0])
    assert cols["radgraph_combined"].tolist() == pytest.approx([(4 / 7 + 0.5) / 2, 1.0, 0.0, 0.0])
    # F1RadGraph levels through the package's compute_reward:
    # simple = entity F1 = 4/7; partial: {(effusion, OBS-DP, True), (small, OBS-DP, True), (pleural, ANAT-DP),
    # (atelectasis, OBS-DP)} vs {(effusion, OBS-DP, True), (pleural, ANAT-DP), (pneumonia, OBS-U, True)} -> 4/7;
    # complete: {(effusion, OBS-DP, located_at, pleural), (small, OBS-DP, modify, effusion), (pleural, ANAT-DP),
    # (atelectasis, OBS-DP)} vs {(effusion, ..., located_at, pleural), (pleural, ANAT-DP),
    # (pneumonia, OBS-U, located_at, pleural)} -> TP 2, P 2/3, R 1/2 -> 4/7.
    assert cols["radgraph_simple"].tolist() == pytest.approx([4 / 7, 1.0, 0.0, 0.0])
    assert cols["radgraph_partial"].tolist() == pytest.approx([4 / 7, 1.0, 0.0, 0.0])
    assert cols["radgraph_complete"].tolist() == pytest.approx([4 / 7, 1.0, 0.0, 0.0])


def test_relation_f1_counts_relation_type_and_direction():
    a = _ann(("effusion", "OBS-DP", [("located_at", "2")]), ("pleural", "ANAT-DP", []))
    b = _ann(("effusion", "OBS-DP", [("modify", "2")]), ("pleural", "ANAT-DP", []))
    c = _ann(("effusion", "OBS-DP", []), ("pleural", "ANAT-DP", [("located_at", "1")]))
    cols = rg.score_annotations([a, a], [b, c])
    assert cols["radgraph_entity_f1"].tolist() == [1.0, 1.0]
    assert cols["radgraph_relation_f1"].tolist() == [0.0, 0.0]
    assert cols["radgraph_combined"].tolist() == [0.5, 0.5]


# --- the tiny model, loaded by the package itself ------------------------------------------------


@pytest.fixture(scope="module")
def tiny(tiny_radgraph_models):
    return tiny_radgraph_models


REFS = [
    "no acute cardiopulmonary abnormality",
    "small bilateral pleural effusions with bibasilar atelectasis",
    "Mild cardiomegaly. No pleural effusion.",
    "et tube terminates 2 cm above the carina",
    "no acute cardiopulmonary abnormality",  # repeated reference
    "left lower lobe consolidation concerning for pneumonia",
]
HYPS = [
    "no acute cardiopulmonary process",
    "bilateral pleural effusions and basilar atelectasis",
    "mild cardiomegaly with clear lungs",
    "endotracheal tube terminates 2.5 cm above the carina",
    "no acute cardiopulmonary abnormality",  # identical to its reference
    "right upper lobe opacity, possibly atelectasis or infection",
]


def _pairs(refs, hyps):
    return pd.DataFrame({"sample_id": [f"s{i}" for i in range(len(refs))], "reference": refs, "hypothesis": hyps})


@pytest.mark.parametrize("model_type", ["radgraph", "radgraph-xl"])
def test_equals_package_f1radgraph_on_tiny_model(tiny, model_type):
    from radgraph import F1RadGraph

    f1 = F1RadGraph(reward_level="all", model_type=model_type, model_cache_dir=str(tiny["root"]), cuda=-1)
    _, (simple, partial, complete), hyp_anns, ref_anns = f1(refs=REFS, hyps=HYPS)

    # The tiny model is useful only if it annotates something and the pairs differ.
    assert sum(len(a["entities"]) for a in hyp_anns + ref_anns) > 20
    assert any(e["relations"] for a in ref_anns for e in a["entities"].values())
    assert len(set(simple)) > 2

    out = metrics.score("radgraph", _pairs(REFS, HYPS),
                        {"model_type": model_type, "model": str(tiny[model_type]), "device": "cpu", "batch_size": 4})
    assert out["sample_id"].tolist() == [f"s{i}" for i in range(len(REFS))]
    assert out["radgraph_simple"].tolist() == pytest.approx(simple, abs=1e-12)
    assert out["radgraph_partial"].tolist() == pytest.approx(partial, abs=1e-12)
    assert out["radgraph_complete"].tolist() == pytest.approx(complete, abs=1e-12)

    # Our annotations are the package's: same sets, hence the same combined score, computed
    # here independently from F1RadGraph's own annotation lists.
    def sets(a):
        ents = a["entities"]
        return ({(e["tokens"], e["label"]) for e in ents.values()},
                {((e["tokens"], e["label"]), (ents[k]["tokens"], ents[k]["label"]), t)
                 for e in ents.values() for t, k in e["relations"]})

    def f1s(r, h):
        tp = len(r & h)
        p, rc = (tp / len(h) if h else 0.0), (tp / len(r) if r else 0.0)
        return 2 * p * rc / (p + rc) if p + rc else 0.0

    expected_ent, expected_rel = [], []
    for ra, ha in zip(ref_anns, hyp_anns):
        (re_, rr), (he, hr) = sets(ra), sets(ha)
        expected_ent.append(f1s(re_, he))
        expected_rel.append(f1s(rr, hr))
    assert out["radgraph_entity_f1"].tolist() == pytest.approx(expected_ent, abs=1e-12)
    assert out["radgraph_relation_f1"].tolist() == pytest.approx(expected_rel, abs=1e-12)
    combined = [(e + r) / 2 for e, r in zip(expected_ent, expected_rel)]
    assert out["radgraph_combined"].tolist() == pytest.approx(combined, abs=1e-12)
    # An identical report: entity F1 1; relation F1 1 if it has relations, else 0 (empty vs empty).
    has_relations = any(e["relations"] for e in ref_anns[4]["entities"].values())
    assert out.loc[4, ["radgraph_entity_f1", "radgraph_simple"]].tolist() == [1.0, 1.0]
    assert out.loc[4, "radgraph_relation_f1"] == (1.0 if has_relations else 0.0)
    assert out.attrs["models"]["model"]["model_type"] == model_type


def test_annotates_each_distinct_text_once_and_empty_texts_never(tiny, monkeypatch):
    settings = {"model": str(tiny["radgraph"]), "device": "cpu"}
    annotator, _ = rg.METRIC.annotator(rg.METRIC.settings(settings), Runtime())  # the one scoring will use
    seen = []
    forward = annotator.forward
    monkeypatch.setattr(annotator, "forward", lambda texts: seen.extend(texts) or forward(texts))
    refs = REFS[:3] * 3 + ["", "  \n"]
    hyps = HYPS[:3] + REFS[:3] + ["", "   ", ""] + [REFS[0], ""]
    out = metrics.score("radgraph", _pairs(refs, hyps), settings)
    assert sorted(seen) == sorted(set(REFS[:3]) | set(HYPS[:3]))
    assert len(seen) == len(set(seen))
    assert out.loc[3:5, "radgraph_entity_f1"].tolist() == [1.0, 1.0, 1.0]
    # An empty or whitespace-only text has no entities: every score of its pair is 0 (F1RadGraph's 0 for
    # an empty report; the set F1's 0 for empty vs empty).
    assert (out.iloc[6:, 1:] == 0.0).all().all()


def test_archive_directory_and_package_cache_give_the_same_scores(tiny, tmp_path, monkeypatch):
    pairs = _pairs(REFS[1:3], HYPS[1:3])
    base = metrics.score("radgraph", pairs, {"model": str(tiny["radgraph"]), "device": "cpu"})

    archive = tiny_radgraph.archive(tiny["radgraph"], tmp_path / "radgraph.tar.gz")
    from_archive = metrics.score("radgraph", pairs, {"model": str(archive), "device": "cpu"})
    from_folder = metrics.score("radgraph", pairs, {"model": str(tmp_path), "device": "cpu"})  # holds radgraph.tar.gz
    from_parent = metrics.score("radgraph", pairs, {"model": str(tiny["root"]), "device": "cpu"})  # holds radgraph/

    # The default hub id, not in the HF cache, falls back to the radgraph package's own unpacked copy.
    _no_caches(monkeypatch, tmp_path)
    _package_copy(tiny, tmp_path)
    from_package_cache = metrics.score("radgraph", pairs, {"device": "cpu"})

    for other in (from_archive, from_folder, from_parent, from_package_cache):
        pd.testing.assert_frame_equal(base, other)
    assert base.attrs["models"]["model"]["weights_sha256"] == from_archive.attrs["models"]["model"]["weights_sha256"]


# --- weights: what the load-time check accepts, what fails and how ------------------------------------


def _no_caches(monkeypatch, tmp_path):
    """An empty Hugging Face cache, the hub off, and no package copy of the model."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-empty"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))


def _package_copy(tiny, tmp_path, model_type="radgraph") -> Path:
    """Lay out the tiny model where the radgraph package unpacks its download (under XDG_CACHE_HOME)."""
    from importlib import metadata

    where = tmp_path / "xdg" / "radgraph" / metadata.version("radgraph") / model_type
    where.parent.mkdir(parents=True)
    where.symlink_to(tiny[model_type], target_is_directory=True)
    return where


@pytest.fixture
def no_load_no_network(monkeypatch):
    """Loading a model or opening a connection fails the test: a missing model must be found before either."""

    def refuse(*args, **kwargs):
        raise AssertionError("a model was loaded or the network was touched")

    monkeypatch.setattr(rg, "_load", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)


def test_package_cache_root_is_the_packages_own():
    appdirs = reference("appdirs")
    assert rg.package_cache_root() == Path(appdirs.user_cache_dir("radgraph"))


def test_every_local_layout_passes_the_load_time_check(tiny, tmp_path, monkeypatch):
    (tmp_path / "holder").mkdir()
    archive = tiny_radgraph.archive(tiny["radgraph"], tmp_path / "holder" / "radgraph.tar.gz")
    m = rg.METRIC
    for model in (tiny["radgraph"], tiny["root"], archive, archive.parent):
        model_ref, encoder_ref = m.weights(m.settings({"model": str(model)}))
        assert available(model_ref) is None, model
        assert encoder_ref.ref is None and available(encoder_ref) is None  # named by config.json: the job's
    (tmp_path / "empty").mkdir()
    (tmp_path / "not-a-tar.tar.gz").write_text("x")
    for model, why in ((tmp_path / "empty", "radgraph.tar.gz"), (tmp_path / "not-a-tar.tar.gz", "not a tar"),
                       (tmp_path / "nowhere", "no such local path")):
        assert why in available(m.weights(m.settings({"model": str(model)}))[0]), model
    # The default hub id: the package's own copy, and only for the default repo.
    _no_caches(monkeypatch, tmp_path)
    default = m.weights(m.settings({}))[0]
    assert "not in the Hugging Face cache" in available(default)
    _package_copy(tiny, tmp_path)
    assert available(default) is None
    assert available(m.weights(m.settings({"model": "org/other-scorers"}))[0]) is not None
    assert "radgraph-xl.tar.gz" in available(m.weights(m.settings({"model_type": "radgraph-xl"}))[0])


def test_the_load_time_check_needs_no_heavy_package(tiny, tmp_path):
    """The workflow checks weights in the core environment: no radgraph, appdirs, torch or huggingface_hub."""
    archive = tiny_radgraph.archive(tiny["radgraph"], tmp_path / "radgraph.tar.gz")
    empty = tmp_path / "empty"
    empty.mkdir()
    code = (
        "import sys\n"
        "class Refuse:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('radgraph', 'appdirs', 'torch', 'transformers', 'huggingface_hub'):\n"
        "            raise ImportError(name + ' is not in the core environment')\n"
        "sys.meta_path.insert(0, Refuse())\n"
        "from radrank import metrics\n"
        "from radrank.runtime import available\n"
        "m = metrics.get('radgraph')\n"
        "for model in sys.argv[1:]:\n"
        "    print(repr(available(m.weights(m.settings({'model': model}))[0])))\n"
        "print(repr(available(m.weights(m.settings({}))[0])))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(rg.__file__).parents[2]), "HF_HUB_CACHE": str(tmp_path / "hf"),
           "XDG_CACHE_HOME": str(tmp_path / "xdg")}
    out = subprocess.run([sys.executable, "-c", code, str(tiny["radgraph"]), str(archive), str(empty)],
                         env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[:2] == ["None", "None"]
    assert "radgraph.tar.gz" in lines[2] and "not in the Hugging Face cache" in lines[3]


def test_missing_model_fails_naming_the_key_before_loading(monkeypatch, tmp_path, no_load_no_network):
    _no_caches(monkeypatch, tmp_path)
    with pytest.raises(MissingWeightsError, match=r"metric_settings\.radgraph\.model") as err:
        metrics.score("radgraph", _pairs(REFS[:1], HYPS[:1]), {"device": "cpu"})
    assert "StanfordAIMI/RRG_scorers" in str(err.value) and "HF_HUB_OFFLINE=1" in str(err.value)
    with pytest.raises(MissingWeightsError, match=r"metric_settings\.radgraph\.model"):
        metrics.score("radgraph", _pairs(REFS[:1], HYPS[:1]), {"model": str(tmp_path / "nowhere")})
    (tmp_path / "empty-dir").mkdir()
    with pytest.raises(MissingWeightsError, match=r"radgraph\.tar\.gz"):
        metrics.score("radgraph", _pairs(REFS[:1], HYPS[:1]), {"model": str(tmp_path / "empty-dir")})


def test_missing_encoder_fails_naming_the_key_before_loading(tiny, monkeypatch, tmp_path, no_load_no_network):
    _no_caches(monkeypatch, tmp_path)
    # The real checkpoint's config.json names PubMedBERT by hub id; not cached here.
    with pytest.raises(MissingWeightsError, match=r"metric_settings\.radgraph\.encoder") as err:
        metrics.score("radgraph", _pairs(REFS[:1], HYPS[:1]),
                      {"model": str(tiny["radgraph"]),
                       "encoder": "microsoft/BiomedNLP-PubMedBERT-base-uncased-abstract-fulltext"})
    assert "BiomedNLP-PubMedBERT" in str(err.value)


def test_encoder_named_by_the_models_config_is_resolved_under_the_encoder_key(tiny, tmp_path, monkeypatch,
                                                                                 no_load_no_network):
    import json
    import shutil

    model = shutil.copytree(tiny["radgraph"], tmp_path / "radgraph")
    config = json.loads((model / "config.json").read_text())
    config["dataset_reader"]["token_indexers"]["bert"]["model_name"] = "org/uncached-encoder"
    (model / "config.json").write_text(json.dumps(config))
    _no_caches(monkeypatch, tmp_path)
    with pytest.raises(MissingWeightsError, match=r"metric_settings\.radgraph\.encoder") as err:
        metrics.score("radgraph", _pairs(REFS[:1], HYPS[:1]), {"model": str(model)})
    assert "org/uncached-encoder" in str(err.value)


def test_encoder_setting_overrides_the_config(tiny, tmp_path):
    import shutil

    copy = shutil.copytree(tiny["encoder"], tmp_path / "encoder-copy")
    a = metrics.score("radgraph", _pairs(REFS[:2], HYPS[:2]), {"model": str(tiny["radgraph"]), "device": "cpu"})
    b = metrics.score("radgraph", _pairs(REFS[:2], HYPS[:2]),
                      {"model": str(tiny["radgraph"]), "encoder": str(copy), "device": "cpu"})
    pd.testing.assert_frame_equal(a, b)
    assert b.attrs["models"]["encoder"]["id"] == str(copy)
    assert b.attrs["models"]["encoder"]["config_name"] == str(tiny["encoder"])


def test_bad_settings_are_refused_naming_the_key():
    for settings, key in (({"model_type": "chexbert"}, "model_type"), ({"device": "gpu"}, "device"),
                          ({"batch_size": 0}, "batch_size"), ({"reward_level": "all"}, "reward_level")):
        with pytest.raises(ConfigError, match=rf"metric_settings\.radgraph\.{key}\b"):
            rg.METRIC.settings(settings)
    assert rg.MODEL_TYPES == ("radgraph", "radgraph-xl", "modern-radgraph-xl", "echograph")


def test_declaration():
    m = metrics.get("radgraph")
    s = m.settings()
    assert m.family == "rexrank" and m.gpus(s) == 1 and m.env(s) == "rexrank"
    assert m.columns[0] == "radgraph_combined"
    assert [leaf.column for leaf in m.leaves] == ["radgraph_combined", "radgraph_simple", "radgraph_partial",
                                                  "radgraph_complete"]
    assert set(m.columns) == {"radgraph_combined", "radgraph_entity_f1", "radgraph_relation_f1",
                              "radgraph_simple", "radgraph_partial", "radgraph_complete"}
    assert "radgraph" in m.packages
    assert [(c.title, c.leaf, c.position) for c in m.board] == [("RadGraph", "radgraph_combined", 4)]
    assert m.identity(s)["settings"] == {"model_type": "radgraph", "model": "StanfordAIMI/RRG_scorers",
                                         "encoder": None}


# --- the real checkpoint, when a local copy is given (never downloaded) -----------------------------

REAL_MODEL = os.environ.get("RADRANK_RADGRAPH_MODEL")  # radgraph.tar.gz, or its unpacked directory
REAL_ENCODER = os.environ.get("RADRANK_RADGRAPH_ENCODER")  # PubMedBERT's tokenizer + config, if not cached


@pytest.mark.skipif(not REAL_MODEL, reason="set RADRANK_RADGRAPH_MODEL to a local copy of radgraph.tar.gz")
def test_real_radgraph_reproduces_the_package_example():
    """The per-sample rewards written in radgraph 0.1.18's own radgraph.py (its __main__ example,
    model_type="radgraph", reward_level="all")."""
    refs = ["no acute cardiopulmonary abnormality",
            "et tube terminates 2 cm above the carina retraction by several centimeters is recommended for more "
            "optimal placement bibasilar consolidations better assessed on concurrent chest ct",
            "there is no significant change since the previous exam the feeding tube and nasogastric tube have "
            "been removed",
            "unchanged mild pulmonary edema no radiographic evidence pneumonia",
            "no evidence of acute pulmonary process moderately large size hiatal hernia",
            "no acute intrathoracic process"]
    hyps = ["no acute cardiopulmonary abnormality",
            "endotracheal tube terminates 2 5 cm above the carina bibasilar opacities likely represent atelectasis "
            "or aspiration",
            "there is no significant change since the previous exam",
            "unchanged mild pulmonary edema and moderate cardiomegaly",
            "no evidence of acute cardiopulmonary process moderate hiatal hernia",
            "no acute cardiopulmonary process"]
    settings = {"model": REAL_MODEL}
    if REAL_ENCODER:
        settings["encoder"] = REAL_ENCODER
    out = metrics.score("radgraph", _pairs(refs, hyps), settings)
    assert out["radgraph_simple"].tolist() == pytest.approx([1.0, 0.4, 0.5714285714285715, 0.8,
                                                             0.5714285714285715, 0.4])
    assert out["radgraph_partial"].tolist() == pytest.approx([1.0, 0.26666666666666666, 0.5714285714285715, 0.4,
                                                              0.42857142857142855, 0.4])
    assert out["radgraph_complete"].tolist() == pytest.approx([1.0, 0.23529411764705885, 0.5714285714285715, 0.4,
                                                               0.4, 0.4])
