"""LLaVA-Rad's recipe through a stand-in `llava` package (fakes.py): lazy import, weights of both the LoRA
and the base, one device, the conversation prompt, equal-length batches, output order and decoding."""

from __future__ import annotations

import json
import sys

import pytest

from radrank import backbones
from radrank.errors import MissingWeightsError

import fakes


@pytest.fixture
def fake_llava(tmp_path, monkeypatch):
    root = fakes.write_fake_llava(tmp_path / "pkg")
    monkeypatch.syspath_prepend(str(root))
    for name in [m for m in sys.modules if m == "llava" or m.startswith("llava.")]:
        monkeypatch.delitem(sys.modules, name)
    import llava.model.builder as builder

    state = {}

    def factory(model_path, model_base):
        tok = fakes.WordTokenizer()
        model = fakes.EchoModel(tok, returns_prompt=state.get("returns_prompt", True))
        model.to = lambda *a, **k: model
        model.eval = lambda: model
        state["model"] = model
        return tok, model, fakes.ImageProcessor()

    builder.FACTORY = factory
    builder.CALLS.clear()
    yield builder, state
    for name in [m for m in sys.modules if m == "llava" or m.startswith("llava.")]:
        sys.modules.pop(name, None)


def _dirs(tmp_path):
    out = []
    for name in ("llava-rad", "vicuna"):
        d = tmp_path / name
        d.mkdir()
        (d / "config.json").write_text(json.dumps({"model_type": "llama"}))
        out.append(d)
    return out


REPORTS_INDICATIONS = ["Cough.", None, "Shortness of breath, evaluate for pneumonia.", None, "Fever."]


@pytest.mark.parametrize("returns_prompt", [True, False])
def test_generates_in_input_order_with_equal_length_batches(tmp_path, fake_llava, cxr_images, returns_prompt):
    builder, state = fake_llava
    state["returns_prompt"] = returns_prompt
    lora, base = _dirs(tmp_path)
    gen = backbones.load("llava_rad", {"model": str(lora), "model_base": str(base), "device": "cpu",
                                       "dtype": "fp32", "batch_size": 2})
    assert builder.CALLS == [dict(model_path=str(lora), model_base=str(base), model_name="llavarad",
                                  device_map={"": "cpu"}, device="cpu")]
    imgs = (cxr_images + cxr_images)[:5]
    out = gen(imgs, REPORTS_INDICATIONS)
    # the fake answers with the prompt's last word: the indication's last word, or the instruction's
    assert out == ["re:Cough.", "re:X-ray.", "re:pneumonia.", "re:X-ray.", "re:Fever."]
    model = state["model"]
    for call in model.calls:
        assert call["attention_mask"] is None  # no padding: every generate() call has equal lengths
        assert call["images"][0] == call["input_ids"].shape[0]
        assert (call["input_ids"] == -200).sum() == call["input_ids"].shape[0]  # one image token each
    assert sum(c["input_ids"].shape[0] for c in model.calls) == 5
    assert gen.rendered[0].startswith("A chat. USER: <image>\n")
    assert gen.rendered[0].endswith("Indication: Cough. ASSISTANT:")
    assert "Indication" not in gen.rendered[1]
    prov = gen.provenance()
    assert prov["model"]["id"] == str(lora) and prov["model_base"]["id"] == str(base)


def test_indication_off_and_one_image(tmp_path, fake_llava, cxr_images):
    builder, state = fake_llava
    lora, base = _dirs(tmp_path)
    gen = backbones.load("llava_rad", {"model": str(lora), "model_base": str(base), "device": "cpu",
                                       "use_indication": False, "batch_size": 8})
    out = gen(cxr_images, ["Cough.", "Fever.", None, None])
    assert out == ["re:X-ray."] * 4
    assert len(state["model"].calls) == 1 and state["model"].calls[0]["images"][0] == 4
    assert all(r.count("<image>") == 1 for r in gen.rendered)


def test_missing_base_weights_name_their_key(tmp_path, fake_llava):
    lora, _ = _dirs(tmp_path)
    with pytest.raises(MissingWeightsError, match="backbone_settings.llava_rad.model_base"):
        backbones.load("llava_rad", {"model": str(lora), "model_base": str(tmp_path / "none")})
