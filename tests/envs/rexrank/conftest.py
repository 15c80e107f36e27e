"""Fixtures of the rexrank environment's tests (bertscore, semb, chexbert, radgraph).

Run with that environment's interpreter from the repository root:
``python -m pytest tests/envs/rexrank``. Outside it (no torch / transformers)
these tests are not collected.

No model is downloaded: the hub is off (HF_HUB_OFFLINE=1) and the Hugging Face
cache is an empty temporary folder, so only the tiny models built here exist.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import hf_sandbox

HERE = Path(__file__).resolve().parent
SRC = HERE.parents[2] / "src"

_NEEDED = ("torch", "transformers", "tokenizers")
if any(importlib.util.find_spec(m) is None for m in _NEEDED):
    collect_ignore_glob = ["test_*.py"]
else:
    # Before anything imports huggingface_hub: hub off, a private empty cache.
    hf_sandbox.isolate(SRC, HERE)
    # Tiny models: one thread. Several OpenMP threads make each small op wait for the others,
    # 100 times slower on a busy 2-core machine.
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("MKL_NUM_THREADS", "1")

import pytest  # noqa: E402


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("tiny-models")


@pytest.fixture(scope="session")
def tiny_roberta(tiny_dir):
    import tiny_models

    return tiny_models.build_roberta(tiny_dir / "roberta", hidden=32, layers=3, heads=2, max_length=128)


@pytest.fixture(scope="session")
def tiny_baseline(tiny_dir):
    import tiny_models

    rows = [(0.70 + 0.04 * i, 0.72 + 0.04 * i, 0.71 + 0.04 * i) for i in range(4)]  # raw F is ~0.8 here
    return tiny_models.write_baseline(tiny_dir / "baseline.tsv", rows)


@pytest.fixture(scope="session")
def tiny_bert(tiny_dir):
    import tiny_models

    return tiny_models.build_bert(tiny_dir / "bert", hidden=32, layers=2, heads=2)


@pytest.fixture(scope="session")
def tiny_chexbert(tiny_dir, tiny_bert):
    import tiny_models

    return tiny_models.build_chexbert_checkpoint(tiny_dir / "chexbert" / "chexbert.pth", tiny_bert)


@pytest.fixture(scope="session")
def chexbert_settings(tiny_chexbert, tiny_bert):
    return {"checkpoint": str(tiny_chexbert), "tokenizer": str(tiny_bert), "device": "cpu"}


@pytest.fixture(scope="session")
def tiny_radgraph_models(tiny_dir):
    """Tiny random RadGraph models that the radgraph package itself loads (tiny_radgraph.py): ``root`` holds
    ``radgraph/``, ``radgraph-xl/`` and the ``encoder/`` both name in their config.json."""
    from _strict import reference

    reference("radgraph")
    import tiny_radgraph

    root = tiny_dir / "radgraph-models"
    encoder = tiny_radgraph.build_encoder(root / "encoder")
    return {"root": root, "encoder": encoder, "radgraph": tiny_radgraph.build(root, "radgraph", encoder=encoder),
            "radgraph-xl": tiny_radgraph.build(root, "radgraph-xl", seed=1, encoder=encoder)}


@pytest.fixture(scope="session")
def varied_pairs():
    """~40 (reference, hypothesis) pairs exercising text preparation and tokenisation."""
    import pandas as pd

    import tiny_models

    refs = tiny_models.corpus(44, seed=101)
    hyps = tiny_models.corpus(44, seed=202)
    long_text = " ".join(tiny_models.corpus(40, seed=303))  # beyond the tiny models' 128 tokens
    edits = {
        0: ("", "No acute cardiopulmonary process."),
        1: ("Small left pleural effusion.", ""),
        2: ("   ", "   "),
        3: ("Heart  size   is normal.", "Heart size is normal."),
        4: ("Lungs clear.\nNo effusion.", "Lungs clear. No effusion."),
        5: ("\tTabbed\ttext  and\n\nnewlines ", "tabbed text and newlines"),
        6: ("Opacity 1.5 cm, °µé naïve résumé — “quoted”.", "Opacity 15 mm (unchanged)."),
        7: (long_text, "Short hypothesis."),
        8: ("Short reference.", long_text),
        9: ("Identical report text.", "Identical report text."),
        10: ("FINDINGS: ___ IMPRESSION: stable", "findings: ___ impression: STABLE"),
        11: ("a", "b"),
        12: ("No pneumothorax!!!", "no pneumothorax ?"),
        13: ("  leading and trailing spaces  ", "leading and trailing spaces"),
        14: ("Emoji 🙂 and CJK 肺 text.", "Emoji and CJK text."),
    }
    for i, (r, h) in edits.items():
        refs[i], hyps[i] = r, h
    refs[20] = refs[21] = refs[22]  # duplicated references (idf counts each occurrence)
    return pd.DataFrame({"sample_id": [f"s{i:03d}" for i in range(len(refs))], "reference": refs,
                         "hypothesis": hyps})
