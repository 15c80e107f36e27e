"""A bad config is refused when the workflow loads, through the same code the Snakefile runs
(radrank.workflow.read_config + Plan): milliseconds per case instead of a Snakemake start each.
(tests/test_weights_check.py runs Snakemake once to show the message reaches the console alone.)"""

from __future__ import annotations

import pytest
import yaml

from _workflow import make_workdir
from radrank.errors import ConfigError
from radrank.workflow import Plan, ScoreRule, read_config


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return make_workdir(tmp_path_factory.mktemp("plan"))


def plan_of(workdir, tmp_path, **override) -> Plan:
    config = yaml.safe_load((workdir / "config/config.yaml").read_text())
    config.update(override)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return Plan(read_config([path]), base_dir=workdir)


@pytest.mark.parametrize("override, message", [
    ({"metrics": ["bleu2", "meteor"]}, "unknown metric(s) ['meteor']"),
    ({"metrics": ["bleu2", "radcliq"]}, "metric 'radcliq' is computed from"),
    ({"splits": ["findings", "impressions"]}, "impressions"),
    ({"bootstrap": {"n": -5}}, "-5"),
    ({"metric_settings": {"bertscore": {"idf": True}}}, "names 'bertscore', which is not among the configured"),
    ({"shards": {"green": 4}}, "names 'green', which is not among the configured metrics"),
])
def test_bad_config_is_refused_when_the_workflow_loads(workdir, tmp_path, monkeypatch, override, message):
    monkeypatch.chdir(workdir)
    with pytest.raises(ConfigError) as info:
        plan_of(workdir, tmp_path, **override)
    assert message in str(info.value)


def test_missing_sheet_and_missing_submission_name_sheet_and_row(workdir, tmp_path, monkeypatch):
    monkeypatch.chdir(workdir)
    with pytest.raises(ConfigError, match="config/nowhere.tsv does not exist"):
        plan_of(workdir, tmp_path, submissions="config/nowhere.tsv")
    sheet = workdir / "config/subs-v2.tsv"  # beside the example's sheet: its relative paths read the same
    sheet.write_text((workdir / "config/submissions.tsv").read_text().replace("example/demo_cxr/hasty.json",
                                                                             "example/demo_cxr/hasty-v2.json"))
    with pytest.raises(ConfigError) as info:
        plan_of(workdir, tmp_path, submissions=str(sheet))
    resolved = workdir.resolve() / "example/demo_cxr/hasty-v2.json"  # the cell, read from the sheet's folder
    assert str(info.value) == (f"sheet {sheet}, row 2 (line 3): path ../example/demo_cxr/hasty-v2.json (read from the "
                               f"sheet's folder as {resolved}) does not exist")


def test_the_example_plan(workdir, tmp_path, monkeypatch):
    monkeypatch.chdir(workdir)
    plan = plan_of(workdir, tmp_path)
    assert plan.groups() == [("demo_clinic", "findings"), ("demo_cxr", "findings"), ("demo_cxr", "reports")]
    rules = plan.score_rules()  # one per metric and group: 3 groups and 2 meta-evaluation sets
    assert len(rules) == 3 * 5 and all(plan.in_process(r.metric) for r in rules)
    assert rules[0] == ScoreRule("score_bleu2_demo_clinic_findings", "bleu2", "demo_clinic", "findings",
                                 ("careful", "hasty", "template"))
    assert {r.name for r in rules if r.dataset.startswith("metaeval-")} >= {"score_rouge_metaeval_radpref_metaeval"}
    assert plan.envs() == ["core"] and plan.weight_refs() == []
    job = plan.bootstrap_job("demo_cxr", "findings")
    assert (job.models, job.metrics) == (("careful", "hasty", "template"), ("bleu2", "bleu4", "rouge"))


def test_the_mrscore_demo_runs_its_own_sheet_whatever_the_users_sheet_lists(tmp_path, monkeypatch):
    """A user who replaced config/submissions.tsv with their own rows can still run make mrscore-demo: its configs
    name their own sheet (the example's rows), so demo_cxr is a dataset of the run."""
    work = make_workdir(tmp_path / "w")
    own = work / "data/mine.json"
    own.parent.mkdir()
    own.write_text((work / "example/demo_cxr/careful.json").read_text())
    (work / "config/submissions.tsv").write_text("model\tdataset\tpath\treference_path\tsplit\n"
                                                 "mine\tmy_ct\t../data/mine.json\t\t\n")
    monkeypatch.chdir(work)
    config = read_config([work / "config/config.yaml", work / "config/mrscore-demo.yaml"])
    plan = Plan.load(config, base_dir=work)
    assert {d for d, _ in plan.submissions} == {"demo_cxr", "demo_clinic"} and plan.mrscore.demo_models
    stage2 = yaml.safe_load((work / "config/mrscore-demo-use.yaml").read_text())
    assert stage2["submissions"] == config["submissions"] == "config/mrscore-demo.tsv"


def test_a_memoised_config_check_gives_the_checked_config_and_refuses_what_the_schema_refuses(tmp_path, monkeypatch):
    """validate_config's memo (the Snakefile's, .snakemake/radrank/config.json): the same config again is the
    config the schema check gives, without running it; any other config, valid or not, is checked."""
    import copy
    import datetime
    import json

    from radrank import workflow
    from radrank.workflow import validate_config

    base = {"submissions": "s.tsv", "metrics": ["bleu2", "rouge"], "bootstrap": {"n": 1.0e3, "seed": 7}}
    checked = validate_config(copy.deepcopy(base))  # the reference: no memo
    memo = tmp_path / "memo" / "config.json"
    assert validate_config(copy.deepcopy(base), memo=memo) == checked and memo.is_file()

    def no_check(config, source):
        raise AssertionError("the schema check ran")

    real_check = workflow._validate_against_schema
    monkeypatch.setattr(workflow, "_validate_against_schema", no_check)
    again = validate_config(copy.deepcopy(base), memo=memo)
    # the same values and types (json tells 1000 from 1000.0), defaults included
    assert json.dumps(again, sort_keys=True) == json.dumps(checked, sort_keys=True)
    assert type(again["bootstrap"]["n"]) is int and "empty_hypothesis" in again
    for other in ({**base, "bootstrap": {"n": 1.0e3, "seed": 8}},  # another value: checked
                  {**base, "run_date": datetime.date(2026, 1, 1)}):  # no memo for what JSON cannot give back
        with pytest.raises(AssertionError, match="the schema check ran"):
            validate_config(copy.deepcopy(other), memo=memo)
    monkeypatch.setattr(workflow, "_validate_against_schema", real_check)
    with pytest.raises(ConfigError, match="-5"):
        validate_config({**base, "bootstrap": {"n": -5}}, memo=memo)
    memo.write_text("{cut short")
    assert validate_config(copy.deepcopy(base), memo=memo) == checked
