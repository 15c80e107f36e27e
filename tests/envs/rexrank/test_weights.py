"""Weights: fail before any model is loaded when missing, resolve from the hub cache, provenance."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from radrank import metrics
from radrank.errors import MissingWeightsError
from radrank.metrics import bertscore, chexbert, semb
from radrank.runtime import Runtime, loaders
from radrank.settings import field_specs

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


def test_missing_weights_fail_before_loading_naming_the_config_key(chexbert_settings, monkeypatch):
    """Resolution alone finds a missing model: no model is loaded and the network is never touched."""

    def refuse(*args, **kwargs):
        raise AssertionError("a model was loaded or the network was touched")

    for target, attr in ((loaders, "load_encoder"), (loaders, "load_tokenizer"), (bertscore, "_Encoder"),
                         (chexbert, "Labeler"), (socket.socket, "connect")):
        monkeypatch.setattr(target, attr, refuse)
    assert os.environ["HF_HUB_OFFLINE"] == "1"
    for metric, setting, settings, model in _missing_cases(chexbert_settings):
        with pytest.raises(MissingWeightsError) as info:
            metrics.score(metric, PAIRS, settings)
        message = str(info.value)
        assert model in message, message
        assert f"metric_settings.{metric}.{setting}" in message, message


def test_missing_weights_fail_before_torch_is_imported(tmp_path):
    """A fresh job process: the error comes from resolution alone — torch is never imported, no socket opened."""
    src = Path(__file__).resolve().parents[3] / "src"
    code = (
        "import socket, sys\n"
        "def refuse(*args, **kwargs):\n"
        "    raise AssertionError('the network was touched')\n"
        "socket.socket.connect = refuse\n"
        "import pandas as pd\n"
        "from radrank import metrics\n"
        "from radrank.errors import MissingWeightsError\n"
        "pairs = pd.DataFrame({'sample_id': ['a'], 'reference': ['x'], 'hypothesis': ['y']})\n"
        "for metric in ('bertscore', 'semb', 'chexbert', 'radgraph'):\n"
        "    try:\n"
        "        metrics.score(metric, pairs, {})\n"
        "    except MissingWeightsError as e:\n"
        "        print(metric, 'torch' in sys.modules, str(e)[:60])\n"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path / "xdg"),
           "PYTHONPATH": str(src)}
    env.pop("HF_HUB_CACHE", None)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    lines = out.stdout.strip().splitlines()
    assert len(lines) == 4, out.stdout + out.stderr
    for line in lines:
        metric, torch_loaded, _ = line.split(" ", 2)
        assert torch_loaded == "False", line


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
    from radrank.runtime import weights_digest

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
    for metric in (semb.METRIC, chexbert.METRIC):
        s = metric.settings(cx)
        p = metric.provenance(s, metric.resolve(s, Runtime()))
        assert p["checkpoint"]["id"] == "radrank-tests/tiny-rrg-scorers"
        assert p["checkpoint"]["revision"] == commit
        assert p["checkpoint"]["weights_sha256"] == weights_digest(tiny_chexbert)
        assert p["tokenizer"]["revision"] == commit and "vocab.txt" in p["tokenizer"]["files_sha256"]
        assert p["settings"] == {"checkpoint": "radrank-tests/tiny-rrg-scorers", "checkpoint_file": "chexbert.pth",
                                 "tokenizer": "radrank-tests/tiny-bert", "dtype": "fp32"}
        json.dumps(p)


def test_specs():
    """GPU metrics of the rexrank env; what changes numbers is scored, batch size and device are not."""
    for metric in (bertscore.METRIC, semb.METRIC, chexbert.METRIC):
        s = metric.settings()
        assert metric.env(s) == "rexrank" and metric.gpus(s) == 1
        specs = field_specs(metric.Settings)
        assert specs["dtype"].scores and not specs["batch_size"].scores and not specs["device"].scores
        assert {ref.setting for ref in metric.weights(s)} <= set(metric.identity(s)["settings"])
    assert semb.METRIC.Settings is chexbert.METRIC.Settings  # one labeler's settings
    defaults = bertscore.METRIC.settings()
    assert defaults.model == "distilroberta-base" and defaults.num_layers == 5
    assert defaults.idf is False and defaults.rescale_with_baseline is True
    assert [(c.title, c.leaf, c.position) for c in semb.METRIC.board] == [("SembScore", "semb_score", 3)]


def test_remote_code_is_never_trusted(tiny_roberta, tiny_baseline, chexbert_settings, tiny_radgraph_models,
                                      monkeypatch):
    """No setting of these metrics can ask for remote code, their code never passes True, and every
    transformers load they make (fresh, not from the model cache) passes trust_remote_code=False."""
    import transformers

    from radrank.metrics import radgraph
    from radrank.runtime import clear_models

    for metric in (bertscore.METRIC, semb.METRIC, chexbert.METRIC, radgraph.METRIC):
        assert "trust_remote_code" not in field_specs(metric.Settings), metric
    root = Path(bertscore.__file__).parent
    for name in ("bertscore.py", "semb.py", "chexbert.py", "radgraph.py", "_hf.py"):
        assert "trust_remote_code=True" not in (root / name).read_text(), name

    loads = []
    for cls in (transformers.AutoConfig, transformers.AutoModel, transformers.AutoTokenizer):
        real = cls.from_pretrained.__func__

        def spy(klass, *args, _real=real, **kwargs):
            loads.append((klass.__name__, kwargs.get("trust_remote_code")))
            return _real(klass, *args, **kwargs)

        monkeypatch.setattr(cls, "from_pretrained", classmethod(spy))
    clear_models()
    metrics.score("bertscore", PAIRS, {"model": str(tiny_roberta), "num_layers": 2,
                                       "baseline_path": str(tiny_baseline), "device": "cpu"})
    metrics.score("semb", PAIRS, chexbert_settings)
    seen = {name for name, _ in loads}
    assert {"AutoConfig", "AutoModel", "AutoTokenizer"} <= seen, loads
    assert all(trust is False for _, trust in loads), loads
    # The radgraph package loads its encoder itself (transformers' default: no remote code), through its own
    # per-process cache: emptied here (for this test only) so that it loads again.
    from radgraph.allennlp.common import cached_transformers

    monkeypatch.setattr(cached_transformers, "_model_cache", {})
    monkeypatch.setattr(cached_transformers, "_tokenizer_cache", {})
    loads.clear()
    metrics.score("radgraph", PAIRS, {"model": str(tiny_radgraph_models["radgraph"]), "device": "cpu"})
    assert loads and all(not trust for _, trust in loads), loads
    clear_models()
