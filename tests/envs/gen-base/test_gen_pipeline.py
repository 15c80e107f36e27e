"""Generation from real dataset folders with images loaded by radrank.images (the gen-base path end to end)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from PIL import Image

import tiny_data
from radrank.datasets import make_adapter
from radrank.generate import generate, run_generation
from radrank.ingest.pairs import PAIRS_COLUMNS


def test_report_generation_gets_pil_images(tmp_path):
    root = tiny_data.mimic(tmp_path / "mimic")
    (root / "files" / "p10" / "p10000001" / "s50000002" / "d2-a.dcm").write_bytes(b"broken")
    seen = []

    def generator(imgs, indications):
        for study in imgs:
            for img in study:
                assert isinstance(img, Image.Image) and img.mode == "RGB"
                assert img.size == (tiny_data.COLS, tiny_data.ROWS)
        seen.append((len(imgs), [len(s) for s in imgs], list(indications)))
        return ["Lungs are clear." for _ in imgs]

    pairs, drops = generate(("mimic_cxr", root), generator, out_pairs=tmp_path / "p.parquet",
                            out_drops=tmp_path / "d.csv", use_indication=True, batch_size=4, num_workers=2)
    assert seen == [(2, [2, 1], ["Cough.", None])]
    assert pairs["sample_id"].tolist() == ["s50000001", "s50000003"]
    assert list(pd.read_parquet(tmp_path / "p.parquet").columns) == list(PAIRS_COLUMNS)
    assert drops["reason"].tolist() == ["image_error"] and "d2-a.dcm" in drops["detail"][0]


def test_vqa_gets_arrays(tmp_path):
    root = tiny_data.vqa_rad(tmp_path / "v", [(1, "a.jpg", "Is it normal?", "yes", "CLOSED", "test_para"),
                                                (2, "b.jpg", "Which side?", "left", "OPEN", "test_para")])
    tiny_data.write_png(root / "VQA_RAD Image Folder" / "b.jpg", tiny_data.gray8())  # a PNG named .jpg

    def answerer(imgs, questions):
        for (img,) in imgs:
            assert isinstance(img, np.ndarray) and img.shape == (tiny_data.ROWS, tiny_data.COLS)
            assert img.dtype == np.float32 and 0 <= img.min() and img.max() <= 1
        return ["yes" if q.startswith("Is") else "left side" for q in questions]

    adapter = make_adapter("vqa_rad", root, split="test")
    records, unmatched = run_generation(adapter.samples(), answerer, task="vqa", image_format="array",
                                        num_workers=0)
    assert [r["hypothesis"] for r in records] == ["yes", "left side"] and unmatched == []
    assert [r["context"] for r in records] == ["Is it normal?", "Which side?"]
