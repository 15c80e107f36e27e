"""`snakemake --cores 2 metaeval` on a fresh copy of the repository, offline, with the default CPU
metrics: the bundled RadPref and RadJudge and a user's own ratings file; the numbers equal the
independent implementation in test_metaeval; a bad ratings file fails with one clear line and
leaves no complete-looking output; the leaderboard run includes the stage and the report reads it."""

from __future__ import annotations

import re

import pandas as pd
import pytest

import test_metaeval as reference
from _workflow import make_workdir, snakemake

pytestmark = pytest.mark.workflow

USER_SET = {"name": "my-hospital", "path": "ratings/my_hospital.csv", "raters": ["rad_a", "rad_b"]}


@pytest.fixture(scope="module")
def metaeval_run(tmp_path_factory):
    workdir = make_workdir(tmp_path_factory.mktemp("metaeval"), metaeval={"user": [USER_SET]})
    (workdir / "ratings").mkdir()
    reference.write_user(workdir / USER_SET["path"])
    proc = snakemake(workdir, "metaeval")
    return workdir, proc


def test_metaeval_target_writes_every_set(metaeval_run):
    workdir, proc = metaeval_run
    for name in ("radpref", "radjudge", "my-hospital"):
        folder = workdir / "results/metaeval" / name
        assert {p.name for p in folder.iterdir()} == {"items.parquet", "scores.parquet", "agreement.csv",
                                                      "metric_comparisons.csv"}
        table = pd.read_csv(folder / "agreement.csv")
        assert list(table.columns) == ["set", "metric", "label", "measure", "group", "estimate", "ci_lower",
                                       "ci_upper", "n", "n_ties", "human_ceiling", "headline"]
        assert set(table["metric"]) == {"bleu2", "bleu4", "rouge1", "rouge2", "rougeL"}  # the run's `metrics`
        assert table.loc[table["metric"] == "bleu4", "measure"].eq("not_applicable").all()
        # each set was scored by the ordinary scoring rule, as dataset metaeval-<set>
        for metric in ("bleu2", "bleu4", "rouge"):
            assert (workdir / f"results/scores/metaeval-{name}/metaeval/{metric}/candidates.parquet").is_file()
    # only the meta-evaluation ran: no leaderboard, no ingest of the submissions
    assert not (workdir / "results/leaderboard").exists()
    for metric in ("bleu2", "bleu4", "rouge"):  # one job per metric and set
        assert len(re.findall(rf"^score_{metric}_metaeval_\S+\s+1$", proc.stdout + proc.stderr, re.MULTILINE)) == 3


def test_workflow_numbers_equal_independent_implementation(metaeval_run):
    workdir, _ = metaeval_run
    reference.assert_equal_independent_radpref(pd.read_csv(workdir / "results/metaeval/radpref/agreement.csv"))
    reference.assert_equal_independent_radjudge(pd.read_csv(workdir / "results/metaeval/radjudge/agreement.csv"))


def test_default_bootstrap_and_comparisons(metaeval_run):
    workdir, _ = metaeval_run
    comparisons = pd.read_csv(workdir / "results/metaeval/radpref/metric_comparisons.csv")
    assert set(comparisons["n_bootstrap"]) == {1000} and set(comparisons["seed"]) == {0}
    assert set(comparisons["measure"]) == {"pairwise_agreement", "kendall_tau_b"}
    assert len(comparisons) == 2 * 6  # 4 per-report leaves: 6 pairs per measure
    log = (workdir / "logs/metaeval/radpref/agreement.log").read_text()
    assert "bleu4 are corpus statistics with no value per report; listed as not_applicable" in log


def test_bad_ratings_file_fails_with_one_clear_line(tmp_path):
    bad = {**USER_SET, "raters": ["rad_a", "rad_c"]}
    workdir = make_workdir(tmp_path, metaeval={"sets": [], "user": [bad]})
    (workdir / "ratings").mkdir()
    reference.write_user(workdir / bad["path"])
    proc = snakemake(workdir, "metaeval", check=False)
    assert proc.returncode != 0
    log = (workdir / "logs/metaeval/my-hospital/pairs.log").read_text()
    assert "file ratings/my_hospital.csv, field 'rad_c': required column is missing" in log
    assert not (workdir / "results/metaeval/my-hospital").exists()
    assert not (workdir / "results/pairs/metaeval-my-hospital").exists()


def test_full_run_includes_metaeval_and_feeds_the_report(tmp_path):
    out = snakemake(make_workdir(tmp_path), "-n").stdout
    for rule, count in [("metaeval_pairs", 2), ("metaeval_agreement", 2), ("score_rouge_metaeval_radpref_metaeval", 1),
                        ("report", 1)]:
        assert re.search(rf"^{rule}\s+{count}$", out, re.MULTILINE), (rule, out[-3000:])
    report_job = out[out.index("rule report:"):].split("\n\n")[0]
    for name in ("radpref", "radjudge"):
        assert f"results/metaeval/{name}/agreement.csv" in report_job
    proc = snakemake(make_workdir(tmp_path / "off", metaeval={"sets": []}), "-n")
    assert "metaeval_agreement" not in proc.stdout
