"""A model metric scored through the group job (radrank.scoring) equals each submission scored alone — on a
tiny random RoBERTa through the real BERTScore path, with and without idf — and the score cache keys on the
content of the weights: a changed weight file is never served an old score."""

from __future__ import annotations

import shutil

import numpy as np
import pandas as pd
import pytest

from radrank import metrics
from radrank.score_cache import ScoreCache
from radrank.scoring import score_group

COLUMNS = ["bertscore", "bertscore_precision", "bertscore_recall"]


@pytest.fixture
def group(varied_pairs):
    """Three models sharing the references: a template model, one with its own hypotheses, one that misses cases
    (so its idf corpus differs)."""
    template = varied_pairs.assign(hypothesis="No acute cardiopulmonary process.")
    return {"careful": varied_pairs, "template": template,
            "partial": varied_pairs.iloc[5:].reset_index(drop=True)}


def _settings(tiny_roberta, tiny_baseline, **kw):
    return {"model": str(tiny_roberta), "num_layers": 2, "baseline_path": str(tiny_baseline), "device": "cpu", **kw}


@pytest.mark.filterwarnings("ignore:The given NumPy array is not writable")
@pytest.mark.parametrize("idf", [False, True], ids=["no-idf", "idf"])
def test_group_equals_each_submission_alone(group, tiny_roberta, tiny_baseline, idf):
    settings = _settings(tiny_roberta, tiny_baseline, idf=idf)
    result = score_group("bertscore", settings, group)
    for model, pairs in group.items():
        alone = metrics.score("bertscore", pairs, settings)
        got = result.by_model[model]
        assert got["sample_id"].tolist() == alone["sample_id"].tolist()
        np.testing.assert_allclose(got[COLUMNS].to_numpy(), alone[COLUMNS].to_numpy(), atol=1e-6, rtol=0)
    # without idf a pair is the same whoever wrote it: the partial model's pairs are all careful's
    shared = sum(len(p) for p in group.values()) - result.counts["distinct"]
    assert shared >= len(group["partial"]) if not idf else shared < len(group["partial"])


@pytest.mark.filterwarnings("ignore:The given NumPy array is not writable")
def test_the_cache_keys_on_the_weights_content(group, tiny_roberta, tiny_baseline, tmp_path):
    model_dir = tmp_path / "roberta"
    shutil.copytree(tiny_roberta, model_dir)
    settings = _settings(model_dir, tiny_baseline)
    cache = ScoreCache(tmp_path / "cache")
    first = score_group("bertscore", settings, group, cache=cache)
    again = score_group("bertscore", settings, group, cache=cache)
    assert again.counts["scored"] == 0 and again.models == first.models
    for model in group:
        pd.testing.assert_frame_equal(again.by_model[model], first.by_model[model], check_exact=True)
    # new weights under the same path (a retrained model saved over the old one): scored again, not served.
    # (A job loads each model once per process, by path; a new job process is what sees the new file.)
    from safetensors.torch import load_file, save_file

    from radrank.runtime import clear_models

    weights = load_file(str(model_dir / "model.safetensors"))
    save_file({k: v * 1.5 if v.is_floating_point() else v for k, v in weights.items()},
              str(model_dir / "model.safetensors"), metadata={"format": "pt"})
    clear_models()
    changed = score_group("bertscore", settings, group, cache=cache)
    assert changed.counts["cached"] == 0 and changed.counts["scored"] == first.counts["distinct"]
    assert not np.allclose(changed.by_model["careful"]["bertscore"], first.by_model["careful"]["bertscore"])
