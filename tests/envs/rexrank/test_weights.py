"""Weights: fail fast when missing, resolve from the hub cache, provenance."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from radrank import metrics
from radrank.errors import MissingWeightsError
from radrank.metrics import bertscore, chexbert, semb

PAIRS = pd.DataFrame({"sample_id": ["a", "b"], "reference": ["No effusion.", "Mild edema."],
                      "hypothesis": ["No effusion.", "Edema."]})
ABSENT = "radrank-tests/no-such-model"


def _missing_cases(chexbert_settings):
    return [
        ("bertscore", "model", {"model": ABSENT}, ABSENT),
        ("bertscore", "model", {}, "distilroberta-base"),  # the default, absent from the empty cache
        ("semb", "checkpoint", {**chexbert_settings, "checkpoint": ABSENT}, ABSENT),
        ("semb", "checkpoint", {}, "StanfordAIMI/RRG_scorers"),
        ("chexbert", "tokenizer", {**chexbert_settings, "tokenizer": ABSENT}, ABSENT),
        ("chexbert", "checkpoint", {"checkpoint": "/no/such/dir/chexbert.pth"}, "/no/such/dir/chexbert.pth"),
    ]


def test_missing_weights_fail_fast_naming_the_config_key(chexbert_settings):
    assert os.environ["HF_HUB_OFFLINE"] == "1"
    for metric, setting, settings, model in _missing_cases(chexbert_settings):
        start = time.perf_counter()
        with pytest.raises(MissingWeightsError) as info:
            metrics.score(metric, PAIRS, settings)
        elapsed = time.perf_counter() - start
        message = str(info.value)
        assert model in message, message
        assert f"metric_settings.{metric}.{setting}" in message, message
        assert elapsed < 1.0, (metric, setting, elapsed)


def test_missing_weights_fail_before_torch_is_imported(tmp_path):
    """A fresh job process: the error comes from resolution alone, well within a second."""
    src = Path(__file__).resolve().parents[3] / "src"
    code = (
        "import sys, time\n"
        "import pandas as pd\n"
        "from radrank import metrics\n"
        "from radrank.errors import MissingWeightsError\n"
        "pairs = pd.DataFrame({'sample_id': ['a'], 'reference': ['x'], 'hypothesis': ['y']})\n"
        "for metric in ('bertscore', 'semb', 'chexbert'):\n"
        "    t = time.perf_counter()\n"
        "    try:\n"
        "        metrics.score(metric, pairs, {})\n"
        "    except MissingWeightsError as e:\n"
        "        print(metric, round(time.perf_counter() - t, 3), 'torch' in sys.modules, str(e)[:60])\n"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path), "PYTHONPATH": str(src)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    lines = out.stdout.strip().splitlines()
    assert len(lines) == 3, out.stdout + out.stderr
    for line in lines:
        metric, elapsed, torch_loaded, _ = line.split(" ", 3)
        assert float(elapsed) < 1.0 and torch_loaded == "False", line


def _fake_hub_cache(repo: str, files: dict, commit: str = "0123456789abcdef0123456789abcdef01234567") -> Path:
    """Lay out files as huggingface_hub's cache holds a downloaded snapshot of ``repo``."""
    from huggingface_hub import constants

    root = Path(constants.HF_HUB_CACHE) / f"models--{repo.replace('/', '--')}"
    snapshot = root / "snapshots" / commit
    snapshot.mkdir(parents=True, exist_ok=True)
    for name, source in files.items():
        shutil.copy(source, snapshot / name)
    (root / "refs").mkdir(exist_ok=True)
    (root / "refs" / "main").write_text(commit)
    return snapshot


def test_hub_cache_resolution_and_provenance(tiny_roberta, tiny_bert, tiny_chexbert, tiny_baseline):
    from radrank.models import weights_digest

    commit = "0123456789abcdef0123456789abcdef01234567"
    roberta_files = {p.name: p for p in Path(tiny_roberta).iterdir()}
    _fake_hub_cache("radrank-tests/tiny-roberta", roberta_files, commit)
    _fake_hub_cache("radrank-tests/tiny-bert", {p.name: p for p in Path(tiny_bert).iterdir()}, commit)
    _fake_hub_cache("radrank-tests/tiny-rrg-scorers", {"chexbert.pth": tiny_chexbert}, commit)

    settings = {"model": "radrank-tests/tiny-roberta", "num_layers": 2, "baseline_path": str(tiny_baseline),
                "device": "cpu"}
    by_id = metrics.score("bertscore", PAIRS, settings)
    by_path = metrics.score("bertscore", PAIRS, {**settings, "model": str(tiny_roberta)})
    pd.testing.assert_frame_equal(by_id, by_path)

    attrs = by_id.attrs["models"]  # what jobs.score records as the scores' "models" provenance
    assert attrs["model"]["revision"] == commit and attrs["device"] == "cpu"
    prov = bertscore.provenance(settings)
    assert prov["model"]["id"] == "radrank-tests/tiny-roberta"
    assert prov["model"]["revision"] == commit
    assert prov["model"]["weights_sha256"] == weights_digest(Path(tiny_roberta) / "model.safetensors")
    assert prov["settings"] == {"model": "radrank-tests/tiny-roberta", "num_layers": 2, "idf": False,
                                "rescale_with_baseline": True, "baseline_path": str(tiny_baseline), "dtype": "fp32"}
    assert prov["baseline"]["values"] == pytest.approx([0.78, 0.80, 0.79], abs=1e-6)
    json.dumps(prov)  # provenance goes into parquet metadata as JSON

    cx = {"checkpoint": "radrank-tests/tiny-rrg-scorers", "tokenizer": "radrank-tests/tiny-bert", "device": "cpu"}
    scored = metrics.score("semb", PAIRS, cx)
    assert scored["semb_score"].iloc[0] == pytest.approx(1.0, abs=1e-6)
    assert scored.attrs["models"]["checkpoint"]["revision"] == commit
    assert metrics.score("chexbert", PAIRS, cx).attrs["models"]["tokenizer"]["revision"] == commit
    for module in (semb, chexbert):
        p = module.provenance(cx)
        assert p["checkpoint"]["id"] == "radrank-tests/tiny-rrg-scorers"
        assert p["checkpoint"]["revision"] == commit
        assert p["checkpoint"]["weights_sha256"] == weights_digest(tiny_chexbert)
        assert p["tokenizer"]["revision"] == commit and "vocab.txt" in p["tokenizer"]["files_sha256"]
        assert p["settings"] == {"checkpoint": "radrank-tests/tiny-rrg-scorers", "checkpoint_file": "chexbert.pth",
                                 "tokenizer": "radrank-tests/tiny-bert", "dtype": "fp32"}
        json.dumps(p)


def test_specs():
    for module in (bertscore, semb, chexbert):
        spec = module.SPEC
        assert spec.env == "rexrank" and spec.resources.gpu == 1
        assert set(module.NUMBER_SETTINGS) <= set(spec.settings)
        assert {"device", "dtype", "batch_size"} <= set(spec.settings)
        assert callable(module.provenance)
    assert bertscore.SPEC.settings["model"] == "distilroberta-base" and bertscore.SPEC.settings["num_layers"] == 5
    assert bertscore.SPEC.settings["idf"] is False and bertscore.SPEC.settings["rescale_with_baseline"] is True


def test_remote_code_is_never_trusted():
    root = Path(bertscore.__file__).parent
    for name in ("bertscore.py", "semb.py", "chexbert.py", "_hf.py"):
        text = (root / name).read_text()
        assert "trust_remote_code=True" not in text
