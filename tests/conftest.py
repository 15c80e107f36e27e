"""Shared pytest fixtures. Each group of fixtures is prefixed by the layer it serves."""

from __future__ import annotations

import json

import pytest


@pytest.fixture(autouse=True)
def hermetic_score_cache(tmp_path_factory, monkeypatch):
    """Every test scores into caches of its own (not ~/.cache): a pair cached by an earlier test or run
    would otherwise hide whether this one scores it. Tests of the caches set their own."""
    monkeypatch.setenv("RADRANK_SCORE_CACHE", str(tmp_path_factory.mktemp("score-cache")))
    monkeypatch.setenv("RADRANK_JUDGE_CACHE", str(tmp_path_factory.mktemp("judge-cache")))
    monkeypatch.delenv("RADRANK_SCORE_CACHE_SECRET_FILE", raising=False)  # the machine's secret keys nothing here


@pytest.fixture
def ingest_write(tmp_path):
    """Write a file under tmp_path and return its path.

    ``content`` may be bytes (written as is), str (written as UTF-8) or any other
    value (written as JSON; NaN is allowed, as Python's json writes it).
    """

    def write(name: str, content):
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        elif isinstance(content, str):
            path.write_text(content, encoding="utf-8", newline="")
        else:
            path.write_text(json.dumps(content), encoding="utf-8")
        return path

    return write


@pytest.fixture
def ingest_submission_entries():
    """A small fictional ReXrank submission (findings and reports splits), keyed by case id."""
    return {
        "case-a": {
            "model_prediction": "The lungs are clear. No effusion.",
            "section_findings": "Lungs are clear. Heart size is normal.",
            "section_impression": "No acute cardiopulmonary process.",
            "context": "Age:71.0.Gender:M.Indication:nanComparison: None.",
            "image_path": ["a/frontal.jpg", "a/lateral.jpg"],
            "key_image_path": "a/frontal.jpg",
        },
        "case-b": {
            "model_prediction": "Small left effusion.",
            "section_findings": "Small left pleural effusion.",
            "section_impression": "Left effusion, new since prior.",
            "report": "FINDINGS: Small left pleural effusion. IMPRESSION: Left effusion, new since prior.",
            "context": "Age:58.0.Gender:F.Indication: Dyspnea. Evaluate for effusion.Comparison: Radiograph of ___.",
        },
        "case-c": {
            "model_prediction": "Cardiomegaly.",
            "section_findings": None,
            "section_impression": "Stable cardiomegaly.",
            "context": None,
        },
    }
