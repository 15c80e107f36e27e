"""The vqa metric: RadHarmony's normalisation, tokenized F1, token recall, closed accuracy, and its leaves
through the exact bootstrap."""

from __future__ import annotations

import math
import random

import numpy as np
import pandas as pd
import pytest

from radrank import metrics
from radrank.metrics import vqa
from radrank.stats import bootstrap, resample_indices


# --- the reference values of the issue ----------------------------------------------------------------------
def test_expected_values():
    assert vqa.tokenized_f1("left pleural effusion", "pleural effusion") == pytest.approx(0.8)
    assert vqa.tokenized_f1("The Yes.", "yes") == 1.0
    assert vqa.token_recall("pleural effusion", "left pleural effusion") == pytest.approx(2 / 3)
    assert vqa.extract_yes_no("No, there is no effusion.") == "no"


def test_normalisation():
    assert vqa.normalize_answer("The  LEFT-lower lobe, an X-ray!") == ["left", "lower", "lobe", "x", "ray"]
    assert vqa.normalize_answer("a an the A The") == []
    assert vqa.normalize_answer("T2-weighted 3.5 cm") == ["t2", "weighted", "3", "5", "cm"]
    assert vqa.normalize_answer("naïve\tcafé\nthe") == ["na", "ve", "caf"]  # non-ASCII letters become spaces
    assert vqa.normalize_answer(3) == ["3"]


@pytest.mark.parametrize("pred, ref, f1", [
    ("", "", 1.0),
    ("the", "a", 1.0),  # both empty after normalisation
    ("", "yes", 0.0),
    ("yes", "", 0.0),
    ("!!!", "no", 0.0),
    ("lung lung", "lung", 2 * (1 / 2) * 1 / (1 / 2 + 1)),  # multiset: one "lung" matches
    ("lung", "lung lung", 2 * 1 * (1 / 2) / (1 + 1 / 2)),
    ("right lung", "left lung", 0.5),
    ("abc", "xyz", 0.0),
])
def test_tokenized_f1_edges(pred, ref, f1):
    assert vqa.tokenized_f1(pred, ref) == pytest.approx(f1)


def test_token_recall_edges():
    assert vqa.token_recall("anything", "") == 0.0
    assert vqa.token_recall("anything", "the") == 0.0
    assert vqa.token_recall("", "left lung") == 0.0
    assert vqa.token_recall("lung lung left", "left lung lung apex") == pytest.approx(3 / 4)


def test_yes_no():
    assert vqa.extract_yes_no("Yes.") == "yes"
    assert vqa.extract_yes_no("Yesterday it was there") is None
    assert vqa.extract_yes_no("I think so; no.") == "no"
    assert vqa.extract_yes_no("No/yes") == "no"
    assert vqa.extract_yes_no("") is None
    assert vqa.is_yes_no_answer("  Yes ")
    assert vqa.is_yes_no_answer("NO")
    assert not vqa.is_yes_no_answer("yes.")
    assert not vqa.is_yes_no_answer("no effusion")


# --- per-sample columns --------------------------------------------------------------------------------------
def _pairs(refs, hyps):
    return pd.DataFrame({"sample_id": [f"q{i}" for i in range(len(refs))], "reference": refs, "hypothesis": hyps})


def test_columns_and_subsets():
    pairs = _pairs(["yes", "No", "left pleural effusion", "none"],
                   ["Yes, there is.", "yes", "pleural effusion", "None."])
    out = metrics.score("vqa", pairs)
    assert list(out.columns) == ["sample_id", *vqa.COLUMNS]
    assert out["vqa_token_f1"].tolist() == pytest.approx([2 * (1 / 3) / (1 / 3 + 1), 0.0, 0.8, 1.0])
    acc = out["vqa_closed_accuracy"].tolist()
    assert acc[:2] == [1.0, 0.0] and all(math.isnan(v) for v in acc[2:])
    assert math.isnan(out["vqa_open_token_f1"][0]) and out["vqa_open_token_f1"][2] == pytest.approx(0.8)
    assert out["vqa_open_token_recall"][2:].tolist() == pytest.approx([2 / 3, 1.0])
    assert out["vqa_closed_token_f1"][:2].tolist() == out["vqa_token_f1"][:2].tolist()


def test_custom_closed_mask():
    pairs = _pairs(["left", "yes"], ["left side", "yes"])
    out = vqa.score_frame(pairs, closed=[True, False])
    assert out["vqa_closed_accuracy"][0] == 0.0  # RadHarmony: a closed non-yes/no reference is never matched
    assert out["vqa_open_token_f1"][1] == 1.0
    with pytest.raises(ValueError):
        vqa.score_texts(["a"], ["b"], closed=[True, False])


# --- against a naive implementation --------------------------------------------------------------------------
def _naive_tokens(s):
    return [t for t in "".join(c if ("a" <= c <= "z" or "0" <= c <= "9" or c == " ") else " "
                               for c in str(s).lower()).split() if t not in ("a", "an", "the")]


def _naive_overlap(p, r):
    left, common = list(r), 0
    for t in p:
        if t in left:
            left.remove(t)
            common += 1
    return common


def _naive_f1(pred, ref):
    p, r = _naive_tokens(pred), _naive_tokens(ref)
    if not p or not r:
        return float(p == r)
    c = _naive_overlap(p, r)
    return 0.0 if c == 0 else 2 * (c / len(p)) * (c / len(r)) / (c / len(p) + c / len(r))


def _naive_rows(refs, hyps):
    """RadHarmony's three rows computed the long way."""
    pairs = list(zip(refs, hyps))
    closed = [(r, h) for r, h in pairs if r.strip().lower() in ("yes", "no")]
    openq = [(r, h) for r, h in pairs if r.strip().lower() not in ("yes", "no")]

    def yes_no(h):
        return next((t for t in _naive_tokens(h) if t in ("yes", "no")), None)

    def mean(xs):
        return float(np.mean(xs)) if xs else math.nan

    return {
        "vqa_token_f1": mean([_naive_f1(h, r) for r, h in pairs]),
        "vqa_closed_accuracy": mean([yes_no(h) == r.strip().lower() for r, h in closed]),
        "vqa_closed_token_f1": mean([_naive_f1(h, r) for r, h in closed]),
        "vqa_open_token_f1": mean([_naive_f1(h, r) for r, h in openq]),
        "vqa_open_token_recall": mean([
            (_naive_overlap(_naive_tokens(h), _naive_tokens(r)) / len(_naive_tokens(r))) if _naive_tokens(r) else 0.0
            for r, h in openq]),
    }


_WORDS = ["yes", "no", "left", "right", "lung", "the", "a", "effusion", "pleural", "Yes.", "NO!", "mass", "t2",
          "x-ray", "", "lobe", "none"]


def _random_answers(n, seed):
    rng = random.Random(seed)
    refs, hyps = [], []
    for _ in range(n):
        refs.append(rng.choice(["yes", "no", " Yes ", "NO"]) if rng.random() < 0.4 else
                    " ".join(rng.choice(_WORDS) for _ in range(rng.randint(0, 4))))
        hyps.append(" ".join(rng.choice(_WORDS) for _ in range(rng.randint(0, 5))))
    return refs, hyps


def test_matches_naive_per_sample_and_leaves():
    refs, hyps = _random_answers(300, seed=3)
    out = vqa.score_frame(_pairs(refs, hyps))
    assert out["vqa_token_f1"].tolist() == pytest.approx([_naive_f1(h, r) for r, h in zip(refs, hyps)])
    result = bootstrap({"m": out}, vqa.METRIC.leaves, n_boot=0, seed=0, compare=False)
    estimates = dict(zip(result.summary["metric"], result.summary["estimate"]))
    naive = _naive_rows(refs, hyps)
    for leaf, value in naive.items():
        assert estimates[leaf] == pytest.approx(value, abs=1e-12)


def test_bootstrap_equals_naive_recompute():
    # Few closed questions, so some resamples hold none: that leaf must be NaN there, as a recompute gives.
    refs, hyps = _random_answers(12, seed=11)
    refs[:12] = ["yes"] + [r if r.strip().lower() not in ("yes", "no") else "left lung" for r in refs[1:12]]
    scores = vqa.score_frame(_pairs(refs, hyps))
    n_boot, seed = 200, 7
    result = bootstrap({"m": scores}, vqa.METRIC.leaves, n_boot=n_boot, seed=seed, compare=False)
    reps = result.replicates.pivot(index="bootstrap", columns="metric", values="value")
    idx = resample_indices(len(refs), n_boot, seed)  # cases are the sorted sample ids: q0, q1, q10, q11, q2 ...
    cases = result.cases
    pos = {sid: i for i, sid in enumerate(scores["sample_id"])}
    saw_nan = False
    for b in range(n_boot):
        chosen = [pos[cases[k]] for k in idx[b]]
        naive = _naive_rows([refs[i] for i in chosen], [hyps[i] for i in chosen])
        for leaf, value in naive.items():
            got = reps.loc[b, leaf]
            if math.isnan(value):
                saw_nan = True
                assert math.isnan(got)
            else:
                assert got == pytest.approx(value, abs=1e-12)
    assert saw_nan


def test_empty_subsets_are_nan():
    out = vqa.score_frame(_pairs(["left lung", "mass"], ["left", "mass"]))
    result = bootstrap({"m": out}, vqa.METRIC.leaves, n_boot=0, compare=False)
    est = dict(zip(result.summary["metric"], result.summary["estimate"]))
    assert math.isnan(est["vqa_closed_accuracy"]) and math.isnan(est["vqa_closed_token_f1"])
    assert est["vqa_open_token_f1"] == pytest.approx((2 / 3 + 1) / 2)


def test_result_rows_layout():
    wide = pd.DataFrame({"label": "overall", "fold": -1, "seed": -1, "bootstrap": [-1, 0],
                         **{c: [0.1 * (i + 1), 0.2 * (i + 1)] for i, c in enumerate(vqa.COLUMNS)}})
    rows = vqa.result_rows(wide)
    assert rows["label"].tolist() == ["overall", "closed", "open"] * 2
    assert rows["bootstrap"].tolist() == [-1, -1, -1, 0, 0, 0]
    assert list(rows.columns) == ["label", "fold", "seed", "bootstrap", "token_f1", "accuracy", "token_recall"]
    closed = rows[(rows["label"] == "closed") & (rows["bootstrap"] == -1)].iloc[0]
    assert closed["accuracy"] == pytest.approx(0.2) and closed["token_f1"] == pytest.approx(0.3)
    assert math.isnan(closed["token_recall"])


def test_registered():
    spec = metrics.get("vqa")
    assert spec.family == "core" and [leaf.name for leaf in spec.leaves] == list(vqa.COLUMNS)
    assert set(vqa.RESULT_ROWS) == set(vqa.COLUMNS)
