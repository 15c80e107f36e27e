"""MedGemma's real recipe on a tiny random Gemma3ForConditionalGeneration (built locally, offline)."""

from __future__ import annotations

import pytest

from radrank import backbones
from radrank.datasets.base import indication_of
from radrank.runtime import Runtime, available, weights_digest

REPORTS = [
    "INDICATION: Cough and fever. FINDINGS: Small left pleural effusion. IMPRESSION: Effusion.",
    "FINDINGS: The lungs are clear. IMPRESSION: No acute process.",
    "INDICATION: Dyspnea, evaluate for edema. FINDINGS: Moderate cardiomegaly. IMPRESSION: Cardiomegaly.",
    "INDICATION: chest pain FINDINGS: Endotracheal tube terminates 4 cm above the carina.",
]


def _load(path, task="report", **settings):
    return backbones.load("medgemma", {"model": str(path), "max_new_tokens": 6, "vqa_max_new_tokens": 4,
                                       **settings}, task=task)


def test_generator_contract_greedy_and_batch_invariant(tiny_gemma3, cxr_images):
    inds = [indication_of(r) for r in REPORTS]
    gen = _load(tiny_gemma3, batch_size=4, use_indication=True)
    out = gen(cxr_images, inds)
    assert isinstance(out, list) and len(out) == 4 and all(isinstance(t, str) for t in out)
    assert any(out) and gen.stats["batches"] == 1 and gen.stats["new_tokens"] > 0
    assert gen.generation_config.do_sample is False and gen.generation_config.num_beams == 1
    # left padding: each sample's text does not depend on its batch mates
    one = _load(tiny_gemma3, batch_size=1, use_indication=True)
    assert one(cxr_images, inds) == out
    assert one.stats["batches"] == 4
    assert gen(cxr_images, inds) == out  # greedy: deterministic
    assert str(gen.model.device) == "cpu" and gen.recipe.device == "cpu"


def test_prompt_has_indication_only_when_asked_and_never_the_report_body(tiny_gemma3, cxr_images):
    inds = [indication_of(r) for r in REPORTS]
    assert inds[1] is None
    gen = _load(tiny_gemma3, use_indication=True, batch_size=2)
    gen(cxr_images, inds)
    assert gen.last_prompts[0].startswith("Clinical indication: Cough and fever.\n")
    assert gen.last_prompts[1] == backbones.get("medgemma").settings({}).report_prompt
    for report, rendered in zip(REPORTS, gen.rendered):
        body = report.split("FINDINGS:")[1].split("IMPRESSION:")[0].strip()
        assert body not in rendered and body.split()[0] + " " + body.split()[1] not in rendered
    assert "Dyspnea, evaluate for edema." in gen.rendered[2]
    off = _load(tiny_gemma3, use_indication=False)
    off(cxr_images, inds)
    assert not any("Cough" in r or "Dyspnea" in r for r in off.rendered)
    assert set(off.last_prompts) == {backbones.get("medgemma").settings({}).report_prompt}


def test_chat_template_one_user_turn_no_system_prompt_images_after_text(tiny_gemma3, cxr_images):
    gen = _load(tiny_gemma3)
    gen(cxr_images)
    for images, rendered in zip(cxr_images, gen.rendered):
        assert rendered.startswith("<bos><start_of_turn>user\n")
        assert rendered.endswith("<start_of_turn>model\n")
        assert rendered.count("<start_of_turn>") == 2 and "system" not in rendered
        assert rendered.count("<start_of_image>") == len(images)
        assert rendered.index("Write the findings") < rendered.index("<start_of_image>")
    capped = _load(tiny_gemma3, max_images=1)
    capped(cxr_images)
    assert all(r.count("<start_of_image>") == 1 for r in capped.rendered)


def test_vqa_answerer(tiny_gemma3, cxr_images):
    ans = _load(tiny_gemma3, task="vqa", batch_size=3)
    questions = ["Is there a pleural effusion?", "Where is the opacity?", "Is the heart enlarged?",
                 "What   device is seen?"]
    out = ans(cxr_images, questions)
    assert len(out) == 4 and all(isinstance(t, str) for t in out)
    assert ans.generation_config.max_new_tokens == 4
    assert ans.last_prompts[3].startswith("What device is seen?\n")
    assert all(q.split()[0] in r for q, r in zip(questions, ans.rendered))
    with pytest.raises(ValueError, match="4 samples of images but 2 questions"):
        ans(cxr_images, questions[:2])


def test_loads_what_the_workflow_checks_and_records_its_provenance(tiny_gemma3, cxr_images):
    import transformers

    rt = Runtime()
    settings = {"model": str(tiny_gemma3), "max_new_tokens": 6}
    gen = backbones.load("medgemma", settings, runtime=rt)
    declared = backbones.get("medgemma").weights(settings)
    assert [(r.ref, r.need, r.revision) for r in rt.resolved] == [(r.ref, r.need, r.revision) for r in declared]
    assert [available(r) for r in declared] == [None]
    prov = gen.provenance()
    assert prov["backbone"] == "medgemma" and prov["task"] == "report"
    assert prov["model"]["id"] == str(tiny_gemma3) and len(prov["model"]["weights_sha256"]) == 64
    assert prov["model"]["weights_sha256"] == weights_digest(sorted(tiny_gemma3.glob("*.safetensors")))
    assert {"config.json", "tokenizer.json"} <= set(prov["model"]["files_sha256"])
    assert prov["packages"]["transformers"] == transformers.__version__
    if int(transformers.__version__.split(".")[0]) >= 5:
        assert type(gen.processor.image_processor).__name__.endswith("Pil")  # no torchvision needed


def test_bf16_on_cpu(tiny_gemma3, cxr_images):
    import torch

    gen = _load(tiny_gemma3, dtype="bf16", batch_size=2)
    out = gen(cxr_images[:2])
    assert gen.model.dtype == torch.bfloat16 and len(out) == 2
