"""Submissions are untrusted (issue 20, items 1 and 2): a dataset's references are checked, never taken on a
submission's word, and a rank claims no more certainty than the cases the models share allow.

References: every submission is checked against the dataset's canonical file (a ReXrank JSON or a
ground-truth CSV), or, without one, against every other submission; a mismatch is an error naming the
dataset, the case, the field and both files, or with ``references.on_mismatch: drop`` a listed drop.
Coverage: a model below ``leaderboard.min_coverage`` is listed unranked and flagged; rank intervals rest on
the cases every ranked model has; comparisons and rank intervals on too few cases are flagged. Near-duplicate
case ids are an error naming both. ReXrank's literal "Findings: nan" mode reproduces json_to_csv.
"""

from __future__ import annotations

import json
import math
import os
import unicodedata

import numpy as np
import pandas as pd
import pytest
import yaml

from _workflow import make_workdir, snakemake
from radrank import io, jobs, metrics
from radrank.errors import ConfigError, InputError
from radrank.ingest import casesets, ingest_submission, references, rexrank
from radrank.leaderboard import build_leaderboard, rank_uncertainty
from radrank.stats import coverage
from radrank.stats.bootstrap import bootstrap
from radrank.workflow import Plan, read_config

JSON_SUB = "example/demo_cxr/careful.json"
JSON_TRUTH = "example/demo_cxr/ground_truth.json"
CSV_SUB, CSV_GT = "example/demo_clinic/careful.csv", "example/demo_clinic/ground_truth.csv"


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return make_workdir(tmp_path_factory.mktemp("references"))


def entries(workdir) -> dict:
    return json.loads((workdir / JSON_SUB).read_text())


def write_json(path, data) -> str:
    path.write_text(json.dumps(data, indent=1))
    return str(path)


def copycat(workdir, tmp_path, cases=None) -> str:
    """A submission whose references are its own predictions (for ``cases``, all by default)."""
    data = entries(workdir)
    for case, entry in data.items():
        if cases is None or case in cases:
            entry["section_findings"] = entry["model_prediction"]
    return write_json(tmp_path / "copycat.json", data)


def canonical(workdir, split="findings", path=JSON_TRUTH, **kw):
    return references.read_canonical(workdir / path, split, ref_section="findings", **kw)


def ingest(workdir, path, split="findings", **kw):
    truth = kw.pop("truth", JSON_TRUTH)
    return ingest_submission(path, split, canonical=canonical(workdir, split, truth), canonical_path=truth,
                             dataset="demo_cxr", empty_hypothesis="score", **kw)


# --- canonical references ----------------------------------------------------------------------------


def test_a_submission_that_copies_its_predictions_into_its_references_is_refused(workdir, tmp_path):
    path = copycat(workdir, tmp_path)
    with pytest.raises(InputError) as info:
        ingest(workdir, path)
    message = str(info.value)
    for part in ("dataset demo_cxr", "demo-0000", "field 'section_findings'", path, JSON_TRUTH,
                 "references.on_mismatch: drop"):
        assert part in message, part
    assert "\n" not in message


def test_on_mismatch_drop_lists_every_differing_case_and_scores_the_rest(workdir, tmp_path):
    tampered = {"demo-0003", "demo-0010", "demo-0020"}
    pairs, drops, _ = ingest(workdir, copycat(workdir, tmp_path, tampered), on_mismatch="drop")
    listed = drops[drops["reason"] == "reference_mismatch"]
    assert set(listed["sample_id"]) == tampered and set(listed["action"]) == {"dropped"}
    assert not tampered & set(pairs["sample_id"])
    assert all(JSON_TRUTH in d for d in listed["detail"])
    truth = canonical(workdir)
    assert all(r == truth[c][0] for c, r in zip(pairs["sample_id"], pairs["reference"]))


def test_an_honest_submission_passes_unchanged(workdir):
    checked, drops, _ = ingest(workdir, str(workdir / JSON_SUB))
    plain, plain_drops, _ = ingest_submission(workdir / JSON_SUB, "findings", empty_hypothesis="score")
    pd.testing.assert_frame_equal(checked, plain)
    pd.testing.assert_frame_equal(drops, plain_drops)


def test_a_case_the_canonical_file_lacks_is_named_with_its_near_duplicate(workdir, tmp_path):
    data = entries(workdir)
    data["demo-0005 "] = data.pop("demo-0005")
    with pytest.raises(InputError) as info:
        ingest(workdir, write_json(tmp_path / "spaced.json", data))
    assert "'demo-0005 '" in str(info.value) and "'demo-0005'" in str(info.value)
    assert "not among the dataset's canonical references" in str(info.value)
    _, drops, _ = ingest(workdir, str(tmp_path / "spaced.json"), on_mismatch="drop")
    assert list(drops.loc[drops["reason"] == "unknown_case", "sample_id"]) == ["demo-0005 "]


def test_a_mismatch_near_the_end_shows_where_the_texts_first_differ(workdir, tmp_path):
    """Both excerpts are the texts' first 80 characters, identical when the texts part near their end: the
    message adds the first differing position, both lengths and the text around it in each."""
    data = entries(workdir)
    findings = data["demo-0001"]["section_findings"]
    assert findings.endswith("silhouette is normal.") and len(findings) > 100
    data["demo-0001"]["section_findings"] = findings[:-len("normal.")] + "unremarkable."
    with pytest.raises(InputError) as info:
        ingest(workdir, write_json(tmp_path / "late.json", data))
    message = str(info.value)
    ours, truth = "Findings: " + data["demo-0001"]["section_findings"], canonical(workdir)["demo-0001"][0]
    at = len(os.path.commonprefix([ours, truth]))  # an independent count of the common start
    assert f"(first difference at character {at + 1}, lengths {len(ours)} and {len(truth)}: " in message
    assert f"…{ours[at - 30:]!r} against …{truth[at - 30:]!r})" in message
    assert message.count(repr(ours[:80] + "…")) == 2  # the two excerpts of the start, alike
    assert "\n" not in message


def test_whitespace_only_differences_are_mismatches_and_say_so(workdir, tmp_path):
    data = entries(workdir)
    data["demo-0001"]["section_findings"] = "  " + data["demo-0001"]["section_findings"].replace(" ", "  ", 1)
    with pytest.raises(InputError, match="differ only in whitespace"):
        ingest(workdir, write_json(tmp_path / "ws.json", data))


def test_a_csv_submissions_ground_truth_is_checked_against_the_canonical_csv(workdir, tmp_path):
    rows = (workdir / CSV_GT).read_text().replace("small right pleural effusion", "large right pleural effusion", 1)
    own = tmp_path / "own_gt.csv"
    own.write_text(rows)
    truth = references.read_canonical(workdir / CSV_GT, "findings", ref_section="findings")
    with pytest.raises(InputError) as info:
        ingest_submission(workdir / CSV_SUB, "findings", reference_path=own, ref_section="findings",
                          canonical=truth, canonical_path=CSV_GT, dataset="demo_clinic")
    assert str(own) in str(info.value) and CSV_GT in str(info.value) and "field 'report'" in str(info.value)
    # a missing prediction scored as empty is scored against its reference too, so it is checked as well
    preds = (workdir / CSV_SUB).read_text().splitlines()
    short = tmp_path / "short.csv"
    short.write_text("\n".join(preds[:1] + preds[2:]) + "\n")
    with pytest.raises(InputError, match="differs from the canonical one"):
        ingest_submission(short, "findings", reference_path=own, ref_section="findings", canonical=truth,
                          canonical_path=CSV_GT, dataset="demo_clinic", empty_hypothesis="score")


def test_canonical_files_are_checked_when_the_workflow_loads(workdir, tmp_path, monkeypatch):
    monkeypatch.chdir(workdir)

    def load(files):
        config = yaml.safe_load((workdir / "config/config.yaml").read_text())
        config["references"] = {"files": files}
        path = tmp_path / "c.yaml"
        path.write_text(yaml.safe_dump(config))
        return Plan.load(read_config([path]), base_dir=workdir)

    plan = load({"demo_cxx": JSON_TRUTH})  # a misspelt dataset checks nothing: said when the workflow loads
    assert plan.canonical_references == {} and len(plan.warnings) == 1
    assert "references.files.demo_cxx" in plan.warnings[0] and "nothing is checked" in plan.warnings[0]
    with pytest.raises(ConfigError, match=r"references.files.demo_cxr.*does not exist"):
        load({"demo_cxr": "example/demo_cxr/missing.json"})
    parquet = tmp_path / "truth.parquet"
    pd.DataFrame({"sample_id": ["a"], "reference": ["b"], "hypothesis": ["c"]}).to_parquet(parquet)
    with pytest.raises(ConfigError, match="is parquet"):
        load({"demo_cxr": str(parquet)})
    plan = load({"demo_cxr": JSON_TRUTH})
    job = plan.ingest_job("demo_cxr", "findings", "careful")
    assert job.canonical_sha256 == plan.digest(JSON_TRUTH) and job.on_mismatch == "error"


# --- without a canonical file: submissions must agree -------------------------------------------------


def pairs_of(workdir, path, split="findings"):
    pairs, _, _ = ingest_submission(path, split, empty_hypothesis="score")
    return pairs


def test_submissions_that_disagree_on_a_reference_are_an_error_naming_both(workdir, tmp_path):
    honest = pairs_of(workdir, workdir / JSON_SUB)
    tampered = pairs_of(workdir, copycat(workdir, tmp_path, {"demo-0004"}))
    with pytest.raises(InputError) as info:
        references.check_group({"careful": (honest, JSON_SUB), "copycat": (tampered, "copycat.json")},
                               dataset="demo_cxr", split="findings")
    message = str(info.value)
    for part in ("dataset demo_cxr", "'demo-0004'", "model careful", "model copycat", JSON_SUB, "copycat.json",
                 "references.files.demo_cxr", "(first difference at character 11, lengths "):
        assert part in message, part  # character 11: after the "Findings: " both references start with
    cases = references.check_group({"a": (honest, JSON_SUB), "b": (honest, "b.json")}, dataset="d",
                                   split="findings")
    assert list(cases["sample_id"]) == sorted(honest["sample_id"]) and set(cases["n_submissions"]) == {2}


ID_VARIANTS = {"trailing space": "Müller-1 ", "NFD": unicodedata.normalize("NFD", "Müller-1"),
               "zero-width space": "Müller-1\u200b", "lower case": "müller-1", "NBSP": "Müller\u00a0-1",
               "BOM": "\ufeffMüller-1", "bidi override": "Müller-1\u202e"}


@pytest.mark.parametrize("variant", sorted(ID_VARIANTS))
def test_near_duplicate_case_ids_across_submissions_are_an_error_naming_both(workdir, variant):
    a = pd.DataFrame({"sample_id": ["Müller-1", "x-2"], "reference": ["r1", "r2"]})
    other = ID_VARIANTS[variant]
    assert other != "Müller-1"
    b = pd.DataFrame({"sample_id": [other, "x-2"], "reference": ["r1", "r2"]})
    with pytest.raises(InputError) as info:
        references.check_group({"a": (a, "a.json"), "b": (b, "b.json")}, dataset="d", split="findings")
    message = str(info.value)
    assert "differ only in whitespace, letter case, invisible format characters or Unicode normalisation" in message
    assert "a.json" in message and "b.json" in message and "model a" in message and "model b" in message


def test_near_duplicate_ids_inside_one_canonical_file_are_an_error(workdir, tmp_path):
    data = json.loads((workdir / JSON_TRUTH).read_text())
    data["demo-0001\t"] = dict(data["demo-0001"])
    path = write_json(tmp_path / "truth.json", data)
    with pytest.raises(InputError, match="'demo-0001'.*'demo-0001\\\\t'|'demo-0001\\\\t'.*'demo-0001'"):
        references.read_canonical(path, "findings", ref_section="findings")


def test_the_cases_job_reads_every_models_pairs_and_names_the_submission_files(workdir, tmp_path):
    from radrank import provenance

    paths = []
    for model, source in (("careful", workdir / JSON_SUB), ("copycat", copycat(workdir, tmp_path, {"demo-0009"}))):
        out = tmp_path / f"{model}.parquet"
        io.write_parquet(pairs_of(workdir, source), out,
                         provenance.record("pairs", sources={"path": str(source), "sha256": "0"}))
        paths.append(str(out))
    job = jobs.Cases(dataset="demo_cxr", split="findings", models=("careful", "copycat"), missing_section="drop",
                     ref_section="findings")
    with pytest.raises(InputError) as info:
        job.run(jobs.Files(pairs=paths), jobs.Files(cases=str(tmp_path / "cases.parquet")))
    assert "copycat.json" in str(info.value) and str(workdir / JSON_SUB) in str(info.value)
    assert not (tmp_path / "cases.parquet").exists()


# --- ReXrank's literal mode ---------------------------------------------------------------------------


def test_literal_mode_writes_nan_sections_as_json_to_csv_does(tmp_path):
    # json_to_csv's emptiness test is truthiness: NaN is truthy and prints "nan"; null and "" are falsy, an
    # empty cell, which pandas.read_csv reads back as NaN: "nan" too (tests/test_ingest.py has every form).
    path = tmp_path / "sub.json"
    path.write_text('{"a": {"section_findings": NaN, "section_impression": "Clear.", "model_prediction": "x"},'
                    ' "b": {"section_findings": null, "section_impression": NaN, "model_prediction": "y"},'
                    ' "c": {"section_findings": "", "report": NaN, "model_prediction": "z"},'
                    ' "d": {"section_findings": " Lungs clear. ", "section_impression": "None", "model_prediction": "w"}}')
    literal = {r["sample_id"]: r["reference"] for r in rexrank.read(path, "findings", "literal")}
    assert literal == {"a": "Findings: nan", "b": "nan", "c": "nan", "d": "Findings:  Lungs clear. "}
    reports = {r["sample_id"]: r["reference"] for r in rexrank.read(path, "reports", "literal")}
    assert reports == {"a": "Findings: nan Impression: Clear.", "b": "Impression: nan", "c": "nan",
                       "d": "Findings:  Lungs clear.  Impression: None"}
    dropped = {r["sample_id"]: r["reference"] for r in rexrank.read(path, "findings")}
    assert dropped == {"a": "", "b": "", "c": "", "d": "Findings:  Lungs clear. "}
    pairs, drops, _ = ingest_submission(path, "findings", missing_section="literal")
    assert list(pairs["sample_id"]) == ["a", "b", "c", "d"]
    assert drops[["sample_id", "reason", "action"]].values.tolist() == [
        [case, "missing_section_literal", "scored_literally"] for case in "abc"]


def test_a_canonical_file_read_literally_gives_the_submissions_references(tmp_path):
    # The canonical check reads the ground truth with the submissions' mode: in the literal mode every case,
    # a whitespace-only report included, has the reference its submissions give, and is one of the cases.
    truth = {"a": {"section_findings": math.nan, "section_impression": "Clear."},
             "b": {"section_findings": None, "section_impression": "None"},
             "c": {"section_findings": "NA", "report": "   "},
             "d": {"section_findings": "Lungs clear.", "section_impression": ""}}
    truth_path = tmp_path / "truth.json"
    truth_path.write_text(json.dumps(truth))  # Python's json writes NaN as ReXrank's files do
    sub_path = write_json(tmp_path / "sub.json", {case: dict(entry, model_prediction="None")
                                                  for case, entry in json.loads(truth_path.read_text()).items()})
    for split in ("findings", "reports"):
        canon = references.read_canonical(truth_path, split, ref_section="findings", missing_section="literal")
        pairs, drops, _ = ingest_submission(sub_path, split, missing_section="literal", canonical=canon,
                                            canonical_path=truth_path, dataset="d")
        assert dict(zip(pairs["sample_id"], pairs["reference"])) == {c: r for c, (r, _, _) in canon.items()}
        assert set(drops["reason"]) <= {"missing_section_literal", "empty_hypothesis_literal"}
        cases = references.check_group({"m": (pairs, sub_path)}, dataset="d", split=split, canonical=canon,
                                       canonical_path=truth_path)
        assert list(cases["sample_id"]) == ["a", "b", "c", "d"]
    assert canon["c"][0] == "   "  # reports split: a blank report is used as written
    with pytest.raises(InputError, match="differs from the canonical one"):  # the drop mode's canonical file
        ingest_submission(sub_path, "findings", missing_section="literal", dataset="d", canonical_path=truth_path,
                          canonical=references.read_canonical(truth_path, "findings", ref_section="findings"))


def test_literal_mode_is_a_config_setting_of_the_ingest_job(workdir, tmp_path, monkeypatch):
    monkeypatch.chdir(workdir)
    config = yaml.safe_load((workdir / "config/config.yaml").read_text())
    config["rexrank_missing_section"] = "literal"
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(config))
    plan = Plan.load(read_config([path]), base_dir=workdir)
    assert plan.ingest_job("demo_cxr", "findings", "careful").missing_section == "literal"
    config["rexrank_missing_section"] = "nan"
    path.write_text(yaml.safe_dump(config))
    with pytest.raises(ConfigError, match="rexrank_missing_section"):
        read_config([path])


# --- honest coverage ----------------------------------------------------------------------------------


def scores_for(ids, quality, seed):
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"sample_id": list(ids), "bleu2": np.clip(quality + rng.normal(0, 0.2, len(ids)), 0, 1)})


LEAVES = metrics.leaves("bleu2")


def accounting_of(scores, dataset_cases):
    """What each model lacks of the case set, as the cases job lists it (no drop files: every gap not submitted)."""
    return casesets.account(scores, {}, pd.DataFrame({"sample_id": list(dataset_cases)}), canonical=True)


def covered_of(scores, dataset_cases, min_coverage=0.9):
    return coverage.model_coverage(scores, len(dataset_cases), accounting_of(scores, dataset_cases),
                                   min_coverage=min_coverage)


def statistics(scores, dataset_cases, *, min_coverage=0.9, min_common=10, n_boot=200):
    covered = covered_of(scores, dataset_cases, min_coverage)
    ranked = list(covered.loc[covered["ranked"], "model"])
    result = bootstrap(scores, LEAVES, n_boot=n_boot, seed=1, common_to=ranked)
    covered = coverage.flag_ranking(covered, result.common_cases, min_common)
    result.comparisons["flag"] = coverage.comparison_flags(result.comparisons["n_common"], min_common)
    return result, covered


def board_of(result, covered, min_common=10):
    rank_summary, _, tied = rank_uncertainty(result.summary, result.common_replicates, result.comparisons,
                                             rank_by="bleu2", coverage=covered, min_common_cases=min_common)
    return build_leaderboard(result.summary, {}, None, rank_by="bleu2", rank_summary=rank_summary, tied=tied,
                             coverage=covered)


def test_a_model_that_answers_only_its_easy_cases_is_listed_unranked_and_flagged():
    ids = [f"c{i:03d}" for i in range(100)]
    scores = {"full": scores_for(ids, 0.5, 0), "other": scores_for(ids, 0.4, 1),
              "cherry": scores_for(ids[:40], 0.95, 2)}
    result, covered = statistics(scores, ids)
    board = board_of(result, covered)
    assert list(board["model"]) == ["full", "other", "cherry"]
    cherry = board.iloc[2]
    assert pd.isna(cherry["Rank"]) and cherry["Rank CI"] == "" and pd.isna(cherry["P(rank=1)"])
    assert cherry["Coverage"] == 0.4 and "coverage 40% of the dataset's 100 cases" in cherry["Flag"]
    assert "min_coverage 90%" in cherry["Flag"]
    assert list(board["Rank"][:2]) == [1, 2] and list(board["Flag"][:2]) == ["", ""]
    assert list(board["Rank CI cases"][:2]) == [100, 100]


def test_rank_intervals_rest_on_the_cases_every_ranked_model_has():
    ids = [f"c{i:03d}" for i in range(200)]
    scores = {"a": scores_for(ids, 0.5, 0), "b": scores_for(ids[5:], 0.45, 1), "c": scores_for(ids[:-8], 0.55, 2)}
    result, covered = statistics(scores, ids)
    assert result.common_cases == 187
    # the reference: each model restricted to the common cases, bootstrapped on its own with the same draws
    common = sorted(set(ids[5:]) & set(ids[:-8]))
    restricted = {m: s[s["sample_id"].isin(common)] for m, s in scores.items()}
    # the reference: the plain count-weighted mean over the drawn common cases, from the documented draws
    # (numpy PCG64 with the seed, n_boot × n_cases indices into the sorted case ids)
    draws = np.random.Generator(np.random.PCG64(1)).integers(0, 200, size=(200, 200))
    counts = np.stack([np.bincount(row, minlength=200) for row in draws])
    pos = {c: i for i, c in enumerate(sorted(ids))}
    for model, table in restricted.items():
        weights = counts[:, [pos[c] for c in table["sample_id"]]]
        expected = weights @ table["bleu2"].to_numpy() / weights.sum(axis=1)
        got = result.common_replicates.query("model == @model and metric == 'bleu2' and bootstrap >= 0")["value"]
        np.testing.assert_allclose(got.to_numpy(), expected, rtol=1e-12)
    board = board_of(result, covered)
    assert set(board["Rank CI cases"]) == {187} and set(board["Flag"]) == {""}


def test_disjoint_models_get_no_certain_rank_and_their_comparisons_are_flagged():
    ids = [f"c{i:03d}" for i in range(60)]
    scores = {"left": scores_for(ids[:30], 0.7, 0), "right": scores_for(ids[30:], 0.2, 1)}
    result, covered = statistics(scores, ids, min_coverage=0.5)
    assert result.common_cases == 0
    assert list(result.comparisons["flag"]) == ["only 0 common cases (below leaderboard.min_common_cases 10)"]
    board = board_of(result, covered)
    assert (board["Rank CI"] == "").all() and board["P(rank=1)"].isna().all()
    assert all("only 0 cases common to every ranked model" in f for f in board["Flag"])
    assert board.set_index("model").loc["left", "Tied with"] == "right"  # no comparison tells them apart


def test_a_comparison_on_too_few_common_cases_tells_no_models_apart():
    ids = [f"c{i:03d}" for i in range(100)]
    scores = {"good": scores_for(ids, 0.9, 0), "bad": scores_for(ids, 0.1, 1)}
    result, covered = statistics(scores, ids)
    assert board_of(result, covered).set_index("model").loc["good", "Tied with"] == ""
    result, covered = statistics(scores, ids, min_common=101)
    board = board_of(result, covered, min_common=101)
    assert board.set_index("model").loc["good", "Tied with"] == "bad"
    assert "only 100 cases common" in board["Flag"].iloc[0]


def test_coverage_counts_the_set_cases_a_model_answered():
    ids = [f"c{i}" for i in range(10)]
    table = covered_of({"m": scores_for(ids[:9], 0.5, 0)}, ids)
    assert table.loc[0, "coverage"] == 0.9 and bool(table.loc[0, "ranked"]) and table.loc[0, "n_missing"] == 1
    assert table.loc[0, "missing_reasons"] == "not_submitted 1"
    table = covered_of({"m": scores_for(ids[:8], 0.5, 0)}, ids)
    assert table.loc[0, "coverage"] == 0.8 and not table.loc[0, "ranked"]
    assert "(the rest scored as empty)" in table.loc[0, "flag"]
    strict = coverage.model_coverage(["m"], 10, accounting_of({"m": scores_for(ids[:9], 0.5, 0)}, ids),
                                     min_coverage=0.5, missing_cases="not_ranked")
    assert not bool(strict.loc[0, "ranked"]) and "no answer for 1 of the set's 10 cases" in strict.loc[0, "flag"]


# --- the workflow ---------------------------------------------------------------------------------------


@pytest.mark.workflow
def test_the_workflow_checks_submissions_and_flags_coverage(workdir, tmp_path):
    data = entries(workdir)
    tampered = {f"demo-{k:04d}" for k in range(0, 48, 3)}  # a third of the cases
    for case in tampered:
        data[case]["section_findings"] = data[case]["model_prediction"]
    write_json(workdir / "example/demo_cxr/copycat.json", data)
    sheet = workdir / "config/submissions.tsv"
    rows = sheet.read_text()
    sheet.write_text(rows + f"copycat\tdemo_cxr\t{workdir / 'example/demo_cxr/copycat.json'}\t\tfindings\n")
    board_file = "results/leaderboard/demo_cxr_findings.csv"
    failed = snakemake(workdir, board_file, check=False)
    assert failed.returncode != 0
    assert "the reference of case 'demo-0000' differs from the canonical one" in failed.stdout + failed.stderr
    assert not (workdir / "results/leaderboard/demo_cxr_findings.csv").exists()

    config = yaml.safe_load((workdir / "config/config.yaml").read_text())
    config["references"]["on_mismatch"] = "drop"
    (workdir / "config/config.yaml").write_text(yaml.safe_dump(config))
    snakemake(workdir, board_file)
    drops = pd.read_csv(workdir / "results/pairs/demo_cxr/findings/copycat.drops.csv", dtype=str,
                        keep_default_na=False)
    assert set(drops.loc[drops["reason"] == "reference_mismatch", "sample_id"]) == tampered
    board = pd.read_csv(workdir / "results/leaderboard/demo_cxr_findings.csv", keep_default_na=False)
    row = board.set_index("model").loc["copycat"]
    assert row["Rank"] == "" and "not ranked" in row["Flag"] and float(row["Coverage"]) < 0.9
    assert board["model"].iloc[-1] == "copycat"
    assert set(board.loc[board["model"] != "copycat", "Flag"]) == {""}
    cases = pd.read_parquet(workdir / "results/cases/demo_cxr/findings.parquet")
    assert len(cases) == 47  # the canonical file's cases with findings (demo-0007 has none)


def _ingested(workdir, tmp_path, submissions: dict) -> list:
    """Each submission through the real ingest job: the pairs files the case-set job reads."""
    paths = []
    for model, source in submissions.items():
        out = tmp_path / f"{model}.parquet"
        jobs.Ingest(dataset="demo_cxr", split="findings", model=model, ref_section="findings",
                    empty_hypothesis="score", max_chars=None).run(
            jobs.Files(submission=str(source)), jobs.Files(pairs=str(out), drops=str(tmp_path / f"{model}.drops.csv")))
        paths.append(str(out))
    return paths


def test_the_cases_job_reads_references_shared_by_submissions_once_and_still_checks_each(workdir, tmp_path,
                                                                                          monkeypatch):
    # Ingest records each pairs file's references digest; the case-set job reads one table per digest. A
    # submission whose references differ in one case has another digest: it is read and refused.
    other = entries(workdir)
    for entry in other.values():
        entry["model_prediction"] = "No acute findings."
    honest = {"careful": workdir / JSON_SUB, "lazy": write_json(tmp_path / "lazy.json", other)}
    reads = []
    real = io.read_parquet
    monkeypatch.setattr(io, "read_parquet", lambda path, columns=None: reads.append(path) or real(path, columns))
    paths = _ingested(workdir, tmp_path, honest)
    assert len({io.read_provenance(p)["references_sha256"] for p in paths}) == 1
    reads.clear()
    job = jobs.Cases(dataset="demo_cxr", split="findings", models=tuple(honest), missing_section="drop",
                     ref_section="findings")
    out = jobs.Files(cases=str(tmp_path / "cases.parquet"), accounting=str(tmp_path / "acc.parquet"),
                     accounting_csv=str(tmp_path / "acc.csv"))
    job.run(jobs.Files(pairs=paths, drops=[str(tmp_path / f"{m}.drops.csv") for m in honest]), out)
    assert reads == [paths[0]]
    cases = pd.read_parquet(out.cases)
    assert len(cases) == len(pairs_of(workdir, workdir / JSON_SUB)) and set(cases["n_submissions"]) == {2}

    tampered = {**honest, "copycat": copycat(workdir, tmp_path, {"demo-0004"})}
    paths = _ingested(workdir, tmp_path, tampered)
    reads.clear()
    job = jobs.Cases(dataset="demo_cxr", split="findings", models=tuple(tampered), missing_section="drop",
                     ref_section="findings")
    with pytest.raises(InputError, match="demo-0004") as info:
        job.run(jobs.Files(pairs=paths, drops=[str(tmp_path / f"{m}.drops.csv") for m in tampered]),
                jobs.Files(cases=str(tmp_path / "cases2.parquet")))
    assert "copycat.json" in str(info.value)
    assert reads == [paths[0], paths[2]]
