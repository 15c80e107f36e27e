"""F1-CheXbert: labels equal f1chexbert's labeler, F1 leaves equal scikit-learn."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from _strict import reference
from radrank import metrics
from radrank.metrics import chexbert


@pytest.fixture(scope="module")
def upstream_labeler(tiny_chexbert, tiny_bert):
    """f1chexbert 0.0.2's F1CheXbert on the tiny checkpoint (its bert-base-uncased lookups and its
    cache folder pointed at the tiny files)."""
    f1 = reference("f1chexbert.f1chexbert")
    mp = pytest.MonkeyPatch()
    bert_tok, auto_config = f1.BertTokenizer.from_pretrained, f1.AutoConfig.from_pretrained
    mp.setattr(f1, "CACHE_DIR", str(tiny_chexbert.parent))
    mp.setattr(f1.BertTokenizer, "from_pretrained", classmethod(lambda cls, *a, **k: bert_tok(str(tiny_bert))))
    mp.setattr(f1.AutoConfig, "from_pretrained", lambda *a, **k: auto_config(str(tiny_bert)))
    try:
        yield f1.F1CheXbert(device="cpu")
    finally:
        mp.undo()


def test_labels_equal_f1chexbert(upstream_labeler, chexbert_settings, varied_pairs):
    texts = varied_pairs["reference"].tolist() + varied_pairs["hypothesis"].tolist()
    ours = chexbert.label_texts(texts, chexbert_settings)
    theirs = np.array([upstream_labeler.get_label(t.strip()) for t in texts])  # as its forward() calls it
    np.testing.assert_array_equal(ours, theirs)
    # Not vacuous: every condition is 1 for some texts and 0 for others.
    assert (ours.min(axis=0) == 0).all() and (ours.max(axis=0) == 1).all()


def _sklearn(ref, hyp, average):
    return reference("sklearn.metrics").f1_score(ref, hyp, average=average, zero_division=0)


def _leaf_values(ref, hyp, counts=None):
    cols = pd.DataFrame(chexbert.per_sample(ref, hyp))
    out = {}
    for leaf in chexbert.LEAVES:
        stats = leaf.statistics(cols)
        totals = stats.sum(axis=0) if counts is None else counts @ stats
        out[leaf.name] = float(leaf.value(totals))
    return out


def _check_against_sklearn(ref, hyp, values):
    top5 = list(chexbert.TOP5_INDEX)
    for average in ("micro", "macro", "weighted"):
        assert values[f"f1chexbert_all_{average}_f1"] == pytest.approx(_sklearn(ref, hyp, average), abs=1e-12)
        assert values[f"f1chexbert_5_{average}_f1"] == pytest.approx(
            _sklearn(ref[:, top5], hyp[:, top5], average), abs=1e-12)
    accuracy_score = reference("sklearn.metrics").accuracy_score
    assert values["f1chexbert_accuracy"] == pytest.approx(accuracy_score(ref[:, top5], hyp[:, top5]), abs=1e-12)


def test_f1_leaves_equal_sklearn_on_subsets_and_resamples():
    rng = np.random.default_rng(0)
    n = 300
    ref = (rng.random((n, 14)) < rng.uniform(0.05, 0.6, 14)).astype("int64")
    hyp = np.where(rng.random((n, 14)) < 0.7, ref, 1 - ref)
    ref[:, 3] = 0  # a label without support ...
    hyp[:, 3] = 0  # ... nor predictions (scikit-learn: F1 0 for it)
    hyp[:, 6] = 0  # a label never predicted
    _check_against_sklearn(ref, hyp, _leaf_values(ref, hyp))
    for size in (1, 2, 7, 50):  # subsets, some with labels missing on one side
        rows = rng.choice(n, size=size, replace=False)
        _check_against_sklearn(ref[rows], hyp[rows], _leaf_values(ref[rows], hyp[rows]))
    for _ in range(5):  # bootstrap resamples: counts @ per-sample statistics
        counts = rng.multinomial(n, np.full(n, 1 / n)).astype("float64")
        rows = np.repeat(np.arange(n), counts.astype("int64"))
        _check_against_sklearn(ref[rows], hyp[rows], _leaf_values(ref, hyp, counts))


def test_f1_of_nothing_is_zero():
    zeros = np.zeros((4, 14), dtype="int64")
    values = _leaf_values(zeros, zeros)
    assert all(values[k] == 0.0 for k in values if k.endswith("_f1"))
    assert values["f1chexbert_accuracy"] == 1.0


def test_score_end_to_end(chexbert_settings, varied_pairs):
    out = metrics.score("chexbert", varied_pairs, chexbert_settings)
    assert list(out.columns) == ["sample_id", *chexbert.METRIC.columns]
    assert out["sample_id"].tolist() == varied_pairs["sample_id"].tolist()
    ref = out[list(chexbert.REF_COLUMNS)].to_numpy()
    hyp = out[list(chexbert.HYP_COLUMNS)].to_numpy()
    np.testing.assert_array_equal(ref, chexbert.label_texts(varied_pairs["reference"], chexbert_settings))
    np.testing.assert_array_equal(out[list(chexbert.TP_COLUMNS)].to_numpy(), ref & hyp)
    top5 = list(chexbert.TOP5_INDEX)
    # RadEval's per-sample label accuracies and f1chexbert's per-sample exact match of the 5.
    np.testing.assert_allclose(out["chexbert_acc_5"], (ref[:, top5] == hyp[:, top5]).mean(axis=1))
    np.testing.assert_allclose(out["chexbert_acc_14"], (ref == hyp).mean(axis=1))
    np.testing.assert_array_equal(out["chexbert_exact_5"], (ref[:, top5] == hyp[:, top5]).all(axis=1))
    values = {leaf.name: float(leaf.value(leaf.statistics(out).sum(axis=0))) for leaf in chexbert.METRIC.leaves}
    _check_against_sklearn(ref, hyp, values)


def test_text_preparation_as_upstream():
    assert chexbert.prepare("  Lungs  clear.\n\nNo\teffusion.  ") == "Lungs clear. No effusion."
    assert chexbert.prepare("") == ""


def test_checkpoint_that_is_not_chexbert_is_rejected(tmp_path, tiny_bert, tiny_chexbert):
    import torch

    state = torch.load(str(tiny_chexbert), weights_only=True)["model_state_dict"]
    del state["module.linear_heads.13.weight"]
    bad = tmp_path / "chexbert.pth"
    torch.save({"model_state_dict": state}, str(bad))
    with pytest.raises(ValueError, match="linear_heads.13"):
        chexbert.label_texts(["x"], {"checkpoint": str(bad), "tokenizer": str(tiny_bert), "device": "cpu"})
