"""radrank's ratescore metric against the ratescore package itself, on tiny random models.

The tiny models (tiny_ratescore.py) are of the classes the real ones load as: a DeBERTa-v2
token classifier with RaTEScore's BIO label set and a BERT encoder, each with a tokenizer
trained here. The package's own ``RaTEScore(...).compute_score(candidates, references)`` on
the same inputs and models is the reference.
"""

from __future__ import annotations

import time

import pytest

pd = pytest.importorskip("pandas")
pytest.importorskip("RaTEScore")

import tiny_ratescore  # noqa: E402

from radrank import metrics  # noqa: E402
from radrank.errors import MissingWeightsError  # noqa: E402
from radrank.metrics import ratescore as rs  # noqa: E402

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
def tiny(tmp_path_factory):
    ner, ev = tiny_ratescore.build(tmp_path_factory.mktemp("ratescore-tiny"))
    return {"bert_model": str(ner), "eval_model": str(ev)}


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


def test_missing_weights_fail_fast_naming_the_key(tiny, monkeypatch, tmp_path):
    import huggingface_hub.constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hf-empty"))
    pairs = _pairs(REFS[:1], HYPS[:1])
    start = time.monotonic()
    with pytest.raises(MissingWeightsError, match=r"metric_settings\.ratescore\.bert_model") as err:
        metrics.score("ratescore", pairs, {"device": "cpu"})
    assert "Angelakeke/RaTE-NER-Deberta" in str(err.value)
    with pytest.raises(MissingWeightsError, match=r"metric_settings\.ratescore\.eval_model") as err:
        metrics.score("ratescore", pairs, {"bert_model": tiny["bert_model"], "device": "cpu"})
    assert "FremyCompany/BioLORD-2023-C" in str(err.value)
    with pytest.raises(MissingWeightsError, match=r"metric_settings\.ratescore\.bert_model"):
        metrics.score("ratescore", pairs, {"bert_model": str(tmp_path / "no-such-dir"), "device": "cpu"})
    assert time.monotonic() - start < 5


def test_hub_id_found_in_the_hf_cache(tiny, monkeypatch, tmp_path):
    """A hub id resolves to a cached snapshot (the HF cache layout), offline."""
    import shutil

    import huggingface_hub.constants

    cache = tmp_path / "hub"
    for repo, src in (("Angelakeke/RaTE-NER-Deberta", tiny["bert_model"]),
                      ("FremyCompany/BioLORD-2023-C", tiny["eval_model"])):
        folder = cache / ("models--" + repo.replace("/", "--"))
        commit = "0123456789abcdef0123456789abcdef01234567"
        shutil.copytree(src, folder / "snapshots" / commit)
        (folder / "refs").mkdir(parents=True)
        (folder / "refs" / "main").write_text(commit)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))
    out = metrics.score("ratescore", _pairs(REFS[:2], HYPS[:2]), {"device": "cpu"})
    direct = metrics.score("ratescore", _pairs(REFS[:2], HYPS[:2]), {**tiny, "device": "cpu"})
    pd.testing.assert_frame_equal(out, direct)
    assert out.attrs["models"]["bert_model"]["revision"] == "0123456789abcdef0123456789abcdef01234567"


def test_bad_settings_are_rejected():
    pairs = _pairs(REFS[:1], HYPS[:1])
    with pytest.raises(ValueError, match="affinity_matrix"):
        metrics.score("ratescore", pairs, {"affinity_matrix": "medium"})
    with pytest.raises(ValueError, match="device"):
        metrics.score("ratescore", pairs, {"device": "gpu"})
    with pytest.raises(KeyError, match="no setting"):
        metrics.score("ratescore", pairs, {"use_gpu": True})


def test_spec():
    spec = metrics.get("ratescore")
    assert spec.env == "ratescore" and spec.resources.gpu == 1
    assert spec.columns == ("ratescore",) and spec.leaves[0].column == "ratescore"
    assert spec.settings["bert_model"] == "Angelakeke/RaTE-NER-Deberta"
    assert spec.settings["eval_model"] == "FremyCompany/BioLORD-2023-C"
    assert spec.settings["affinity_matrix"] == "long"
