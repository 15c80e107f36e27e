"""Tiny images and dataset folders in each published format, written by the tests.

Images are small and deliberately not square, with one marked pixel, so that a
transposed or flipped load is caught.
"""

from __future__ import annotations

import csv
import json
import zipfile
from pathlib import Path

import numpy as np

ROWS, COLS = 5, 8  # portrait would hide nothing: rows != columns catches transposes


def pattern(rows: int = ROWS, cols: int = COLS, high: int = 4000) -> np.ndarray:
    """A ramp along the columns, with row 0 / last column set to ``high``."""
    arr = np.tile(np.linspace(0, high // 2, cols).astype(np.uint16), (rows, 1))
    arr[0, cols - 1] = high
    return arr


def write_dicom(path, arr: np.ndarray, *, photometric: str = "MONOCHROME2", window=None, rescale=None,
                voi_function: str | None = None, suffix_check: bool = True):
    """A minimal valid DICOM file (Secondary Capture, explicit VR little endian) holding ``arr``."""
    from pydicom.dataset import Dataset, FileMetaDataset
    from pydicom.uid import ExplicitVRLittleEndian, SecondaryCaptureImageStorage, generate_uid

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    meta = FileMetaDataset()
    meta.MediaStorageSOPClassUID = SecondaryCaptureImageStorage
    meta.MediaStorageSOPInstanceUID = generate_uid()
    meta.TransferSyntaxUID = ExplicitVRLittleEndian
    ds = Dataset()
    ds.file_meta = meta
    ds.SOPClassUID = meta.MediaStorageSOPClassUID
    ds.SOPInstanceUID = meta.MediaStorageSOPInstanceUID
    ds.Modality = "CR"
    ds.PatientID = "anon"
    ds.Rows, ds.Columns = arr.shape[:2]
    if arr.ndim == 3:
        ds.SamplesPerPixel = 3
        ds.PlanarConfiguration = 0
        ds.PhotometricInterpretation = "RGB"
        ds.BitsAllocated = ds.BitsStored = 8
        ds.HighBit = 7
        data = arr.astype(np.uint8)
    else:
        ds.SamplesPerPixel = 1
        ds.PhotometricInterpretation = photometric
        ds.BitsAllocated = ds.BitsStored = 16
        ds.HighBit = 15
        data = arr.astype(np.uint16)
    ds.PixelRepresentation = 0
    if window is not None:
        ds.WindowCenter, ds.WindowWidth = window
    if voi_function is not None:
        ds.VOILUTFunction = voi_function
    if rescale is not None:
        ds.RescaleSlope, ds.RescaleIntercept = rescale
    ds.PixelData = np.ascontiguousarray(data).tobytes()
    ds.save_as(path, enforce_file_format=True)
    return path


def write_png(path, arr: np.ndarray, mode: str | None = None):
    from PIL import Image

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    img = Image.fromarray(arr)
    if mode:
        img = img.convert(mode)
    img.save(path)
    return path


def write_csv(path, header, rows):
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
    return path


def gray8(value: int = 128) -> np.ndarray:
    arr = np.full((ROWS, COLS), value, np.uint8)
    arr[0, COLS - 1] = 255
    return arr


# --- MIMIC-CXR ------------------------------------------------------------------------------------------------
MIMIC_REPORTS = {
    "50000001": "FINAL REPORT\n INDICATION: Cough.\n\n FINDINGS: Lungs are clear.\n\n IMPRESSION: No acute process.\n",
    "50000002": "EXAMINATION: CHEST PA AND LAT\n\nFINDINGS: Small left effusion.\nIMPRESSION: Effusion.\n",
    "50000003": "IMPRESSION: Stable cardiomegaly.\n",
}


def mimic(root: Path, *, split_file: bool = True, reports: str = "txt") -> Path:
    """Three studies of two subjects; study 3 is in the test split."""
    files = root / "files"
    studies = [("10000001", "50000001", ["d1-a", "d1-b"], "train"), ("10000001", "50000002", ["d2-a"], "validate"),
               ("10000002", "50000003", ["d3-a"], "test")]
    split_rows, meta_rows = [], []
    for subject, study, dicoms, split in studies:
        folder = files / f"p{subject[:2]}" / f"p{subject}" / f"s{study}"
        for k, dicom in enumerate(dicoms):
            write_dicom(folder / f"{dicom}.dcm", pattern(), window=(1000, 2000))
            split_rows.append((dicom, study, subject, split))
            meta_rows.append((dicom, "LATERAL" if dicom.endswith("a") and len(dicoms) > 1 else "PA"))
        if reports == "txt":
            (folder.parent / f"s{study}.txt").write_text(MIMIC_REPORTS[study])
    if reports == "csv":
        write_csv(root / "reports.csv", ["study_id", "report"], [(f"s{s}", t) for s, t in MIMIC_REPORTS.items()])
    if split_file:
        write_csv(root / "mimic-cxr-2.0.0-split.csv", ["dicom_id", "study_id", "subject_id", "split"], split_rows)
        write_csv(root / "mimic-cxr-2.0.0-metadata.csv", ["dicom_id", "ViewPosition"], meta_rows)
    return root


# --- IU-Xray --------------------------------------------------------------------------------------------------
IU = [
    # uid, indication, comparison, findings, impression, images [(id, projection)]
    ("1", "Chest pain", "None.", "The cardiac silhouette is normal. Lungs are clear.", "Normal chest.",
     [("CXR1_1_IM-0001-4001", "Lateral"), ("CXR1_1_IM-0001-3001", "Frontal")]),
    ("2", "", "", "", "No active disease.", [("CXR2_IM-0652-1001", "Frontal")]),
    ("3", "XXXX-year-old male, dyspnea", "", "Low lung volumes.", "", []),
]


def iu_kaggle(root: Path) -> Path:
    write_csv(root / "indiana_reports.csv",
              ["uid", "MeSH", "Problems", "image", "indication", "comparison", "findings", "impression"],
              [(u, "normal", "normal", "Xray Chest PA and Lateral", ind, comp, fin, imp)
               for u, ind, comp, fin, imp, _ in IU])
    proj = []
    for u, *_, images in IU:
        for image_id, projection in images:
            name = f"{u}_{image_id.split('_', 1)[-1]}.dcm.png"
            write_png(root / "images" / "images_normalized" / name, gray8())
            proj.append((u, name, projection))
    write_csv(root / "indiana_projections.csv", ["uid", "filename", "projection"], proj)
    return root


def iu_openi(root: Path) -> Path:
    folder = root / "ecgen-radiology"
    folder.mkdir(parents=True, exist_ok=True)
    for u, ind, comp, fin, imp, images in IU:
        texts = "".join(f'<AbstractText Label="{label}">{text}</AbstractText>' for label, text in
                        (("COMPARISON", comp), ("INDICATION", ind), ("FINDINGS", fin), ("IMPRESSION", imp)))
        # OpenI lists the lateral first for report 1: the XML order is kept.
        imgs = "".join(f'<parentImage id="{i}"><url>/hadoop/storage/radiology/extract/{i}.jpg</url></parentImage>'
                       for i, _ in images)
        (folder / f"{u}.xml").write_text(
            f'<?xml version="1.0" encoding="utf-8"?><eCitation><meta type="rr"/><uId id="CXR{u}"/>'
            f'<MedlineCitation><Article><Abstract>{texts}</Abstract></Article></MedlineCitation>{imgs}</eCitation>')
        for i, _ in images:
            write_png(root / "NLMCXR_png" / f"{i}.png", gray8())
    return root


# --- CheXpert-Plus ----------------------------------------------------------------------------------------------
def chexpert_plus(root: Path, *, png: bool = False) -> Path:
    header = ["path_to_image", "path_to_dcm", "frontal_lateral", "ap_pa", "deid_patient_id",
              "patient_report_date_order", "report", "section_narrative", "section_clinical_history", "section_history",
              "section_comparison", "section_technique", "section_procedure_comments", "section_findings",
              "section_impression", "section_end_of_impression", "section_summary", "section_accession_number", "age",
              "sex", "race", "split"]

    def row(path, history, hist2, comparison, findings, impression, age, sex, split):
        values = dict.fromkeys(header, "")
        values.update(path_to_image=path, section_clinical_history=history, section_history=hist2,
                      section_comparison=comparison, section_findings=findings, section_impression=impression,
                      age=age, sex=sex, split=split, deid_patient_id=path.split("/")[1])
        return [values[h] for h in header]

    rows = [
        row("train/patient00001/study1/view1_frontal.jpg", "Fever.", "", "None.", "Clear lungs.", "Normal.", "67",
            "Male", "train"),
        row("train/patient00001/study1/view2_lateral.jpg", "Fever.", "", "None.", "Clear lungs.", "Normal.", "67",
            "Male", "train"),
        row("train/patient00002/study1/view1_frontal.jpg", "nan", "Shortness of breath", "nan", "nan",
            "Bilateral effusions.", "nan", "Female", "train"),
        row("valid/patient00003/study2/view1_frontal.jpg", "", "", "", "", "", "40", "Female", "valid"),
    ]
    write_csv(root / "df_chexpert_plus_240401.csv", header, rows)
    for r in rows:
        rel = Path(r[0]).with_suffix(".png") if png else Path(r[0])
        (root / "PNG" / rel if png else root / rel).parent.mkdir(parents=True, exist_ok=True)
        write_png(root / "PNG" / rel if png else root / rel, gray8())
    return root


# --- ReXGradient ------------------------------------------------------------------------------------------------
def rexgradient(root: Path, *, form: str = "json") -> Path:
    entries = {
        "GRDN1_STUDYA": {
            "PatientID": "GRDN1", "StudyInstanceUid": "1.2.3", "PatientSex": "F", "PatientAge": "067Y",
            "Indication": "Cough", "Comparison": "None", "Findings": "Lungs clear.", "Impression": "Normal.",
            "ImagePath": ["../deid_png/GRDN1/STUDYA/a.png", "../deid_png/GRDN1/STUDYA/b.png"],
            "ImageViewPosition": ["PA", "LATERAL"],
        },
        "GRDN2_STUDYB": {
            "PatientID": "GRDN2", "StudyInstanceUid": "1.2.4", "PatientSex": "M", "PatientAge": "050Y",
            "Indication": None, "Comparison": None, "Findings": None, "Impression": "Cardiomegaly.",
            "ImagePath": ["../deid_png/GRDN2/STUDYB/a.png"], "ImageViewPosition": ["AP"],
        },
    }
    for e in entries.values():
        for p in e["ImagePath"]:
            write_png((root / "metadata" / p).resolve(), gray8())
    (root / "metadata").mkdir(parents=True, exist_ok=True)
    if form == "json":
        (root / "metadata" / "test_metadata_view_position.json").write_text(json.dumps(entries))
    else:
        header = ["id", "PatientID", "StudyInstanceUid", "PatientSex", "PatientAge", "Indication", "Comparison",
                  "Findings", "Impression", "ImagePath", "ImageViewPosition"]
        write_csv(root / "metadata" / "test_metadata.csv", header,
                  [[k] + ["" if e[h] is None else (str(e[h]) if isinstance(e[h], list) else e[h]) for h in header[1:]]
                   for k, e in entries.items()])
    return root


# --- VQA-RAD / SLAKE ----------------------------------------------------------------------------------------------
def vqa_rad(root: Path, records) -> Path:
    """``records``: (qid, image_name, question, answer, answer_type, phrase_type)."""
    folder = root / "VQA_RAD Image Folder"
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for qid, image, q, a, atype, phrase in records:
        out.append({"qid": qid, "image_name": image, "image_case_url": "https://medpix/x", "image_organ": "CHEST",
                    "answer": a, "answer_type": atype, "question_type": "PRES", "question": q,
                    "question_frame": "Is there x?", "phrase_type": phrase, "qid_linked_id": f"link{qid}"})
        if not (folder / image).exists() and "/" not in image and ".." not in image:
            (folder / image).write_bytes(_jpeg_bytes())
    (root / "VQA_RAD Dataset Public.json").write_text(json.dumps(out))
    return root


def _jpeg_bytes() -> bytes:
    import io

    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(gray8()).save(buf, format="JPEG", quality=95)
    return buf.getvalue()


def slake(root: Path) -> Path:
    def rec(qid, img, q, a, atype, lang):
        return {"img_id": int(img.split("/")[0][5:]), "img_name": img, "question": q, "answer": a,
                "q_lang": lang, "location": "Lung", "modality": "X-Ray", "answer_type": atype,
                "base_type": "vqa", "content_type": "Abnormality", "triple": ["vhead", "_", "_"], "qid": qid}

    files = {
        "train": [rec(1, "xmlab1/source.jpg", "Is the lung healthy?", "No", "CLOSED", "en"),
                  rec(2, "xmlab1/source.jpg", "肺部健康吗?", "否", "CLOSED", "zh")],
        "validate": [rec(3, "xmlab2/source.jpg", "Where is the abnormality?", "Left Lung", "OPEN", "en")],
        "test": [rec(1, "xmlab2/source.jpg", "What modality is used?", "X-Ray", "OPEN", "en"),
                 rec(4, "xmlab2/source.jpg", "这是什么?", "X光", "OPEN", "zh")],
    }
    for split, recs in files.items():
        (root / f"{split}.json").parent.mkdir(parents=True, exist_ok=True)
        (root / f"{split}.json").write_text(json.dumps(recs, ensure_ascii=False))
        for r in recs:
            write_png(root / "imgs" / r["img_name"], gray8())
    return root


# --- MIMIC-Ext-CXR-QBA ------------------------------------------------------------------------------------------
def qba(root: Path, image_root: Path, *, qa: str = "zip", index: bool = True) -> Path:
    import pandas as pd

    questions = pd.DataFrame({
        "patient_id": ["p10000001", "p10000001", "p10000002"],
        "study_id": ["s50000001", "s50000001", "s50000003"],
        "question_id": ["q02", "q01", "q01"],
        "question.question_type": ["is_abnormal", "describe", "is_abnormal"],
        "question.quality.rating": ["A", "B", "A"],
        "split": ["train", "train", "test"],
    })
    q_images = pd.DataFrame({
        "patient_id": ["p10000001", "p10000001", "p10000001", "p10000002"],
        "study_id": ["s50000001", "s50000001", "s50000001", "s50000003"],
        "question_id": ["q02", "q02", "q01", "q01"],
        "image_id": ["d1-b", "d1-a", "d1-a", "d3-a"],
    })
    meta = root / "metadata"
    meta.mkdir(parents=True, exist_ok=True)
    keys = ["patient_id", "study_id", "question_id"]
    (questions.set_index(keys) if index else questions).to_parquet(meta / "question_metadata.parquet")
    q_images.to_parquet(meta / "question_image_metadata.parquet", index=False)
    docs = {
        "qa/p10/p10000001/s50000001.qa.json": {"questions": [
            {"question_id": "q01", "question": "Describe the lungs.", "answers": [{"text": "Lungs are clear."},
                                                                               {"text": "No effusion."}]},
            {"question_id": "q02", "question": "Is there an abnormality?", "answers": [{"text": "No"}]}]},
        # study 3's file is missing: its question has no text
    }
    if qa == "zip":
        with zipfile.ZipFile(root / "qa.zip", "w") as z:
            for name, doc in docs.items():
                z.writestr(name, json.dumps(doc))
    else:
        for name, doc in docs.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(json.dumps(doc))
    for patient, study, image in (("p10000001", "s50000001", "d1-a"), ("p10000001", "s50000001", "d1-b"),
                                  ("p10000002", "s50000003", "d3-a")):
        write_dicom(image_root / patient[:3] / patient / study / f"{image}.dcm", pattern())
    return root
