"""SembScore: equals an independent, unbatched cosine of CheXbert CLS vectors."""

from __future__ import annotations

import numpy as np
import pytest

from radrank import metrics
from radrank.metrics import chexbert, semb
from radrank.runtime import Runtime, clear_models


def _independent_cls(texts, tiny_chexbert, tiny_bert):
    """CXR-Report-Metric's encode path, one report at a time: its text preparation and
    tokenisation (slow BertTokenizer, tokenize + encode_plus, cut at 511 + [SEP]), a BertModel
    loaded by hand from the checkpoint, last layer's token 0."""
    import torch
    from transformers import BertConfig, BertModel, BertTokenizer

    tok = BertTokenizer.from_pretrained(str(tiny_bert))
    model = BertModel(BertConfig.from_pretrained(str(tiny_bert))).eval()
    state = torch.load(str(tiny_chexbert), map_location="cpu", weights_only=True)["model_state_dict"]
    model.load_state_dict({k[len("module.bert."):]: v for k, v in state.items() if k.startswith("module.bert.")},
                          strict=False)
    out = []
    for text in texts:
        text = " ".join(text.strip().replace("\n", " ").split()).strip()
        pieces = tok.tokenize(text)
        ids = tok.encode_plus(pieces)["input_ids"] if pieces else [tok.cls_token_id, tok.sep_token_id]
        if len(ids) > 512:
            ids = ids[:511] + [tok.sep_token_id]
        with torch.no_grad():
            out.append(model(torch.tensor([ids]))[0][0, 0].numpy().astype("float64"))
    return np.stack(out)


def test_equals_independent_cosine(chexbert_settings, tiny_chexbert, tiny_bert, varied_pairs):
    ours = metrics.score("semb", varied_pairs, chexbert_settings)
    assert list(ours.columns) == ["sample_id", "semb_score"]
    a = _independent_cls(varied_pairs["reference"].tolist(), tiny_chexbert, tiny_bert)
    b = _independent_cls(varied_pairs["hypothesis"].tolist(), tiny_chexbert, tiny_bert)
    expected = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    np.testing.assert_allclose(ours["semb_score"].to_numpy(), expected, atol=1e-6, rtol=0)
    assert ours["semb_score"].iloc[9] == pytest.approx(1.0, abs=1e-6)  # identical texts
    assert ours["semb_score"].std() > 1e-3  # not vacuous


def test_long_report_is_cut_at_512_tokens(chexbert_settings, tiny_chexbert, tiny_bert):
    long_text = " ".join(["effusion"] * 700)
    got = semb.score_texts([long_text], [long_text + " and more words"], chexbert_settings)
    a = _independent_cls([long_text], tiny_chexbert, tiny_bert)
    vec = semb.METRIC.labeler(semb.METRIC.settings(chexbert_settings), Runtime()).cls([long_text])
    np.testing.assert_allclose(vec[0], a[0], atol=1e-5)
    assert got[0] == pytest.approx(1.0, abs=1e-6)  # the extra words fall beyond the cut


def test_semb_and_chexbert_share_one_model_and_encoding(chexbert_settings, varied_pairs, monkeypatch):
    clear_models()
    built = []
    init = chexbert.Labeler.__init__
    monkeypatch.setattr(chexbert.Labeler, "__init__", lambda self, *a, **k: built.append(1) or init(self, *a, **k))
    metrics.score("semb", varied_pairs, chexbert_settings)
    lab = chexbert.METRIC.labeler(chexbert.METRIC.settings(chexbert_settings), Runtime())
    calls = []
    forward = lab.model.forward
    monkeypatch.setattr(lab.model, "forward", lambda *a, **k: calls.append(1) or forward(*a, **k))
    metrics.score("chexbert", varied_pairs, chexbert_settings)
    assert calls == []  # every text's CLS vector came from semb's pass
    assert built == [1]  # one labeler for both metrics
