"""Ranks that cannot be bought (issue 24): every strategy a submitter may try to rank first gains it no rank over a
model that is at least as good on the dataset's case set, and the leaderboard says what happened.

Each group runs through the workflow's own jobs in process (ingest → cases → score → bootstrap → leaderboard) on the
bundled example's studies, with BLEU-2 as the rank leaf: the real code path, without Snakemake's start-up.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from radrank import io, jobs, metrics
from radrank.errors import InputError
from radrank.ingest import casesets
from radrank.leaderboard import build_leaderboard, rank_uncertainty
from radrank.stats import coverage, ranks
from radrank.stats.bootstrap import bootstrap
from synthetic import stats_outputs

REPO = Path(__file__).resolve().parents[1]
TRUTH = REPO / "example/demo_cxr/ground_truth.json"
DATASET, SPLIT = "demo", "findings"


def truth() -> dict:
    return json.loads(TRUTH.read_text())


def predictions(name: str) -> dict:
    return {case: entry["model_prediction"]
            for case, entry in json.loads((REPO / f"example/demo_cxr/{name}.json").read_text()).items()}


def cases_with_findings() -> list:
    return sorted(c for c, e in truth().items() if (e.get("section_findings") or "").strip())


def submission(answers: dict, references: dict | None = None) -> dict:
    """A ReXrank JSON submission: the ground truth's entries for the answered cases, with ``answers`` as predictions
    (``references``: other section_findings for some cases)."""
    gt = truth()
    out = {}
    for case, text in answers.items():
        entry = dict(gt.get(case) or {"section_findings": (references or {}).get(case, ""), "section_impression": ""})
        entry["model_prediction"] = text
        if references and case in references:
            entry["section_findings"] = references[case]
        out[case] = entry
    return out


def hardest(n: int) -> list:
    """The n cases the careful model does worst on (BLEU-2 against the canonical findings): a gamer's choice."""
    ids = cases_with_findings()
    gt = truth()
    careful = predictions("careful")
    pairs = pd.DataFrame({"sample_id": ids, "reference": [f"Findings: {gt[c]['section_findings']}" for c in ids],
                          "hypothesis": [careful[c] for c in ids]})
    scored = metrics.score("bleu2", pairs, metrics.get("bleu2").settings())
    return list(scored.sort_values(["bleu2", "sample_id"])["sample_id"].iloc[:n])


def run_group(tmp: Path, subs: dict, *, canonical: bool = True, on_mismatch: str = "error",
              missing_cases: str = "score_as_empty", min_coverage: float = 0.9, formats: dict | None = None,
              metric: str = "bleu2", leaf: str = "bleu2", cache=None):
    """The leaderboard (indexed by model) of one dataset × split built by the workflow's jobs from ``subs``
    ({model: ReXrank JSON dict, or a (pairs DataFrame) for a parquet submission, or (predictions CSV rows,
    ground-truth CSV rows) for a CSV pair}), the group's accounting and the per-case ``leaf`` scores (``metric``
    scored with the score cache ``cache``)."""
    files = jobs.Files
    root = tmp / "run"
    inputs = root / "in"
    inputs.mkdir(parents=True, exist_ok=True)
    models = sorted(subs)
    pairs = {m: str(root / f"pairs/{m}.parquet") for m in models}
    drops = {m: str(root / f"pairs/{m}.drops.csv") for m in models}
    canon = {"canonical": str(TRUTH)} if canonical else {}
    for m in models:
        sub = subs[m]
        given = {}
        if isinstance(sub, dict):
            path = inputs / f"{m}.json"
            path.write_text(json.dumps(sub))
        elif isinstance(sub, pd.DataFrame):
            path = inputs / f"{m}.parquet"
            sub.to_parquet(path)
        else:
            path, gt = inputs / f"{m}.csv", inputs / f"{m}.gt.csv"
            sub[0].to_csv(path, index=False)
            sub[1].to_csv(gt, index=False)
            given = {"reference": str(gt)}
        jobs.Ingest(dataset=DATASET, split=SPLIT, model=m, ref_section="full", empty_hypothesis="score",
                    max_chars=None, canonical_ref_section="findings", on_mismatch=on_mismatch).run(
            files(submission=str(path), **given, **canon), files(pairs=pairs[m], drops=drops[m]))
    cases = str(root / "cases.parquet")
    accounting = str(root / "cases.accounting.parquet")
    jobs.Cases(dataset=DATASET, split=SPLIT, models=tuple(models), missing_section="drop", ref_section="findings").run(
        files(pairs=[pairs[m] for m in models], drops=[drops[m] for m in models], **canon),
        files(cases=cases, accounting=accounting, accounting_csv=str(root / "cases.accounting.csv")))
    scores = [str(root / f"scores/{m}/{metric}.parquet") for m in models]
    jobs.ScoreGroup.of(metric, models, dataset=DATASET, split=SPLIT, cache=cache).run(
        files(pairs=[pairs[m] for m in models], cases=cases), files(scores=scores))
    stats = root / "stats"
    jobs.Bootstrap(dataset=DATASET, split=SPLIT, models=tuple(models), metrics=(metric,), n=300, seed=0, level=0.95,
                   rank_by=leaf, fallback_rank_by=leaf, min_coverage=min_coverage, min_common_cases=10,
                   missing_cases=missing_cases).run(
        files(scores=scores, drops=[drops[m] for m in models], cases=cases, accounting=accounting),
        files(**stats_outputs(stats), model_files=str(root / "summary")))
    board_path = root / "board.csv"
    jobs.Leaderboard(dataset=DATASET, split=SPLIT, models=tuple(models), rank_by=leaf, fallback_rank_by=leaf,
                     decimals=6, level=0.95).run(
        files(summary=stats / "summary.parquet", rank_replicates=stats / "rank_replicates.parquet",
              coverage=stats / "coverage.parquet", comparisons=stats / "comparisons.parquet",
              failures=stats / "failures.parquet", drops=[drops[m] for m in models]),
        files(board=str(board_path), ranks=str(stats / "ranks.parquet")))
    board = io.read_csv(board_path, keep_default_na=True).set_index("model")
    per_case = {m: pd.read_parquet(p).set_index("sample_id")[leaf] for m, p in zip(models, scores)}
    return board, pd.read_parquet(accounting), per_case


def assert_rank_inside_interval(board):
    ranked = board[board["Rank"].notna()]
    assert ((ranked["Rank CI low"] <= ranked["Rank"]) & (ranked["Rank"] <= ranked["Rank CI high"])).all(), \
        ranked[["Rank", "Rank CI low", "Rank CI high"]]


def assert_not_above(board, per_case, author: str, rival: str):
    """``rival`` is at least as good as ``author`` on every case of the set, so ``author`` does not rank above it."""
    assert (per_case[rival] >= per_case[author].reindex(per_case[rival].index)).all()
    assert board.loc[rival, "Rank"] <= board.loc[author, "Rank"]


# --- with a canonical file ------------------------------------------------------------------------------


def test_omitting_the_hardest_cases_scores_them_as_empty_and_ranks_last(tmp_path):
    ids, careful, hasty = cases_with_findings(), predictions("careful"), predictions("hasty")
    hard = hardest(4)  # under 10 %: the gamer keeps its coverage above min_coverage
    honest = submission({c: (hasty[c] if c in hard else careful[c]) for c in ids})  # answers its hard cases badly
    gamer = submission({c: careful[c] for c in ids if c not in hard})  # the same answers, the hard ones omitted
    board, accounting, per_case = run_group(tmp_path, {"honest": honest, "gamer": gamer})
    assert board.loc["honest", "Rank"] == 1 and board.loc["gamer", "Rank"] == 2
    assert_not_above(board, per_case, "gamer", "honest")
    gamer_row = board.loc["gamer"]
    assert gamer_row["n"] == len(ids) and gamer_row["Missing"] == 4 and gamer_row["Missing reasons"] == "not_submitted 4"
    assert gamer_row["Coverage"] == round(1 - 4 / len(ids), 6) and pd.isna(gamer_row["Flag"])
    assert (per_case["gamer"][hard] == 0).all()  # an empty report earns nothing
    assert set(accounting.loc[accounting["model"] == "gamer", "sample_id"]) == set(hard)
    assert board["Case set"].iloc[0] == f"{len(ids)} cases: the canonical references {TRUTH}"
    assert_rank_inside_interval(board)


def test_under_not_ranked_a_model_that_omits_cases_is_listed_unranked(tmp_path):
    ids, careful = cases_with_findings(), predictions("careful")
    hard = hardest(2)
    subs = {"honest": submission({c: careful[c] for c in ids}),
            "gamer": submission({c: careful[c] for c in ids if c not in hard})}
    board, _, _ = run_group(tmp_path, subs, missing_cases="not_ranked")
    assert board.loc["honest", "Rank"] == 1 and pd.isna(board.loc["gamer", "Rank"])
    assert list(board.index) == ["honest", "gamer"]
    assert board.loc["gamer", "Flag"] == (f"no answer for 2 of the set's {len(ids)} cases "
                                          "(leaderboard.missing_cases: not_ranked): not ranked")
    assert board.loc["gamer", "n"] == len(ids) - 2  # its numbers rest on what it answered, and say so


def test_a_reference_edit_that_drops_hard_cases_counts_them_as_missing(tmp_path):
    ids, careful, hasty = cases_with_findings(), predictions("careful"), predictions("hasty")
    hard = hardest(4)
    answers = {c: (hasty[c] if c in hard else careful[c]) for c in ids}
    gt = truth()
    edited = {c: gt[c]["section_findings"] + " " for c in hard}  # one space: dropped under on_mismatch: drop
    board, accounting, per_case = run_group(
        tmp_path, {"honest": submission(answers), "gamer": submission(answers, edited)}, on_mismatch="drop")
    assert board.loc["honest", "Rank"] == 1 and board.loc["gamer", "Rank"] == 2
    assert_not_above(board, per_case, "gamer", "honest")
    assert board.loc["gamer", "Missing reasons"] == "reference_mismatch 4"
    assert board.loc["gamer", "Dropped"] == 4 and board.loc["gamer", "n"] == len(ids)
    assert_rank_inside_interval(board)


def test_a_submission_whose_every_case_is_dropped_cannot_block_the_leaderboard(tmp_path):
    ids, careful, hasty = cases_with_findings(), predictions("careful"), predictions("hasty")
    gt = truth()
    edited = {c: gt[c]["section_findings"] + " " for c in ids}  # every reference differs from the canonical one
    subs = {"honest": submission({c: careful[c] for c in ids}), "other": submission({c: hasty[c] for c in ids}),
            "blocker": submission({c: careful[c] for c in ids}, edited)}
    board, accounting, per_case = run_group(tmp_path, subs, on_mismatch="drop")
    assert board.loc["honest", "Rank"] == 1 and board.loc["other", "Rank"] == 2 and pd.isna(board.loc["blocker", "Rank"])
    assert board.loc["blocker", "Missing"] == len(ids) and board.loc["blocker", "Coverage"] == 0
    assert board.loc["blocker", "Missing reasons"] == f"reference_mismatch {len(ids)}"
    assert "not ranked" in board.loc["blocker", "Flag"]
    assert (per_case["blocker"] == 0).all()
    assert_rank_inside_interval(board)


# --- without a canonical file ---------------------------------------------------------------------------


def test_invented_cases_stay_outside_the_set_and_are_listed(tmp_path):
    ids = cases_with_findings()
    careful, hasty, template = predictions("careful"), predictions("hasty"), predictions("template")
    invented = {f"INVENTED-{i:02d}": f"The lungs are clear number {i}." for i in range(12)}
    attacker = submission({**{c: template[c] for c in ids}, **invented}, references=invented)
    subs = {"h1": submission({c: careful[c] for c in ids}), "h2": submission({c: hasty[c] for c in ids}),
            "attacker": attacker}
    board, accounting, per_case = run_group(tmp_path, subs, canonical=False)
    assert [board.loc[m, "Rank"] for m in ("h1", "h2", "attacker")] == [1, 2, 3]
    assert set(board["Coverage"]) == {1.0} and set(board["n"]) == {len(ids)}
    assert board.loc["attacker", "Outside set"] == 12 and board.loc["h1", "Outside set"] == 0
    outside = accounting[accounting["status"] == casesets.OUTSIDE]
    assert set(outside["sample_id"]) == set(invented) and set(outside["model"]) == {"attacker"}
    assert outside["detail"].iloc[0] == "1 of the 3 submissions have this case; the set holds the cases at least 2 have"
    assert board["Case set"].iloc[0] == (f"{len(ids)} cases: those at least 2 of the 3 submissions have (no canonical "
                                         "reference file)")
    assert_rank_inside_interval(board)


def test_with_two_submissions_the_set_is_their_common_cases_and_says_one_submitter_can_move_it(tmp_path):
    ids, careful, template = cases_with_findings(), predictions("careful"), predictions("template")
    invented = {f"INVENTED-{i:02d}": f"Clear lungs {i}." for i in range(12)}
    subs = {"honest": submission({c: careful[c] for c in ids}),
            "attacker": submission({**{c: template[c] for c in ids[5:]}, **invented}, references=invented)}
    board, _, per_case = run_group(tmp_path, subs, canonical=False)
    assert board.loc["honest", "Rank"] == 1 and board.loc["attacker", "Rank"] == 2
    assert set(board["n"]) == {len(ids) - 5}  # both ranked on the cases both have
    assert "one submitter can change the set: name references.files" in board["Case set"].iloc[0]


@pytest.mark.parametrize("variant", ["zero-width space", "upper case"])
def test_id_variants_of_every_case_are_an_error_naming_both_ids(tmp_path, variant):
    ids, careful, hasty = cases_with_findings(), predictions("careful"), predictions("hasty")
    change = (lambda c: c + "\u200b") if variant == "zero-width space" else str.upper
    gt = truth()
    attacker = {change(c): dict(gt[c], model_prediction=hasty[c]) for c in ids}
    subs = {"h1": submission({c: careful[c] for c in ids}), "h2": submission({c: hasty[c] for c in ids}),
            "attacker": attacker}
    with pytest.raises(InputError) as info:
        run_group(tmp_path, subs, canonical=False)
    message = str(info.value)
    assert "differ only in whitespace, letter case, invisible format characters or Unicode normalisation" in message
    assert "attacker" in message


def test_a_missing_case_costs_the_same_on_every_route(tmp_path):
    """The same omission as a ReXrank JSON (key absent), a parquet file (row absent) and a CSV pair (prediction row
    absent): the same per-case scores, the same mean and rank."""
    ids, careful, hasty = cases_with_findings(), predictions("careful"), predictions("hasty")
    hard = set(hardest(3))
    gt = truth()
    kept = [c for c in ids if c not in hard]
    references = [f"Findings: {gt[c]['section_findings']}" for c in ids]
    parquet = pd.DataFrame({"sample_id": kept, "reference": [r for c, r in zip(ids, references) if c in kept],
                            "hypothesis": [careful[c] for c in kept]})
    study = {c: i for i, c in enumerate(ids)}
    csv_pair = (pd.DataFrame({"study_id": [study[c] for c in kept], "report": [careful[c] for c in kept]}),
                pd.DataFrame({"study_id": [study[c] for c in ids], "case_id": ids, "report": references}))
    subs = {"h1": submission({c: careful[c] for c in ids}), "h2": submission({c: hasty[c] for c in ids}),
            "json": submission({c: careful[c] for c in kept}), "parquet": parquet, "csv": csv_pair}
    board, accounting, per_case = run_group(tmp_path, subs, canonical=False)
    for route in ("parquet", "csv"):
        pd.testing.assert_series_equal(per_case[route].sort_index(), per_case["json"].sort_index(), check_names=False)
        assert board.loc[route, "BLEU"] == board.loc["json", "BLEU"]
        assert board.loc[route, "Rank"] == board.loc["json", "Rank"]
        assert board.loc[route, "Missing"] == 3 and board.loc[route, "Coverage"] == board.loc["json", "Coverage"]
    assert board.loc["csv", "Missing reasons"] == "missing_prediction 3"
    assert board.loc["json", "Missing reasons"] == "not_submitted 3"
    assert board.loc["h1", "Rank"] == 1


def test_blank_predictions_for_case_ids_a_spreadsheet_would_run_still_count_as_missing(tmp_path):
    """Case ids starting with =, @ or + are written to the drop lists with an apostrophe (io.write_csv, so that a
    spreadsheet shows them as text); a CSV submission that leaves their predictions blank has them missing, as any
    other case: under not_ranked it is not ranked (the drop list read back with its apostrophes matched no case, and
    the blank cases counted as answered: coverage 1, ranked first)."""
    ids, careful, hasty = cases_with_findings(), predictions("careful"), predictions("hasty")
    gt = truth()
    renamed = {c: prefix + c for c, prefix in zip(hardest(3), ("=", "@", "+"))}
    new_ids = [renamed.get(c, c) for c in ids]
    references = [f"Findings: {gt[c]['section_findings']}" for c in ids]

    def parquet(answers):
        return pd.DataFrame({"sample_id": new_ids, "reference": references, "hypothesis": [answers[c] for c in ids]})

    study = {c: i for i, c in enumerate(ids)}
    answered = [c for c in ids if c not in renamed]
    csv_pair = (pd.DataFrame({"study_id": [study[c] for c in answered], "report": [careful[c] for c in answered]}),
                pd.DataFrame({"study_id": [study[c] for c in ids], "case_id": new_ids, "report": references}))
    subs = {"h1": parquet(careful), "h2": parquet(hasty), "csv": csv_pair}
    board, accounting, _ = run_group(tmp_path, subs, canonical=False, missing_cases="not_ranked")
    missing = accounting[(accounting["model"] == "csv") & (accounting["status"] == "missing")]
    assert sorted(missing["sample_id"]) == sorted(renamed.values()) and set(missing["reason"]) == {"missing_prediction"}
    assert board.loc["csv", "Missing"] == 3 and board.loc["csv", "Missing reasons"] == "missing_prediction 3"
    assert pd.isna(board.loc["csv", "Rank"]) and board.loc["h1", "Rank"] == 1


# --- Rank inside Rank CI, by construction --------------------------------------------------------------


def test_a_point_rank_outside_its_percentile_interval_is_taken_into_it():
    # A ranks first on the point estimates but second on every resample: the percentile interval alone is [2, 2]
    replicates = pd.DataFrame({"model": ["a"] * 4 + ["b"] * 4, "metric": "m", "bootstrap": [-1, 0, 1, 2] * 2,
                               "value": [0.51, 0.4, 0.4, 0.4, 0.50, 0.6, 0.6, 0.6]})
    summary, _ = ranks.rank_uncertainty(replicates, "m", ["a", "b"], True, 0.95)
    a = summary.set_index("model").loc["a"]
    assert (a["rank"], a["rank_lower"], a["rank_upper"]) == (1, 1, 2)
    assert summary.set_index("model").loc["b", ["rank", "rank_lower", "rank_upper"]].tolist() == [2, 1, 2]


@pytest.mark.parametrize("policy", casesets.MISSING_POLICIES)
def test_rank_lies_inside_rank_ci_over_random_case_patterns(policy):
    rng = random.Random(24)
    leaves = metrics.leaves("bleu2")
    for trial in range(25):
        n_cases, n_models = rng.randint(20, 60), rng.randint(2, 6)
        ids = [f"c{i:03d}" for i in range(n_cases)]
        cases = pd.DataFrame({"sample_id": ids})
        nprng = np.random.default_rng(trial)
        own, scores = {}, {}
        for k in range(n_models):
            answered = [c for c in ids if rng.random() > rng.choice([0.0, 0.02, 0.05, 0.1, 0.3])]
            own[f"m{k}"] = pd.DataFrame({"sample_id": answered})
            # an aligned score table: the answered cases' scores, an unanswered one's the empty report's 0
            quality = rng.uniform(0.2, 0.8)
            values = np.clip(quality + nprng.normal(0, 0.25, n_cases), 0, 1)
            values[[i for i, c in enumerate(ids) if c not in set(answered)]] = 0.0
            scores[f"m{k}"] = pd.DataFrame({"sample_id": ids, "bleu2": values})
        accounting = casesets.account(own, {}, cases, canonical=True)
        covered = coverage.model_coverage(scores, n_cases, accounting, min_coverage=0.9, missing_cases=policy)
        ranked = list(covered.loc[covered["ranked"], "model"])
        for m in set(scores) - set(ranked):  # as the statistics job does under not_ranked
            if policy == "not_ranked":
                scores[m] = scores[m][scores[m]["sample_id"].isin(set(own[m]["sample_id"]))]
        result = bootstrap(scores, leaves, n_boot=200, seed=trial, common_to=ranked, common_leaves=["bleu2"])
        covered = coverage.flag_ranking(covered, result.common_cases, 10)
        rank_summary, _, tied = rank_uncertainty(result.summary, result.common_replicates, result.comparisons,
                                                 rank_by="bleu2", coverage=covered, min_common_cases=10)
        board = build_leaderboard(result.summary, {}, None, rank_by="bleu2", rank_summary=rank_summary, tied=tied,
                                  coverage=covered).set_index("model")
        if ranked:
            assert result.common_cases == n_cases  # every ranked model rests on the whole set
            assert_rank_inside_interval(board)
            # the point rank is the order of the means shown
            shown = board.loc[ranked, "BLEU"]
            by_mean = ranks.competition_ranks(result.summary.set_index("model").loc[ranked, "estimate"].to_numpy(),
                                              True)
            assert list(board.loc[ranked, "Rank"]) == list(by_mean), (trial, shown)


# --- the score cache ------------------------------------------------------------------------------------


def poison(pack: Path, digests, *, secret: bytes | None = None, older: bool = False, truncate: bool = False) -> Path:
    """What a submitter with write access to a shared cache does: every score of its own pairs set to 1.0, the pack
    rewritten in place, or beside it under an older name (the oldest copy of an entry answers), with the checksum
    a forger computes from radrank's code (``secret``: the one it guesses), or just truncated."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from radrank import score_cache as sc

    if truncate:
        pack.write_bytes(pack.read_bytes()[:100])
        return pack
    table = pq.read_table(pack)
    mine = pd.Series(table.column("digest").to_pylist()).isin(set(digests)).to_numpy()
    for name in ("rouge1", "rouge2", "rougeL"):
        values = np.where(mine, 1.0, table.column(name).to_numpy())
        table = table.set_column(table.schema.get_field_index(name), name, pa.array(values))
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    data = sink.getvalue().to_pybytes()
    target = pack
    if secret is not None or older:
        stem = f"pack-{1 if older else int(pack.name.split('-')[1]):020d}-{'0' * 12}"
        check = sc._checksum(secret or b"", pack.parent.name, stem, [data]) if secret is not None else "0" * 32
        target = pack.parent / f"{stem}-{check}.parquet"
    target.write_bytes(data)
    return target


@pytest.mark.parametrize("how", ["overwritten", "older_name", "forged_checksum", "truncated"])
def test_a_poisoned_or_damaged_score_cache_pack_gains_its_author_nothing(tmp_path, caplog, how):
    from radrank import score_cache as sc
    from radrank.scoring import pair_keys

    rouge = metrics.get("rouge")
    assert rouge.cache_scores  # its scores go through the cache, like a model metric's
    ids, careful, hasty = cases_with_findings(), predictions("careful"), predictions("hasty")
    subs = {"honest": submission({c: careful[c] for c in ids}), "attacker": submission({c: hasty[c] for c in ids})}
    secret = b"maintainers-only-" * 2 if how == "forged_checksum" else b""
    cache = sc.ScoreCache(tmp_path / "shared-cache", secret=secret)
    clean, _, clean_cases = run_group(tmp_path / "first", subs, metric="rouge", leaf="rougeL", cache=cache)
    assert clean.loc["honest", "Rank"] == 1 and clean.loc["attacker", "Rank"] == 2
    [pack] = list((tmp_path / "shared-cache").rglob("pack-*.parquet"))
    attacker_pairs = pd.read_parquet(tmp_path / "first/run/pairs/attacker.parquet")
    digests = pair_keys(rouge, rouge.settings(), attacker_pairs)
    bad = poison(pack, digests, secret=b"" if how == "forged_checksum" else None, older=how == "older_name",
                 truncate=how == "truncated")
    for memo in (sc._INDEXES, sc._PACKS, sc._WARNED):  # the next run: new processes
        memo.clear()
    board, _, per_case = run_group(tmp_path / "second", subs, metric="rouge", leaf="rougeL", cache=cache)
    assert board.loc["honest", "Rank"] == 1 and board.loc["attacker", "Rank"] == 2
    for model in subs:  # the numbers of a clean run: the bad pack served nothing
        pd.testing.assert_series_equal(per_case[model], clean_cases[model], check_exact=True)
    pd.testing.assert_frame_equal(board, clean)
    assert f"score cache: pack {bad}" in caplog.text and "not served" in caplog.text
    assert "score cache pack(s) were not served" in caplog.text  # the job's own line
