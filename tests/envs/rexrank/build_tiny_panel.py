"""Build the tiny random models of the whole ReXrank model panel into a folder and print the
metric_settings that point the workflow at them (JSON on stdout).

Run with the rexrank environment's Python:  python tests/envs/rexrank/build_tiny_panel.py OUT
Used by tests/test_radcliq_workflow.py (RadCliQ end to end through the workflow).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import tiny_models  # noqa: E402
import tiny_radgraph  # noqa: E402


def main(out: Path) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    roberta = tiny_models.build_roberta(out / "roberta", layers=3)
    baseline = tiny_models.write_baseline(out / "roberta-baseline.tsv", [(0.80, 0.80, 0.80)] * 4)
    bert = tiny_models.build_bert(out / "bert")
    checkpoint = tiny_models.build_chexbert_checkpoint(out / "chexbert" / "chexbert.pth", bert)
    radgraph = tiny_radgraph.build(out / "radgraph")
    chexbert_settings = {"checkpoint": str(checkpoint.parent), "tokenizer": str(bert), "device": "cpu"}
    return {
        "bertscore": {"model": str(roberta), "num_layers": 2, "baseline_path": str(baseline), "device": "cpu"},
        "semb": chexbert_settings,
        "radgraph": {"model": str(radgraph), "device": "cpu"},
    }


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1]))))
