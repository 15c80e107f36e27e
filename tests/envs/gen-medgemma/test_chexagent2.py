"""CheXagent-2's recipe with stand-ins for its remote tokenizer and model (fakes.py): image paths, the
region recipe, indication plumbing, left padding, VQA, and the loader's allow-list gate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from radrank import backbones
from radrank.backbones import chexagent2
from radrank.errors import ConfigError

import fakes
from _strict import reference


def _gen(task="report", **settings):
    s = chexagent2.BACKBONE.settings({"device": "cpu", **settings})
    tok = fakes.CheXagentTokenizer()
    model = fakes.EchoModel(tok)
    rec = chexagent2.CheXagent2(s, task, model=model, tokenizer=tok, device="cpu", dtype=None)
    return rec.callable(), tok, model


def test_reads_image_files_pil_written_raster_as_is(tmp_path, cxr_images):
    png = tmp_path / "given.png"
    cxr_images[0][0].save(png)
    gen, tok, model = _gen(recipe="single", batch_size=8, image_dir=str(tmp_path / "work"))
    out = gen([[str(png)], [cxr_images[1][0], cxr_images[1][1]]])
    assert out == ["re:X-ray.", "re:X-ray."]
    assert tok.seen_paths[0] == str(png.resolve())  # a raster path goes in as it is
    written = tok.seen_paths[1:]
    assert len(written) == 2 and all(p.endswith(".png") and str(tmp_path / "work") in p for p in written)
    assert not any(Path(p).exists() for p in written)  # temporary PNGs removed after the batch
    assert "<img>" + str(png.resolve()) + "</img>" in gen.rendered[0]
    with pytest.raises(FileNotFoundError):
        gen([[str(tmp_path / "missing.png")]])


def test_dicom_paths_are_windowed_to_png(tmp_path):
    reference("pydicom", "gen-medgemma installs radrank.images' DICOM stack")
    reference("monai", "gen-medgemma installs radrank.images' DICOM stack")
    dcm = tmp_path / "study.dcm"
    _write_dicom(dcm)
    gen, tok, model = _gen(recipe="single", image_dir=str(tmp_path / "work"))
    assert gen([[str(dcm)]]) == ["re:X-ray."]
    assert len(tok.seen_paths) == 1 and tok.seen_paths[0].endswith(".png")
    assert not Path(tok.seen_paths[0]).exists()


def test_region_recipe_concatenates_regions_in_order(cxr_images):
    gen, tok, model = _gen(batch_size=2)
    out = gen(cxr_images[:3])
    regions = chexagent2.BACKBONE.settings({}).regions
    expected = " ".join("re:" + r.split()[-1] + "." for r in regions)  # "... with respect to: {region}."
    assert out == [expected] * 3
    assert len(model.calls) == 2 * len(regions)  # two batches, one call per region
    assert gen.stats["batches"] == 2
    ids, mask = model.calls[0]["input_ids"], model.calls[0]["attention_mask"]
    assert ids.shape[0] == 2 and (mask == 0).any()  # different prompt lengths: left padding used
    assert (ids[mask == 0] == tok.eos_token_id).all()  # no pad token: EOS pads


def test_indication_prefix_only_when_asked(cxr_images):
    gen, tok, model = _gen(recipe="single", use_indication=True)
    gen(cxr_images[:2], ["Cough.", None])
    assert gen.last_prompts[0] == ["Indication: Cough.\n" + chexagent2.BACKBONE.settings({}).report_prompt]
    assert gen.last_prompts[1] == [chexagent2.BACKBONE.settings({}).report_prompt]
    off, _, _ = _gen(recipe="single")
    off(cxr_images[:2], ["Cough.", None])
    assert not any("Cough" in r for r in off.rendered)


def test_impression_step_and_vqa(cxr_images):
    gen, tok, model = _gen(recipe="single", impression_prompt="Summarise as an impression: {findings}")
    out = gen(cxr_images[:1])
    assert out == ["FINDINGS: re:X-ray.\n\nIMPRESSION: re:re:X-ray."]
    ans, tok, model = _gen(task="vqa")
    assert ans(cxr_images[:2], ["Is there an effusion?", "Where is the tube?"]) == ["re:effusion?", "re:tube?"]
    assert len(model.calls) == 1
    with pytest.raises(ConfigError, match=r"backbone_settings\.chexagent2\.recipe: 'abcde' is not allowed; expected "
                                          r"'regions' or 'single'"):
        backbones.load("chexagent2", {"recipe": "abcde"})  # refused with the settings, before any weights


def test_loader_gates_remote_code_and_passes_trust(tmp_path, monkeypatch, cxr_images):
    model_dir = tmp_path / "chexagent"
    model_dir.mkdir()
    (model_dir / "config.json").write_text(json.dumps({"model_type": "chexagent"}))
    seen = {}

    def fake_components(path, trust, device, dtype):
        seen.update(path=path, trust=trust, device=device)
        tok = fakes.CheXagentTokenizer()
        return tok, fakes.EchoModel(tok)

    monkeypatch.setattr(chexagent2, "_load_components", fake_components)
    with pytest.raises(ConfigError, match="trust_remote_code"):
        backbones.load("chexagent2", {"model": str(model_dir)}, ["StanfordAIMI/CheXagent-2-3b"])
    gen = backbones.load("chexagent2", {"model": str(model_dir), "device": "cpu", "recipe": "single"},
                         [str(model_dir)])
    assert seen == {"path": model_dir, "trust": True, "device": "cpu"}
    assert gen(cxr_images[:1]) == ["re:X-ray."]
    assert backbones.get("chexagent2").inputs == "paths"


def _write_dicom(path):
    import numpy as np
    from pydicom.dataset import FileDataset, FileMetaDataset
    from pydicom.uid import ExplicitVRLittleEndian, generate_uid

    meta = FileMetaDataset()
    meta.MediaStorageSOPClassUID = "1.2.840.10008.5.1.4.1.1.1.1"
    meta.MediaStorageSOPInstanceUID = generate_uid()
    meta.TransferSyntaxUID = ExplicitVRLittleEndian
    ds = FileDataset(str(path), {}, file_meta=meta, preamble=b"\0" * 128)
    ds.SOPClassUID = meta.MediaStorageSOPClassUID
    ds.SOPInstanceUID = meta.MediaStorageSOPInstanceUID
    ds.Modality = "DX"
    ds.Rows, ds.Columns = 32, 24
    ds.SamplesPerPixel, ds.PhotometricInterpretation = 1, "MONOCHROME2"
    ds.BitsAllocated, ds.BitsStored, ds.HighBit, ds.PixelRepresentation = 16, 12, 11, 0
    ds.PixelData = (np.arange(32 * 24, dtype="uint16").reshape(32, 24) * 5).tobytes()
    ds.save_as(str(path), enforce_file_format=True)
