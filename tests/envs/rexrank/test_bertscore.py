"""BERTScore: our batched path equals the bert-score library (tiny random RoBERTa)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from _strict import reference
from radrank import metrics
from radrank.metrics import bertscore


def _settings(tiny_roberta, tiny_baseline, **kw):
    return {"model": str(tiny_roberta), "num_layers": 2, "baseline_path": str(tiny_baseline), "device": "cpu",
            **kw}


def _library(tiny_roberta, tiny_baseline, refs, hyps, *, idf, rescale=True):
    """bert-score 0.3.13 as CXR-Report-Metric calls it (spaces collapsed on both sides first)."""
    bert_score = reference("bert_score")
    refs = [re.sub(r" +", " ", t) for t in refs]
    hyps = [re.sub(r" +", " ", t) for t in hyps]
    scorer = bert_score.BERTScorer(model_type=str(tiny_roberta), num_layers=2, lang="en", idf=idf,
                                   idf_sents=refs if idf else None, rescale_with_baseline=rescale,
                                   baseline_path=str(tiny_baseline), nthreads=0, device="cpu")
    p, r, f = scorer.score(hyps, refs, batch_size=64)
    return np.column_stack([p.numpy(), r.numpy(), f.numpy()]).astype("float64")


@pytest.mark.filterwarnings("ignore:The given NumPy array is not writable")
@pytest.mark.parametrize("idf", [False, True], ids=["no-idf", "idf"])
def test_equals_bert_score_library(tiny_roberta, tiny_baseline, varied_pairs, idf):
    settings = _settings(tiny_roberta, tiny_baseline, idf=idf)
    ours = metrics.score("bertscore", varied_pairs, settings)
    assert list(ours.columns) == ["sample_id", "bertscore", "bertscore_precision", "bertscore_recall"]
    assert ours["sample_id"].tolist() == varied_pairs["sample_id"].tolist()
    lib = _library(tiny_roberta, tiny_baseline, varied_pairs["reference"].tolist(),
                   varied_pairs["hypothesis"].tolist(), idf=idf)
    got = ours[["bertscore_precision", "bertscore_recall", "bertscore"]].to_numpy()
    np.testing.assert_allclose(got, lib, atol=1e-6, rtol=0)
    # The comparison is not vacuous: scores spread, and empty sides give the rescaled zero.
    assert np.nanstd(got[:, 2]) > 0.05
    b = bertscore.baseline(settings)
    assert got[0, 2] == pytest.approx((0 - b[2]) / (1 - b[2]), abs=1e-6)


@pytest.mark.filterwarnings("ignore:The given NumPy array is not writable")
def test_unrescaled_equals_library(tiny_roberta, tiny_baseline, varied_pairs):
    settings = _settings(tiny_roberta, tiny_baseline, rescale_with_baseline=False, baseline_path=None)
    ours = bertscore.score_texts(varied_pairs["reference"], varied_pairs["hypothesis"], settings)
    lib = _library(tiny_roberta, tiny_baseline, varied_pairs["reference"].tolist(),
                   varied_pairs["hypothesis"].tolist(), idf=False, rescale=False)
    np.testing.assert_allclose(ours, lib, atol=1e-6, rtol=0)
    assert (ours[:3] == 0).all()  # an empty side: raw P = R = F = 0
    assert (ours[3:, 2] > 0).all() and (ours[:, 2] <= 1 + 1e-6).all()


def test_batching_and_chunking_do_not_change_numbers(tiny_roberta, tiny_baseline, varied_pairs, monkeypatch):
    settings = _settings(tiny_roberta, tiny_baseline, idf=True)
    refs, hyps = varied_pairs["reference"].tolist(), varied_pairs["hypothesis"].tolist()
    whole = bertscore.score_texts(refs, hyps, settings)
    monkeypatch.setattr(bertscore, "CHUNK_TOKENS", {"cpu": 300, "cuda": 300})  # many chunks
    small = bertscore.score_texts(refs, hyps, {**settings, "batch_size": 3})
    np.testing.assert_allclose(small, whole, atol=1e-6, rtol=0)


def test_idf_from_corpus_pairs_makes_shards_agree(tiny_roberta, tiny_baseline, varied_pairs):
    """With idf, a shard scored with the whole table as corpus equals the same rows of the whole."""
    settings = _settings(tiny_roberta, tiny_baseline, idf=True)
    whole = metrics.score("bertscore", varied_pairs, settings)
    shard = varied_pairs.iloc[10:25].reset_index(drop=True)
    alone = metrics.score("bertscore", shard, settings)
    with_corpus = metrics.score("bertscore", shard, settings, {"corpus_pairs": varied_pairs})
    cols = ["bertscore", "bertscore_precision", "bertscore_recall"]
    np.testing.assert_allclose(with_corpus[cols].to_numpy(), whole[cols].to_numpy()[10:25], atol=1e-6)
    assert np.abs(alone[cols].to_numpy() - whole[cols].to_numpy()[10:25]).max() > 1e-4


def test_bf16_runs_close_to_fp32(tiny_roberta, tiny_baseline, varied_pairs):
    settings = _settings(tiny_roberta, tiny_baseline)
    refs, hyps = varied_pairs["reference"].tolist(), varied_pairs["hypothesis"].tolist()
    fp32 = bertscore.score_texts(refs, hyps, settings)
    bf16 = bertscore.score_texts(refs, hyps, {**settings, "dtype": "bf16"})
    assert np.abs(bf16 - fp32).max() < 0.05


def test_text_preparation():
    assert bertscore.prepare("  a   b  ") == "a b"
    assert bertscore.prepare("a\n\nb\t c") == "a\n\nb\t c"  # only spaces collapse, as CXR-Report-Metric


def test_builtin_baseline_is_bert_scores_table():
    assert bertscore.baseline({})[2] == pytest.approx(0.8473319, abs=1e-7)
    bert_score = reference("bert_score")
    from pathlib import Path

    import pandas as pd

    shipped = Path(bert_score.__file__).parent / "rescale_baseline" / "en" / "distilroberta-base.tsv"
    table = pd.read_csv(shipped)
    np.testing.assert_array_equal(np.array(bertscore.DISTILROBERTA_BASELINE, dtype="float32"),
                                  table[["P", "R", "F"]].to_numpy(dtype="float32"))


def test_num_layers_out_of_range(tiny_roberta, tiny_baseline):
    with pytest.raises(ValueError, match="num_layers"):
        bertscore.score_texts(["a"], ["b"], _settings(tiny_roberta, tiny_baseline, num_layers=9,
                                                      rescale_with_baseline=False))
