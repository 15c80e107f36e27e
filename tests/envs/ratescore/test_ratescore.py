"""radrank's ratescore metric against the ratescore package itself, on tiny random models.

The tiny models (tiny_ratescore.py) are of the classes the real ones load as: a DeBERTa-v2
token classifier with RaTEScore's BIO label set and a BERT encoder, each with a tokenizer
trained here. The package's own ``RaTEScore(...).compute_score(candidates, references)`` on
the same inputs and models is the reference.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest
from _strict import reference

from radrank import metrics
from radrank.errors import ConfigError, MissingWeightsError
from radrank.metrics import ratescore as rs
from radrank.runtime import Runtime, available


@pytest.fixture(autouse=True)
def ratescore_package():
    """The reference package (under RADRANK_STRICT=1 its absence fails)."""
    return reference("RaTEScore")

REFS = [
    "No acute cardiopulmonary process.",
    "Small bilateral pleural effusions with bibasilar atelectasis.",
    "Mild cardiomegaly. No pleural effusion.",
    "The heart size is normal. The lungs are clear.",
    "No acute cardiopulmonary process.",  # repeated reference
    "Left lower lobe consolidation concerning for pneumonia. Unchanged mild pulmonary edema.",
    "Stable cardiomegaly.",
]
HYPS = [
    "No acute findings.",
    "Bilateral pleural effusions and basilar atelectasis.",
    "Mild cardiomegaly with clear lungs.",
    "The heart size is normal. The lungs are clear.",  # identical to its reference
    "Right upper lobe opacity, possibly atelectasis or infection.",
    "Unchanged mild pulmonary edema. Left lower lobe consolidation.",
    "Heart size is normal",  # no entity with the tiny model: the 0.5 rule
]


@pytest.fixture(scope="module")
def package_scorer(tiny):
    from RaTEScore import RaTEScore

    rs._quiet_sentencizer()
    return RaTEScore(bert_model=tiny["bert_model"], eval_model=tiny["eval_model"], use_gpu=False)


def _pairs(refs, hyps):
    return pd.DataFrame({"sample_id": [f"s{i}" for i in range(len(refs))], "reference": refs, "hypothesis": hyps})


def test_tiny_models_are_informative(tiny, package_scorer):
    ents = rs.entities(package_scorer, REFS + HYPS)
    types = {t for e in ents for _, t in e}
    assert len(types) >= 3, types  # several entity types, so the affinity matrix matters
    assert any(len(e) == 0 for e in ents), "want a text without entities (the 0.5 rule)"
    assert all(ents[:3]), "the dedup test wants entities in the first three references"
    assert sum(len(e) > 1 for e in ents) >= 5


@pytest.mark.parametrize("matrix", ["long", "short"])
def test_equals_package_compute_score(tiny, package_scorer, matrix):
    from RaTEScore import RaTEScore

    scorer = package_scorer if matrix == "long" else RaTEScore(
        bert_model=tiny["bert_model"], eval_model=tiny["eval_model"], use_gpu=False, affinity_matrix=matrix)
    expected = scorer.compute_score(HYPS, REFS)  # candidates first
    out = metrics.score("ratescore", _pairs(REFS, HYPS), {**tiny, "affinity_matrix": matrix, "device": "cpu"})
    assert out["sample_id"].tolist() == [f"s{i}" for i in range(len(REFS))]
    assert out["ratescore"].tolist() == pytest.approx(expected, abs=1e-12)
    assert len(set(expected)) >= 4  # the pairs really differ
    assert 0.5 in expected  # an entity-less report somewhere
    assert out["ratescore"].iloc[3] == pytest.approx(1.0)  # identical report
    assert out.attrs["models"]["affinity_matrix"]["name"] == matrix


def test_long_and_short_matrices_differ(tiny):
    long = metrics.score("ratescore", _pairs(REFS, HYPS), {**tiny, "device": "cpu"})
    short = metrics.score("ratescore", _pairs(REFS, HYPS), {**tiny, "affinity_matrix": "short", "device": "cpu"})
    assert (long["ratescore"] != short["ratescore"]).any()


def test_batched_ner_matches_package_batched(tiny):
    from RaTEScore import RaTEScore

    expected = RaTEScore(bert_model=tiny["bert_model"], eval_model=tiny["eval_model"], use_gpu=False,
                         batch_size=4).compute_score(HYPS, REFS)
    out = metrics.score("ratescore", _pairs(REFS, HYPS), {**tiny, "batch_size": 4, "device": "cpu"})
    # Sentences are batched differently (each distinct text once), so only float rounding may differ.
    assert out["ratescore"].tolist() == pytest.approx(expected, abs=1e-6)


def test_each_distinct_text_is_tagged_once(tiny, package_scorer, monkeypatch):
    import RaTEScore.score as package_score

    seen = []
    real = package_score.run_ner

    def spy(texts, *args):
        seen.extend(texts)
        return real(texts, *args)

    monkeypatch.setattr(package_score, "run_ner", spy)
    refs = REFS[:3] * 4
    hyps = HYPS[:3] * 2 + REFS[:3] * 2
    out = metrics.score("ratescore", _pairs(refs, hyps), {**tiny, "device": "cpu"})
    assert sorted(seen) == sorted(set(REFS[:3]) | set(HYPS[:3]))
    assert out["ratescore"].iloc[6:].tolist() == pytest.approx([1.0] * 6)  # identical reports


def test_empty_texts_score_half_and_keep_alignment(tiny, package_scorer):
    """The package drops a text with no kept sentence from its list, so the later pairs of the call
    are compared with the wrong partner (and fewer scores than pairs come back). radrank gives such a
    text no entities (score 0.5, the package's rule) and keeps every other pair's score."""
    refs = ["Stable cardiomegaly.", REFS[1], "", REFS[2], "  ", REFS[5]]
    hyps = ["", HYPS[1], HYPS[2], "x.", HYPS[3], HYPS[5]]
    out = metrics.score("ratescore", _pairs(refs, hyps), {**tiny, "device": "cpu"})
    assert out["ratescore"].iloc[[0, 2, 3, 4]].tolist() == [0.5, 0.5, 0.5, 0.5]
    good = [1, 5]
    expected = package_scorer.compute_score([hyps[i] for i in good], [refs[i] for i in good])
    assert out["ratescore"].iloc[good].tolist() == pytest.approx(expected, abs=1e-12)

    # The upstream misalignment, as of ratescore 0.6.0.
    upstream = package_scorer.compute_score(hyps, refs)
    assert len(upstream) < len(refs)


def test_affinity_matrix_file_is_a_declared_weight(tiny, package_scorer, tmp_path):
    """A JSON file of the package's keys: declared (checked at load, hashed), resolved, read by the package."""
    from RaTEScore.scorer import DEFAULT_MATRIX_SHORT

    path = tmp_path / "matrix.json"
    path.write_text(json.dumps(DEFAULT_MATRIX_SHORT))
    settings = {**tiny, "affinity_matrix": str(path), "device": "cpu"}
    refs = rs.METRIC.weights(rs.METRIC.settings(settings))
    assert [(r.setting, r.need) for r in refs] == [("bert_model", "model"), ("eval_model", "model"),
                                                   ("affinity_matrix", "file")]
    assert all(available(r) is None for r in refs)
    runtime = Runtime()
    out = metrics.score("ratescore", _pairs(REFS, HYPS), settings, runtime=runtime)
    assert [r.setting for r in runtime.resolved] == ["bert_model", "eval_model", "affinity_matrix"]
    short = metrics.score("ratescore", _pairs(REFS, HYPS), {**tiny, "affinity_matrix": "short", "device": "cpu"})
    assert out["ratescore"].tolist() == short["ratescore"].tolist()
    assert out.attrs["models"]["affinity_matrix"]["hash"] == short.attrs["models"]["affinity_matrix"]["hash"]


def test_the_scorer_is_loaded_once_per_process(tiny, monkeypatch):
    loads = []
    real = rs.load_scorer
    monkeypatch.setattr(rs, "load_scorer", lambda *args: loads.append(args) or real(*args))
    settings = {**tiny, "batch_size": 3, "device": "cpu"}  # a combination no other test loads
    for _ in range(2):
        metrics.score("ratescore", _pairs(REFS[:2], HYPS[:2]), settings, runtime=Runtime())
    assert len(loads) == 1


def test_missing_weights_fail_before_loading_naming_the_key(tiny, monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-empty"))
    loads = []
    monkeypatch.setattr(rs, "load_scorer", lambda *args: loads.append(args))
    pairs = _pairs(REFS[:1], HYPS[:1])
    with pytest.raises(MissingWeightsError, match=r"metric_settings\.ratescore\.bert_model") as err:
        metrics.score("ratescore", pairs, {"device": "cpu"})
    assert "Angelakeke/RaTE-NER-Deberta" in str(err.value)
    with pytest.raises(MissingWeightsError, match=r"metric_settings\.ratescore\.eval_model") as err:
        metrics.score("ratescore", pairs, {"bert_model": tiny["bert_model"], "device": "cpu"})
    assert "FremyCompany/BioLORD-2023-C" in str(err.value)
    with pytest.raises(MissingWeightsError, match=r"metric_settings\.ratescore\.bert_model"):
        metrics.score("ratescore", pairs, {"bert_model": str(tmp_path / "no-such-dir"), "device": "cpu"})
    assert loads == []  # each failed at resolution: the package loaded nothing
    # What the workflow's load-time check says of the same references, without torch or the package.
    refs = rs.METRIC.weights(rs.METRIC.settings({}))
    assert all("not in the Hugging Face cache" in available(r) for r in refs)


def test_hub_id_found_in_the_hf_cache(tiny, monkeypatch, tmp_path):
    """A hub id resolves to a cached snapshot (the HF cache layout), offline; its provenance names the revision
    and hashes the tokenizer files, the DeBERTa SentencePiece model among them."""
    import shutil

    cache = tmp_path / "hub"
    commit = "0123456789abcdef0123456789abcdef01234567"
    for repo, src in (("Angelakeke/RaTE-NER-Deberta", tiny["bert_model"]),
                      ("FremyCompany/BioLORD-2023-C", tiny["eval_model"])):
        folder = cache / ("models--" + repo.replace("/", "--"))
        shutil.copytree(src, folder / "snapshots" / commit)
        (folder / "refs").mkdir(parents=True)
        (folder / "refs" / "main").write_text(commit)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    out = metrics.score("ratescore", _pairs(REFS[:2], HYPS[:2]), {"device": "cpu"})
    direct = metrics.score("ratescore", _pairs(REFS[:2], HYPS[:2]), {**tiny, "device": "cpu"})
    pd.testing.assert_frame_equal(out, direct)
    ner = out.attrs["models"]["bert_model"]
    assert ner["revision"] == commit
    tokenizer_files = {"tokenizer.json", "spm.model"} & set(ner["files_sha256"])
    assert tokenizer_files, ner["files_sha256"]


def test_bad_settings_are_refused_when_built():
    with pytest.raises(ConfigError, match=r"metric_settings\.ratescore\.affinity_matrix: 'medium'"):
        rs.METRIC.settings({"affinity_matrix": "medium"})
    with pytest.raises(ConfigError, match=r"metric_settings\.ratescore\.device"):
        rs.METRIC.settings({"device": "gpu"})
    with pytest.raises(ConfigError, match=r"metric_settings\.ratescore\.use_gpu: no such setting"):
        rs.METRIC.settings({"use_gpu": True})


def test_declaration():
    m = metrics.get("ratescore")
    s = m.settings()
    assert m is rs.METRIC and m.family == "ratescore" and m.gpus(s) == 1 and m.gpus(s.replace(device="cpu")) == 0
    assert m.columns == ("ratescore",) and m.leaves[0].column == "ratescore"
    assert (s.bert_model, s.eval_model, s.affinity_matrix) == (rs.NER_MODEL, rs.EVAL_MODEL, "long")
    assert [(c.title, c.leaf, c.position) for c in m.board] == [("RaTEScore", "ratescore", 6)]
    assert s.identity() == {"bert_model": rs.NER_MODEL, "eval_model": rs.EVAL_MODEL, "affinity_matrix": "long"}


def test_sentencepiece_only_tokenizer_is_hashed_into_provenance(tiny, tmp_path):
    """A DeBERTa-v3 tokenizer may ship only spm.model: the resolver lists it with the model's files, so its
    hash is in provenance (no separate lookup)."""
    import shutil

    ner = tmp_path / "ner"
    shutil.copytree(tiny["bert_model"], ner)
    (ner / "spm.model").write_bytes(b"a sentencepiece model stands here")
    (ref, _) = rs.METRIC.weights(rs.METRIC.settings({**tiny, "bert_model": str(ner)}))
    resolved = Runtime().resolve(ref)
    assert "spm.model" in resolved.provenance()["files_sha256"]
