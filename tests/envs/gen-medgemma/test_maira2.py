"""MAIRA-2's real recipe, trust_remote_code path included, on a tiny random LLaVA (CLIP + Llama) saved with
MAIRA-2-style remote code of our own (tiny_vlm.build_maira2_like). Runs under transformers 4.46 and 5.x."""

from __future__ import annotations

import pytest

from radrank import backbones
from radrank.datasets.base import indication_of
from radrank.errors import ConfigError

REPORTS = [
    "INDICATION: Cough and fever. FINDINGS: Small left pleural effusion. IMPRESSION: Effusion.",
    "FINDINGS: The lungs are clear. IMPRESSION: No acute process.",
    "INDICATION: Dyspnea. FINDINGS: Moderate cardiomegaly. IMPRESSION: Cardiomegaly.",
    "INDICATION: chest pain FINDINGS: Endotracheal tube terminates 4 cm above the carina.",
]


def _load(path, allow=True, **settings):
    return backbones.load("maira2", {"model": str(path), "max_new_tokens": 6, **settings},
                          [str(path)] if allow else ["microsoft/maira-2"])


def test_remote_code_only_through_the_allow_list(tiny_maira):
    with pytest.raises(ConfigError, match="trust_remote_code"):
        _load(tiny_maira, allow=False)
    gen = _load(tiny_maira)
    assert type(gen.processor).__name__ == "TinyMairaProcessor"  # the checkpoint's own processor class ran
    assert type(gen.model).__name__ == "TinyMairaForConditionalGeneration"


def test_findings_batched_left_padded_greedy(tiny_maira, cxr_images):
    inds = [indication_of(r) for r in REPORTS]
    gen = _load(tiny_maira, batch_size=4)
    out = gen(cxr_images, inds)
    assert len(out) == 4 and all(isinstance(t, str) for t in out) and any(out)
    assert gen.stats["images"] == 6  # frontal + lateral at most: 1 + 2 + 1 + 2
    assert gen.generation_config.do_sample is False and gen.generation_config.max_new_tokens == 6
    one = _load(tiny_maira, batch_size=1)
    assert one(cxr_images, inds) == out
    assert len(set(out)) > 1  # outputs depend on the inputs


def test_indication_goes_to_its_slot_never_the_report_body(tiny_maira, cxr_images):
    inds = [indication_of(r) for r in REPORTS]
    gen = _load(tiny_maira)
    gen(cxr_images, inds)
    assert "INDICATION: Cough and fever." in gen.rendered[0]
    assert "INDICATION: n/a" in gen.rendered[1]  # the processor's own missing-section text
    for report, rendered in zip(REPORTS, gen.rendered):
        body = report.split("FINDINGS:")[1].split("IMPRESSION:")[0].strip()
        assert body not in rendered
    off = _load(tiny_maira, use_indication=False)
    off(cxr_images, inds)
    assert all("INDICATION: n/a" in r for r in off.rendered)


def test_technique_and_comparison_slots_and_lateral(tiny_maira, cxr_images):
    gen = _load(tiny_maira)
    gen(cxr_images[:2], [{"indication": "Fever.", "technique": "PA and lateral.", "comparison": "None."}, None])
    assert "INDICATION: Fever. TECHNIQUE: PA and lateral. COMPARISON: None." in gen.rendered[0]
    assert gen.rendered[0].count("<image>") == 1 and gen.rendered[1].count("<image>") == 2
    with pytest.raises(ValueError, match="unknown context field"):
        gen(cxr_images[:1], [{"history": "x"}])
    frontal_only = _load(tiny_maira, use_lateral=False)
    frontal_only(cxr_images)
    assert all(r.count("<image>") == 1 for r in frontal_only.rendered)
