"""Meta-evaluation: readers, agreement measures and their intervals, bad input.

The agreement of BLEU-2 and ROUGE with the RadPref radiologists and on RadJudge is recomputed
here by an independent implementation straight from the vendored JSON (fast-bleu, rouge-score,
scipy's kendalltau, plain loops) and must equal what the stage computes to 1e-9."""

from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from _strict import reference as reference_package

from radrank import io, jobs, metaeval
from radrank.errors import InputError
from radrank.metaeval import agreement, readers
from radrank.metaeval.items import ItemSet, Target
from radrank.metrics.base import mean_leaf
from radrank.stats.bootstrap import resample_indices

fast_bleu = reference_package("fast_bleu")
rouge_scorer = reference_package("rouge_score.rouge_scorer")
kendalltau = reference_package("scipy.stats").kendalltau

REPO = Path(__file__).resolve().parents[1]
RADPREF = REPO / "resources/metaeval/radpref"
RADJUDGE = REPO / "resources/metaeval/radjudge/ranking_cases.json"
RADPREF_RATERS = [RADPREF / f"radiologist_annotations/user_{k}.json" for k in (1, 2, 3)]


# --- the independent implementation -------------------------------------------------------------


def _rexrank_tokens(text: str) -> list[str]:
    # ReXrank's BLEU tokens: lower case, "." split off, split on the space character.
    return [t for t in str(text).lower().replace(".", " .").split(" ") if t]


def independent_scores(pairs: list[tuple[str, str]]) -> dict[str, np.ndarray]:
    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True)
    out = {"bleu2": [], "rouge1": [], "rouge2": [], "rougeL": []}
    for reference, hypothesis in pairs:
        bleu = fast_bleu.BLEU([_rexrank_tokens(reference)], {"b": (0.5, 0.5)})
        out["bleu2"].append(bleu.get_score([_rexrank_tokens(hypothesis)])["b"][0])
        rouge = scorer.score(reference, hypothesis)
        for key in ("rouge1", "rouge2", "rougeL"):
            out[key].append(rouge[key].fmeasure)
    return {k: np.array(v) for k, v in out.items()}


def independent_radpref() -> dict:
    """{leaf: {"pairwise": (rate, n, ties), "tau": τ-b, "rater_tau": [...]}, "ceiling": ..., ...}."""
    cases = json.loads((RADPREF / "preference_data.json").read_text())
    users = [json.loads(p.read_text())["annotations"] for p in RADPREF_RATERS]
    texts, ratings = [], []
    for case in cases:
        for cand in ("C1", "C2"):
            texts.append((case["ground_truth_report"], case[f"{cand}_report"]))
            ratings.append([u[case["id"]][cand]["rating"] for u in users])
    ratings = np.array(ratings, dtype=float)
    mean = ratings.mean(axis=1)
    scores = independent_scores(texts)
    out = {}
    for leaf, values in scores.items():
        agree = n = ties = 0
        for k in range(len(cases)):
            h1, h2, m1, m2 = mean[2 * k], mean[2 * k + 1], values[2 * k], values[2 * k + 1]
            if h1 == h2:
                continue
            n += 1
            ties += m1 == m2
            agree += (m1 > m2) == (h1 > h2) and m1 != m2
        out[leaf] = {
            "pairwise": (agree / n, n, ties),
            "tau": kendalltau(values, mean).statistic,
            "rater_tau": [kendalltau(values, ratings[:, r]).statistic for r in range(3)],
        }
    loro = [kendalltau(ratings[:, r], np.delete(ratings, r, axis=1).mean(axis=1)).statistic for r in range(3)]
    out["ceiling_tau"], out["loro"] = float(np.mean(loro)), loro
    return out


def independent_radjudge(tolerance=0.01) -> dict:
    categories = json.loads(RADJUDGE.read_text())
    results = {}
    for category in categories:
        for test in category["tests"]:
            names = list(test["candidates"])
            scored = independent_scores([(test["ground_truth"], test["candidates"][c]["text"]) for c in names])
            expected = test["expected_ranking"]
            expected = [expected] if isinstance(expected, str) else expected
            for leaf, values in scored.items():
                by_name = dict(zip(names, values))
                ok = True
                for relation in expected:
                    if " > " in relation:
                        a, b = relation.split(" > ")
                        ok = ok and by_name[a] > by_name[b]
                    else:
                        a, b = relation.split(" = ")
                        ok = ok and abs(by_name[a] - by_name[b]) < tolerance
                results.setdefault(leaf, []).append((category["category"], ok))
    return results


# --- the stage's code path (the rules' jobs, without Snakemake) -----------------------------------


def run_stage(tmp_path: Path, name: str, reader: str, files: dict, options=None,
              metric_names=("bleu2", "bleu4", "rouge"), n_boot=200, seed=3) -> dict:
    out = tmp_path / name
    lists = tuple(k for k, v in files.items() if isinstance(v, list))
    jobs.MetaevalPairs(set_name=name, reader=reader, options=options or {},
                       files=tuple(k for k in files if k not in lists), file_lists=lists).run(
        jobs.Files(files), jobs.Files(pairs=out / "pairs.parquet", item_table=out / "items.parquet"))
    score_paths = []
    for metric in metric_names:
        score_paths.append(out / f"{metric}.parquet")
        jobs.ScoreGroup.of(metric, [metaeval.MODEL]).run(jobs.Files(pairs=[out / "pairs.parquet"]),
                                                         jobs.Files(scores=[score_paths[-1]]))
    jobs.MetaevalAgreement(set_name=name, metric_names=tuple(metric_names), n_boot=n_boot, seed=seed, level=0.95,
                           tie_tolerance=0.01).run(
        jobs.Files(item_table=out / "items.parquet", scores=score_paths),
        jobs.Files(scores=out / "scores.parquet", agreement=out / "agreement.csv",
                   comparisons=out / "metric_comparisons.csv"))
    return {"dir": out, "agreement": pd.read_csv(out / "agreement.csv"),
            "comparisons": pd.read_csv(out / "metric_comparisons.csv"),
            "scores": pd.read_parquet(out / "scores.parquet"),
            "pairs": pd.read_parquet(out / "pairs.parquet")}


def radpref_files():
    return {"data": str(RADPREF / "preference_data.json"), "raters": [str(p) for p in RADPREF_RATERS]}


@pytest.fixture(scope="module")
def radpref_run(tmp_path_factory):
    return run_stage(tmp_path_factory.mktemp("radpref"), "radpref", "radpref", radpref_files())


@pytest.fixture(scope="module")
def radjudge_run(tmp_path_factory):
    return run_stage(tmp_path_factory.mktemp("radjudge"), "radjudge", "radjudge", {"data": str(RADJUDGE)})


def row(table, metric, measure, group="all"):
    hit = table[(table["metric"] == metric) & (table["measure"] == measure) & (table["group"] == group)]
    assert len(hit) == 1, (metric, measure, group)
    return hit.iloc[0]


def assert_equal_independent_radpref(table):
    ref = independent_radpref()
    for leaf in ("bleu2", "rouge1", "rouge2", "rougeL"):
        rate, n, ties = ref[leaf]["pairwise"]
        got = row(table, leaf, "pairwise_agreement")
        assert got["estimate"] == pytest.approx(rate, abs=1e-9) and got["n"] == n and got["n_ties"] == ties
        got = row(table, leaf, "kendall_tau_b")
        assert got["estimate"] == pytest.approx(ref[leaf]["tau"], abs=1e-9) and got["n"] == 200
        assert got["human_ceiling"] == pytest.approx(ref["ceiling_tau"], abs=1e-9)
        for r, rater in enumerate(("user_1", "user_2", "user_3")):
            got = row(table, leaf, "kendall_tau_b", f"rater:{rater}")
            assert got["estimate"] == pytest.approx(ref[leaf]["rater_tau"][r], abs=1e-9)
            assert got["human_ceiling"] == pytest.approx(ref["loro"][r], abs=1e-9)


def assert_equal_independent_radjudge(table):
    ref = independent_radjudge()
    for leaf, outcomes in ref.items():
        got = row(table, leaf, "pass_rate")
        assert got["estimate"] == pytest.approx(np.mean([ok for _, ok in outcomes]), abs=1e-9) and got["n"] == 30
        for category in dict.fromkeys(c for c, _ in outcomes):
            got = row(table, leaf, "pass_rate", category)
            assert got["estimate"] == pytest.approx(np.mean([ok for c, ok in outcomes if c == category]), abs=1e-9)


# --- RadPref ---------------------------------------------------------------------------------------


def test_radpref_agreement_equals_independent_implementation(radpref_run):
    assert_equal_independent_radpref(radpref_run["agreement"])


def test_radpref_table_layout(radpref_run):
    table = radpref_run["agreement"]
    assert tuple(table.columns) == agreement.AGREEMENT_COLUMNS
    assert set(table["set"]) == {"radpref"}
    # the headline is the pairwise agreement, one row per per-report leaf
    assert sorted(table.loc[table["headline"], "metric"]) == ["bleu2", "rouge1", "rouge2", "rougeL"]
    assert set(table.loc[table["headline"], "measure"]) == {"pairwise_agreement"}
    # corpus BLEU-4 has no per-report value: listed as not applicable, not left out
    bleu4 = table[table["metric"] == "bleu4"]
    assert list(bleu4["measure"]) == ["not_applicable"] and bleu4["estimate"].isna().all()
    real = table[table["measure"] != "not_applicable"]
    assert ((real["ci_lower"] <= real["estimate"]) & (real["estimate"] <= real["ci_upper"])).all()
    # raters agree with each other better than any lexical metric agrees with them
    tau = real[(real["measure"] == "kendall_tau_b") & (real["group"] == "all")]
    assert (tau["human_ceiling"] > tau["ci_upper"]).all()


def test_radpref_pairs_carry_context_and_flow_through_scoring(radpref_run):
    pairs = radpref_run["pairs"]
    assert list(pairs.columns) == ["sample_id", "study_id", "reference", "hypothesis", "context", "age", "sex",
                                   "indication", "comparison"]
    assert len(pairs) == 200 and pairs["sample_id"].str.endswith((":C1", ":C2")).all()
    first = pairs.iloc[0]
    assert first["age"] == 72.0 and first["sex"] == "F" and first["comparison"] == "04/10/2017"
    assert first["indication"].startswith("Central line placement")
    assert pairs.loc[2, "age"] == pytest.approx(19 / 12)  # "019M"
    prov = io.read_provenance(radpref_run["dir"] / "bleu2.parquet")
    assert prov["pairs"]["dataset"] == "metaeval-radpref" and prov["pairs"]["split"] == "metaeval"
    per_item = radpref_run["scores"]
    assert {"sample_id", "case", "candidate", "rating", "rating.user_1", "bleu2", "rougeL"} <= set(per_item.columns)
    assert per_item["rating"].to_numpy() == pytest.approx(
        per_item[["rating.user_1", "rating.user_2", "rating.user_3"]].mean(axis=1).to_numpy())


def test_intervals_are_the_bootstrap_over_cases(radpref_run):
    """Percentile intervals equal a naive loop over the same seeded case resamples."""
    per_item = radpref_run["scores"]
    cases = pd.factorize(per_item["case"])[0]
    idx = resample_indices(cases.max() + 1, 200, 3)
    values, human = per_item["bleu2"].to_numpy(), per_item["rating"].to_numpy()
    taus, rates = [], []
    for draw in idx:
        items = np.concatenate([np.flatnonzero(cases == c) for c in draw])
        taus.append(kendalltau(values[items], human[items]).statistic)
        agree = n = 0
        for c in draw:
            i, j = np.flatnonzero(cases == c)
            if human[i] != human[j]:
                n += 1
                agree += (values[i] > values[j]) == (human[i] > human[j]) and values[i] != values[j]
        rates.append(agree / n)
    table = radpref_run["agreement"]
    for measure, reps in (("kendall_tau_b", taus), ("pairwise_agreement", rates)):
        got = row(table, "bleu2", measure)
        lo, hi = np.quantile(reps, [0.025, 0.975])
        assert (got["ci_lower"], got["ci_upper"]) == pytest.approx((lo, hi), abs=1e-12)
    comparison = radpref_run["comparisons"]
    hit = comparison[(comparison["measure"] == "kendall_tau_b") & (comparison["metric_a"] == "bleu2")
                     & (comparison["metric_b"] == "rougeL")].iloc[0]
    rouge_l = per_item["rougeL"].to_numpy()
    deltas = np.array(taus) - np.array([
        kendalltau(rouge_l[it], human[it]).statistic
        for it in (np.concatenate([np.flatnonzero(cases == c) for c in draw]) for draw in idx)])
    assert hit["delta"] == pytest.approx(row(table, "bleu2", "kendall_tau_b")["estimate"]
                                         - row(table, "rougeL", "kendall_tau_b")["estimate"], abs=1e-12)
    assert (hit["ci_lower"], hit["ci_upper"]) == pytest.approx(tuple(np.quantile(deltas, [0.025, 0.975])), abs=1e-12)
    assert hit["p_value"] == pytest.approx(min(1.0, 2 * min(np.mean(deltas <= 0), np.mean(deltas >= 0))))


# --- RadJudge --------------------------------------------------------------------------------------


def test_radjudge_pass_rates_equal_independent_implementation(radjudge_run):
    table = radjudge_run["agreement"]
    assert_equal_independent_radjudge(table)
    groups = set(table.loc[table["metric"] == "bleu2", "group"])
    assert len(groups) == 11 and "Paraphrase Robustness" in groups  # all + 10 categories
    assert set(table.loc[table["headline"], "group"]) == {"all"}


def test_radjudge_candidate_context_reaches_the_pairs(radjudge_run):
    pairs = radjudge_run["pairs"].set_index("sample_id")
    assert pairs.loc["2a:C1", "age"] == 25.0 and pairs.loc["2a:C2", "age"] == 82.0
    assert pairs.loc["2a:C2", "indication"] == "Routine preoperative evaluation"
    assert pairs.loc["2a:C1", "hypothesis"] == pairs.loc["2a:C2", "hypothesis"]
    assert len(pairs) == 66


def test_metric_ties_fail_a_strict_expectation():
    """Two identical candidates expected "C1 > C2": every metric ties, so the case fails and is counted."""
    items = pd.DataFrame({"sample_id": ["a:C1", "a:C2", "b:C1", "b:C2"], "case": ["a", "a", "b", "b"],
                          "candidate": ["C1", "C2", "C1", "C2"], "category": ["x", "x", "y", "y"],
                          "expected_ranking": ["C1 > C2", "C1 > C2", "C1 = C2", "C1 = C2"]})
    item_set = ItemSet("toy", "ranking", [], items, headline="pass_rate")
    scores = pd.DataFrame({"sample_id": items["sample_id"], "m": [0.5, 0.5, 0.300, 0.305]})
    _, table, _ = agreement.evaluate(item_set, scores, [mean_leaf("m", "M")], n_boot=0)
    assert row(table, "m", "pass_rate")["estimate"] == 0.5 and row(table, "m", "pass_rate")["n_ties"] == 1
    assert row(table, "m", "pass_rate", "x")["estimate"] == 0.0 and row(table, "m", "pass_rate", "y")["estimate"] == 1.0


def test_lower_is_better_metrics_and_error_counts_are_oriented():
    """A lower-is-better leaf equal to the error count agrees perfectly: τ-b = +1, pairwise 1."""
    items = pd.DataFrame({"sample_id": [f"s{i}:{c}" for i in range(4) for c in "AB"],
                          "case": [f"s{i}" for i in range(4) for _ in "AB"], "candidate": list("AB") * 4,
                          "category": None, "total_errors.r1": [0, 3, 1, 2, 5, 4, 2, 6.0],
                          "total_errors.r2": [1, 3, 1, 3, 4, 4, 2, 5.0]})
    target = Target("total_errors", "errors", ("r1", "r2"), higher_is_better=False)
    item_set = ItemSet("toy", "ratings", [], items, targets=(target,),
                                      headline="kendall_tau_b_total_errors", fitted_metrics=("radcliq",),
                                      fitted_note="fitted on ReXVal: not held-out")
    errors = items[["total_errors.r1", "total_errors.r2"]].mean(axis=1)
    scores = pd.DataFrame({"sample_id": items["sample_id"], "radcliq_v1": errors, "neg": -errors})
    leaves = [mean_leaf("radcliq_v1", "RadCliQ-v1", higher_is_better=False), mean_leaf("neg", "N")]
    _, table, comparisons = agreement.evaluate(item_set, scores, leaves, n_boot=50,
                                               metric_of_leaf={"radcliq_v1": "radcliq", "neg": "other"})
    for leaf in ("radcliq_v1", "neg"):
        assert row(table, leaf, "kendall_tau_b_total_errors")["estimate"] == pytest.approx(1.0)
        assert row(table, leaf, "pairwise_agreement_total_errors")["estimate"] == 1.0
    label = row(table, "radcliq_v1", "kendall_tau_b_total_errors")["label"]
    assert label == "RadCliQ-v1 (fitted on ReXVal: not held-out)"
    assert row(table, "neg", "kendall_tau_b_total_errors")["label"] == "N"
    assert row(table, "neg", "kendall_tau_b_total_errors")["headline"]
    assert (comparisons["delta"] == 0).all()


# --- ReXVal and user sets --------------------------------------------------------------------------


def write_rexval(folder: Path, *, drop_column=None, rows=None) -> Path:
    """Fictional files in ReXVal's layout (two studies)."""
    folder.mkdir(parents=True, exist_ok=True)
    studies = pd.DataFrame({"study_id": ["s100", "s200"], "gt_report": ["Small left effusion.", "No acute process."],
                            "radgraph": ["Small left effusion.", "No acute process."],
                            "bertscore": ["Left effusion.", "Clear lungs."],
                            "s_emb": ["Large right effusion.", "Right pneumothorax."],
                            "bleu": ["Pneumonia.", "Cardiomegaly and edema."]})
    ratings = pd.DataFrame(rows or [
        # study_number, candidate_type, rater_index, error_category, clinically_significant, num_errors
        (0, "bertscore", 0, 4, "False", 1), (0, "s_emb", 0, 3, "True", 2), (0, "bleu", 0, 1, "True", 2),
        (0, "bleu", 0, 2, "True", 1), (1, "bertscore", 0, 2, "False", 1), (1, "s_emb", 0, 1, "True", 1),
        (1, "bleu", 0, 1, "True", 2), (0, "s_emb", 1, 3, "True", 1), (0, "bleu", 1, 1, "True", 3),
        (1, "s_emb", 1, 1, "True", 1), (1, "bleu", 1, 1, "True", 2), (1, "bleu", 1, 6, "False", 1),
    ], columns=list(readers.REXVAL_RATING_COLUMNS))
    if drop_column:
        ratings = ratings.drop(columns=[drop_column])
    studies.to_csv(folder / readers.REXVAL_CANDIDATES_FILE, index=False)
    ratings.to_csv(folder / readers.REXVAL_RATINGS_FILE, index=False)
    return folder


def test_rexval_adapter(tmp_path):
    item_set = readers.read_rexval(write_rexval(tmp_path / "rexval"))
    items = item_set.items.set_index("sample_id")
    assert list(items.index[:4]) == ["s100:radgraph", "s100:bertscore", "s100:s_emb", "s100:bleu"]
    assert [t.name for t in item_set.targets] == ["total_errors", "significant_errors"]
    assert items.loc["s100:bleu", "total_errors.rater_0"] == 3 and items.loc["s100:bleu", "total_errors.rater_1"] == 3
    assert items.loc["s100:bertscore", "significant_errors.rater_0"] == 0
    assert items.loc["s100:radgraph", "total_errors.rater_1"] == 0  # no row: no error
    assert items.loc["s200:bleu", "significant_errors.rater_1"] == 2
    run = run_stage(tmp_path, "rexval", "rexval", metaeval.sets_from_config(
        {"metaeval": {"rexval": {"dir": str(tmp_path / "rexval")}}})["rexval"].files,
        {"dir": str(tmp_path / "rexval")}, metric_names=("bleu2", "rouge"))
    table = run["agreement"]
    headline = table[table["headline"]]
    assert set(headline["measure"]) == {"kendall_tau_b_total_errors"} and len(headline) == 4
    # BLEU-2 is highest for the exact copies (no errors): a positive τ-b means it agrees
    assert row(table, "bleu2", "kendall_tau_b_total_errors")["estimate"] > 0.5
    assert {"kendall_tau_b_significant_errors", "pairwise_agreement_total_errors"} <= set(table["measure"])


@pytest.mark.parametrize("column", readers.REXVAL_RATING_COLUMNS)
def test_rexval_missing_column_is_named(tmp_path, column):
    folder = write_rexval(tmp_path / "rexval", drop_column=column)
    with pytest.raises(InputError, match=re.escape(f"field '{column}'")) as err:
        readers.read_rexval(folder)
    assert readers.REXVAL_RATINGS_FILE in str(err.value) and "missing" in str(err.value)


def test_rexval_bad_rows_are_named(tmp_path):
    bad_study = [(0, "bleu", 0, 1, "True", 1), (2, "bleu", 0, 1, "True", 1)]
    with pytest.raises(InputError, match=r"row 3, field 'study_number'.*not a row of .*0-based, 2 studies"):
        readers.read_rexval(write_rexval(tmp_path / "a", rows=bad_study))
    with pytest.raises(InputError, match=r"row 2, field 'candidate_type'.*'gpt4'"):
        readers.read_rexval(write_rexval(tmp_path / "b", rows=[(0, "gpt4", 0, 1, "True", 1)]))
    with pytest.raises(InputError, match=r"row 2, field 'num_errors': is not a number: 'two'"):
        readers.read_rexval(write_rexval(tmp_path / "c", rows=[(0, "bleu", 0, 1, "True", "two")]))
    with pytest.raises(InputError, match=r"row 2, field 'clinically_significant'"):
        readers.read_rexval(write_rexval(tmp_path / "d", rows=[(0, "bleu", 0, 1, "maybe", 1)]))


USER_ROWS = [
    ("c1", "A", "Small left effusion.", "Small left effusion.", "5", "4"),
    ("c1", "B", "Small left effusion.", "Right pneumothorax.", "1", "2"),
    ("c2", "A", "No acute process.", "No acute process.", "5", "5"),
    ("c2", "B", "No acute process.", "Cardiomegaly.", "2", "2"),
    ("c2", "C", "No acute process.", "No acute disease.", "4", "3"),
]


def write_user(path: Path, rows=USER_ROWS, header=("case_id", "candidate", "reference", "hypothesis", "rad_a", "rad_b"),
               sep=","):
    path.write_text("\n".join(sep.join(f'"{v}"' for v in r) for r in [header, *rows]) + "\n")
    return path


def test_user_set(tmp_path):
    path = write_user(tmp_path / "ratings.csv")
    run = run_stage(tmp_path, "mine", "user", {"data": str(path)}, {"raters": ["rad_a", "rad_b"],
                                                                        "higher_is_better": True},
                    metric_names=("bleu2", "rouge"))
    table = run["agreement"]
    # pairs: c1 (A, B), c2 (A, B), (A, C), (B, C): 4 pairs, all non-tied
    assert row(table, "bleu2", "pairwise_agreement")["n"] == 4
    assert set(table.loc[table["headline"], "measure"]) == {"kendall_tau_b"}
    assert row(table, "bleu2", "kendall_tau_b")["estimate"] > 0
    assert not math.isnan(row(table, "bleu2", "kendall_tau_b")["human_ceiling"])
    assert {"rater:rad_a", "rater:rad_b"} <= set(table["group"])


def test_user_set_tab_separated_and_lower_is_better(tmp_path):
    rows = [(c, k, r, h, str(6 - int(a)), str(6 - int(b))) for c, k, r, h, a, b in USER_ROWS]
    path = write_user(tmp_path / "errors.tsv", rows=rows, sep="\t")
    high = readers.read_user(write_user(tmp_path / "ratings.csv"), "x", ["rad_a", "rad_b"])
    low = readers.read_user(path, "x", ["rad_a", "rad_b"], higher_is_better=False)
    scores = pd.DataFrame({"sample_id": high.items["sample_id"], "m": [0.9, 0.1, 0.8, 0.2, 0.5]})
    tables = [agreement.evaluate(s, scores, [mean_leaf("m", "M")], n_boot=0)[1] for s in (high, low)]
    pd.testing.assert_frame_equal(tables[0], tables[1])


@pytest.mark.parametrize("header, rows, message", [
    (("case_id", "candidate", "reference", "hypothesis", "rad_a"), USER_ROWS,
     r"ratings.csv, field 'rad_b': required column is missing"),
    (("case_id", "candidate", "reference", "hypothesis", "rad_a", "rad_b"),
     USER_ROWS[:2] + [("c2", "A", "No acute process.", "x", "five", "5")],
     r"ratings.csv, row 4, field 'rad_a': is not a number: 'five'"),
    (("case_id", "candidate", "reference", "hypothesis", "rad_a", "rad_b"),
     USER_ROWS[:2] + [("c1", "A", "Small left effusion.", "x", "1", "1")],
     r"ratings.csv, row 4, field 'candidate': candidate 'A' of case 'c1' is listed twice \(also line 2\)"),
    (("case_id", "candidate", "reference", "hypothesis", "rad_a", "rad_b"),
     USER_ROWS[:1] + [("c1", "B", "Another reference.", "x", "1", "1")],
     r"ratings.csv, row 3, field 'reference': case 'c1' has a different reference on line 2"),
    (("case_id", "candidate", "reference", "hypothesis", "rad_a", "rad_b"),
     [("c1", "A", " ", "x", "1", "1")], r"ratings.csv, row 2, field 'reference': is empty"),
])
def test_user_set_bad_input(tmp_path, header, rows, message):
    path = write_user(tmp_path / "ratings.csv", rows=rows, header=header)
    with pytest.raises(InputError, match=message):
        readers.read_user(path, "mine", ["rad_a", "rad_b"])


# --- bad bundled-format input ----------------------------------------------------------------------


def copy_radpref(tmp_path: Path) -> tuple[Path, list[Path]]:
    dest = tmp_path / "radpref"
    shutil.copytree(RADPREF, dest)
    return dest / "preference_data.json", [dest / f"radiologist_annotations/user_{k}.json" for k in (1, 2, 3)]


def edit_json(path: Path, edit):
    doc = json.loads(path.read_text())
    edit(doc)
    path.write_text(json.dumps(doc))


def test_radpref_ids_that_do_not_match(tmp_path):
    data, raters = copy_radpref(tmp_path)
    first = json.loads(data.read_text())[0]["id"]
    edit_json(raters[1], lambda d: d["annotations"].update({"no-such-case": d["annotations"].pop(first)}))
    with pytest.raises(InputError, match=r"user_2.json, row no-such-case, field 'annotations': annotation for a "
                                         r"case id that is not in"):
        readers.read_radpref(data, raters)


def test_radpref_case_without_annotation(tmp_path):
    data, raters = copy_radpref(tmp_path)
    first = json.loads(data.read_text())[0]["id"]
    edit_json(raters[2], lambda d: d["annotations"].pop(first))
    with pytest.raises(InputError, match=rf"user_3.json, row {re.escape(first)}, field 'annotations': case .* has no "
                                         "annotation"):
        readers.read_radpref(data, raters)


@pytest.mark.parametrize("rating, message", [("good", "is not a number: 'good'"), (None, "is not a number: None"),
                                             (7, "rating 7 is outside 1-5"), (True, "is not a number: True")])
def test_radpref_bad_rating(tmp_path, rating, message):
    data, raters = copy_radpref(tmp_path)
    first = json.loads(data.read_text())[0]["id"]
    edit_json(raters[0], lambda d: d["annotations"][first]["C2"].update(rating=rating))
    with pytest.raises(InputError, match=rf"user_1.json, row {re.escape(first)}, field 'annotations.C2.rating': "
                                         rf"{re.escape(message)}"):
        readers.read_radpref(data, raters)


def test_radpref_missing_key_and_bad_age(tmp_path):
    data, raters = copy_radpref(tmp_path)
    edit_json(data, lambda d: d[4].pop("C1_report"))
    with pytest.raises(InputError, match=r"preference_data.json, row .*, field 'C1_report': required key is missing"):
        readers.read_radpref(data, raters)
    data, raters = copy_radpref(tmp_path / "again")
    edit_json(data, lambda d: d[0].update(PatientAge="old"))
    with pytest.raises(InputError, match=r"field 'PatientAge': age 'old' is not a number of years"):
        readers.read_radpref(data, raters)


def test_radjudge_relation_naming_a_missing_candidate(tmp_path):
    path = tmp_path / "ranking_cases.json"
    shutil.copy(RADJUDGE, path)
    edit_json(path, lambda d: d[0]["tests"][1].update(expected_ranking="C1 > C4"))
    with pytest.raises(InputError, match=r"row 1b, field 'expected_ranking': relation 'C1 > C4' names \['C4'\]"):
        readers.read_radjudge(path)
    edit_json(path, lambda d: d[0]["tests"][1].update(expected_ranking="C1 >> C2"))
    with pytest.raises(InputError, match=r"row 1b, field 'expected_ranking': cannot read relation 'C1 >> C2'"):
        readers.read_radjudge(path)


def test_config_sets_and_names():
    sources = metaeval.sets_from_config({"metaeval": {"sets": ["radpref", "radjudge"], "rexval": {"dir": "/data/rx/"},
                                                      "user": [{"name": "mine", "path": "r.csv", "raters": ["a"]}]}})
    assert list(sources) == ["radpref", "radjudge", "rexval", "mine"]
    assert sources["rexval"].files["ratings"] == "/data/rx/6_valid_raters_per_rater_error_categories.csv"
    assert sources["radpref"].files["raters"][0] == "resources/metaeval/radpref/radiologist_annotations/user_1.json"
    assert all((REPO / p).is_file() for s in ("radpref", "radjudge") for v in sources[s].files.values()
               for p in ([v] if isinstance(v, str) else v))
    with pytest.raises(Exception, match="already taken"):
        metaeval.sets_from_config({"metaeval": {"user": [{"name": "radpref", "path": "r.csv", "raters": ["a"]}]}})
    with pytest.raises(Exception, match="must be letters"):
        metaeval.sets_from_config({"metaeval": {"user": [{"name": "my set", "path": "r.csv", "raters": ["a"]}]}})



def test_candidates_a_metric_could_not_score_are_left_out_and_counted():
    items = pd.DataFrame({"sample_id": [f"s{i}:{c}" for i in range(3) for c in "AB"],
                          "case": [f"s{i}" for i in range(3) for _ in "AB"], "candidate": list("AB") * 3,
                          "category": None, "rating.r1": [5, 1, 4, 2, 1, 3.0]})
    item_set = ItemSet("toy", "ratings", [], items, targets=(Target("rating", "r", ("r1",), True),),
                       headline="kendall_tau_b")
    scores = pd.DataFrame({"sample_id": items["sample_id"], "m": [0.9, 0.1, np.nan, 0.2, 0.1, 0.3]})
    _, table, _ = agreement.evaluate(item_set, scores, [mean_leaf("m", "M")], n_boot=20)
    assert row(table, "m", "pairwise_agreement")["n"] == 2 and row(table, "m", "pairwise_agreement")["estimate"] == 1.0
    assert row(table, "m", "kendall_tau_b")["n"] == 5
    valid = scores["m"].notna()
    assert row(table, "m", "kendall_tau_b")["estimate"] == pytest.approx(
        kendalltau(scores["m"][valid], items["rating.r1"][valid]).statistic)
    assert math.isnan(row(table, "m", "kendall_tau_b")["human_ceiling"])  # one rater: no ceiling
