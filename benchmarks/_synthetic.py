"""Seeded synthetic chest X-ray report pairs, shared by the benchmarks.

Reports are 20-90 words built from radiology-like sentences. A leaderboard is
simulated: each case has one reference report, and every "model" writes its own
hypothesis for it (a noisy edit of the reference: sentences dropped, replaced,
reordered, words substituted or negated), so the same reference text recurs once
per model, as in ReXrank's per-model pair tables.
"""

from __future__ import annotations

import random

FINDINGS = [
    "The lungs are clear without focal consolidation.",
    "No pleural effusion or pneumothorax is seen.",
    "The cardiomediastinal silhouette is within normal limits.",
    "Heart size is mildly enlarged.",
    "There is mild pulmonary vascular congestion.",
    "Small bilateral pleural effusions with bibasilar atelectasis.",
    "Patchy opacity in the right lower lobe may reflect pneumonia.",
    "Left basilar opacity likely represents atelectasis.",
    "Endotracheal tube terminates 4 cm above the carina.",
    "Nasogastric tube courses below the diaphragm, tip not visualized.",
    "Right internal jugular central venous catheter ends in the mid SVC.",
    "Median sternotomy wires and mediastinal clips are intact.",
    "There is moderate cardiomegaly, unchanged from the prior study.",
    "No acute osseous abnormality is identified.",
    "Degenerative changes are noted in the thoracic spine.",
    "Hilar contours are normal.",
    "Interval improvement of the left lower lobe consolidation.",
    "Mild interstitial edema has slightly worsened.",
    "Calcified granuloma in the left upper lobe is stable.",
    "A left-sided pacemaker with leads in the right atrium and ventricle.",
    "Aortic knob calcification is present.",
    "Lung volumes are low, with crowding of the bronchovascular markings.",
    "Subsegmental atelectasis at the right base.",
    "There is a small left apical pneumothorax.",
    "Hyperinflation of the lungs consistent with emphysema.",
    "Elevation of the right hemidiaphragm is again seen.",
    "Free air beneath the diaphragm is not seen.",
    "Multiple rib fractures on the left are healing.",
]

IMPRESSIONS = [
    "No acute cardiopulmonary process.",
    "Findings concerning for pneumonia in the right lower lobe.",
    "Mild pulmonary edema.",
    "Stable cardiomegaly without acute process.",
    "Support devices in standard position.",
    "Small bilateral effusions, slightly increased.",
    "Resolving left lower lobe pneumonia.",
    "Small left pneumothorax; recommend follow-up radiograph.",
    "No radiographic evidence of acute disease.",
]

SUBSTITUTES = {
    "mild": ["moderate", "minimal", "severe"],
    "small": ["moderate", "large", "trace"],
    "left": ["right", "bilateral"],
    "right": ["left", "bilateral"],
    "clear": ["hyperinflated", "well expanded"],
    "stable": ["unchanged", "increased", "decreased"],
    "normal": ["enlarged", "unremarkable"],
    "pneumonia": ["aspiration", "infection"],
    "atelectasis": ["scarring", "consolidation"],
    "effusion": ["effusions", "thickening"],
    "lower": ["upper", "middle"],
    "is": ["appears", "remains"],
}

FILLERS = ["Again,", "Comparison is made to prior.", "As before,", "PA and lateral views.", "Portable AP view."]


def _report(rng: random.Random) -> str:
    while True:
        sentences = rng.sample(FINDINGS, rng.randint(3, 8))
        text = "Findings: " + " ".join(sentences) + " Impression: " + rng.choice(IMPRESSIONS)
        if 20 <= len(text.split()) <= 90:
            return text


def _edit(reference: str, rng: random.Random, quality: float) -> str:
    """A model's hypothesis for ``reference``; higher ``quality`` keeps more of it."""
    body, _, impression = reference.partition(" Impression: ")
    sentences = [s + "." for s in body.removeprefix("Findings: ").split(". ") if s]
    sentences = [s.replace("..", ".") for s in sentences]
    kept = [s for s in sentences if rng.random() < quality] or sentences[:1]
    for _ in range(rng.randint(0, 3)):
        kept.insert(rng.randint(0, len(kept)), rng.choice(FINDINGS))
    if rng.random() < 0.3:
        rng.shuffle(kept)
    words = " ".join(kept).split()
    for i, w in enumerate(words):
        alternatives = SUBSTITUTES.get(w.lower())
        if alternatives and rng.random() > quality:
            words[i] = rng.choice(alternatives)
    if rng.random() < 0.2:
        words[:0] = rng.choice(FILLERS).split()
    impression = impression if rng.random() < quality else rng.choice(IMPRESSIONS)
    words = " ".join(words).split() + ["Impression:"] + impression.split()
    while len(words) < 20:  # keep every report at 20-90 words
        words[:0] = rng.choice(FINDINGS).split()
    words = words[-90:] if rng.random() < 0.5 else words[:90]
    text = " ".join(words)
    if rng.random() < 0.05:
        text = text.replace(". ", ".\n")  # some reports keep their line breaks
    return text


def leaderboard(n_pairs: int, n_models: int = 4, seed: int = 0) -> dict:
    """{model: DataFrame(sample_id, reference, hypothesis)}, about ``n_pairs`` pairs in all.

    Every model answers the same ``ceil(n_pairs / n_models)`` cases, so each
    reference text appears once per model.
    """
    import pandas as pd

    rng = random.Random(seed)
    n_cases = -(-n_pairs // n_models)
    references = [_report(rng) for _ in range(n_cases)]
    qualities = [0.85 - 0.15 * m for m in range(n_models)]
    out = {}
    for m in range(n_models):
        hyps = [_edit(r, rng, qualities[m]) for r in references]
        out[f"model_{m + 1}"] = pd.DataFrame({
            "sample_id": [f"case{i:05d}" for i in range(n_cases)],
            "reference": references,
            "hypothesis": hyps,
        })
    return out


def pairs_table(n_pairs: int, n_models: int = 4, seed: int = 0):
    """All models' pairs in one frame (model, sample_id, reference, hypothesis), exactly ``n_pairs`` rows."""
    import pandas as pd

    boards = leaderboard(n_pairs, n_models, seed)
    frame = pd.concat([df.assign(model=m) for m, df in boards.items()], ignore_index=True)
    frame = frame.iloc[:n_pairs].reset_index(drop=True)
    frame["sample_id"] = frame["model"] + "/" + frame["sample_id"]
    return frame[["model", "sample_id", "reference", "hypothesis"]]
