"""Write the bundled example: fictional chest X-ray studies and three fictional models.

Every sentence here is written for radrank; no real report text is used. Run
`python example/make_example.py` to regenerate the files (deterministic).

* demo_cxr: 48 studies in ReXrank submission JSON, three models of clearly
  different quality (careful > hasty > template).
* demo_clinic: 40 studies as ReXrank-style CSV pairs (a ground-truth CSV and
  one prediction CSV per model).

A few entries exercise the policies: a study with no findings section (dropped
from the findings split), a null prediction (scored as an empty report) and a
prediction CSV that misses one study (listed as missing_prediction).
"""

from __future__ import annotations

import csv
import json
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent

ABNORMAL = [
    ("There is a small {side} pleural effusion.", "Small {side} pleural effusion.",
     "A trace {side} effusion is seen."),
    ("Patchy opacity in the {side} lower lobe may reflect pneumonia.", "{Side} lower lobe pneumonia is possible.",
     "Hazy {side} basilar opacity, infection not excluded."),
    ("The heart is mildly enlarged.", "Mild cardiomegaly.", "Borderline enlargement of the cardiac silhouette."),
    ("Linear atelectasis is present at the {side} base.", "{Side} basilar atelectasis.",
     "Streaky {side} basal atelectasis."),
    ("A {side} apical pneumothorax measures about 1 cm.", "Small {side} pneumothorax.",
     "Thin {side} apical pneumothorax."),
    ("Interstitial markings are increased, in keeping with mild edema.", "Mild pulmonary edema.",
     "Mild interstitial edema pattern."),
    ("A right internal jugular catheter ends in the lower superior vena cava.", "Central line in good position.",
     "Right neck line tip projects over the caval region."),
    ("Degenerative changes are noted in the thoracic spine.", "Thoracic spondylosis.",
     "Mild spinal degenerative change."),
]
NORMAL = [
    "The lungs are clear.", "No pleural effusion or pneumothorax.", "The cardiomediastinal silhouette is normal.",
    "No focal consolidation.", "The osseous structures are unremarkable.", "Hila are normal in size.",
]
TEMPLATE = "The lungs are clear. No pleural effusion or pneumothorax. The heart size is normal."
INDICATIONS = ["Shortness of breath.", "Cough and fever.", "Chest pain.", "Follow-up of effusion.", "Pre-operative.",
               "Line placement."]
MODELS = {"careful": 0.9, "hasty": 0.5, "template": 0.0}


def study(rng: random.Random):
    findings = rng.sample(range(len(ABNORMAL)), k=rng.choice([0, 1, 1, 2, 3]))
    sides = {i: rng.choice(["left", "right"]) for i in findings}
    normals = rng.sample(NORMAL, k=3)
    return findings, sides, normals


def render(findings, sides, normals, variant: int) -> tuple[str, str]:
    body = [ABNORMAL[i][variant if variant != 1 else 2].format(side=sides[i], Side=sides[i].capitalize())
            for i in findings]
    body += normals
    impression = " ".join(ABNORMAL[i][1].format(side=sides[i], Side=sides[i].capitalize()) for i in findings)
    return " ".join(body), impression or "No acute cardiopulmonary process."


def predict(rng: random.Random, skill: float, findings, sides, normals) -> str:
    if skill == 0.0:
        return TEMPLATE
    kept = [i for i in findings if rng.random() < skill]
    if rng.random() > skill:  # an occasional false finding
        kept.append(rng.randrange(len(ABNORMAL)))
        sides.setdefault(kept[-1], rng.choice(["left", "right"]))
    kept = sorted(set(kept))
    body, impression = render(kept, sides, rng.sample(normals, k=max(1, round(len(normals) * skill))), 1)
    return f"{body} {impression}" if rng.random() < 0.3 else body


def main():
    rng = random.Random(20261130)
    # demo_cxr: ReXrank JSON
    studies = {}
    for k in range(48):
        case = f"demo-{k:04d}"
        findings, sides, normals = study(rng)
        ref_f, ref_i = render(findings, sides, normals, 0)
        age = rng.randint(21, 94)
        studies[case] = {"findings": ref_f, "impression": ref_i, "state": (findings, sides, normals),
                         "context": f"Age:{age}.0.Gender:{rng.choice('FM')}.Indication:{rng.choice(INDICATIONS)}"
                                    f"Comparison: {rng.choice(['None.', 'Prior study available.'])}"}
    studies["demo-0007"]["findings"] = None  # impression-only study: dropped from the findings split
    out = HERE / "demo_cxr"
    out.mkdir(exist_ok=True)
    for model, skill in MODELS.items():
        mrng = random.Random(f"{model}-json")
        sub = {}
        for case, s in studies.items():
            findings, sides, normals = s["state"]
            pred = predict(mrng, skill, findings, dict(sides), normals)
            if model == "hasty" and case == "demo-0011":
                pred = None  # a silent prediction
            sub[case] = {"context": s["context"], "section_findings": s["findings"],
                         "section_impression": s["impression"], "model_prediction": pred,
                         "image_path": [f"images/{case}/frontal.png"]}
        (out / f"{model}.json").write_text(json.dumps(sub, indent=1) + "\n", encoding="utf-8")
    # the dataset's canonical references (config references.files): every submission is checked against them
    truth = {case: {"context": s["context"], "section_findings": s["findings"], "section_impression": s["impression"],
                    "image_path": [f"images/{case}/frontal.png"]} for case, s in studies.items()}
    (out / "ground_truth.json").write_text(json.dumps(truth, indent=1) + "\n", encoding="utf-8")

    # demo_clinic: CSV pairs
    out = HERE / "demo_clinic"
    out.mkdir(exist_ok=True)
    rows = []
    for k in range(40):
        findings, sides, normals = study(rng)
        ref_f, ref_i = render(findings, sides, normals, 0)
        rows.append((k, f"clinic-{k:03d}", f"FINDINGS: {ref_f}\nIMPRESSION: {ref_i}", (findings, sides, normals)))
    with open(out / "ground_truth.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["study_id", "case_id", "report"])
        w.writerows(r[:3] for r in rows)
    for model, skill in MODELS.items():
        mrng = random.Random(f"{model}-csv")
        with open(out / f"{model}.csv", "w", newline="", encoding="utf-8") as f:
            w = csv.writer(f)
            w.writerow(["study_id", "case_id", "report"])
            for study_id, case, _, state in rows:
                if model == "template" and study_id == 39:
                    continue  # one study without a prediction
                findings, sides, normals = state
                w.writerow([study_id, case, predict(mrng, skill, findings, dict(sides), normals)])


if __name__ == "__main__":
    main()
