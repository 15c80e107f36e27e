"""What plans a rerun, through the Plan (radrank.workflow.Plan): a rule's params (what Snakemake compares to
decide a rerun) hold only what changes outputs. Adding an unrelated id to the top-level `trust_remote_code`
list, or changing a device, batch size or vLLM placement, leaves every score job's and generation job's
params as they were — Snakemake plans no job; adding the model a job loads to that list, or changing a
generation parameter, changes that job's params only."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from radrank import backbones, jobs, metrics
from radrank.settings import field_specs
from radrank.workflow import Plan, validate_config

REPO = Path(__file__).resolve().parents[1]
JUDGE = "org/the-judge"  # the model every local judge metric is pointed at
MAIRA = "microsoft/maira-2"


def base_config(tmp_path) -> dict:
    config = yaml.safe_load((REPO / "config/config.yaml").read_text())
    judges = {name: {"model": JUDGE} for name in metrics.names()
              if "model" in field_specs(metrics.get(name).Settings) and "trust_remote_code" in
              field_specs(metrics.get(name).Settings)}
    config.update(
        submissions=str(REPO / "config/submissions.tsv"), models=None, trust_remote_code=[MAIRA],
        metrics=[m for m in metrics.names() if m != "vqa"], vqa_metrics=["vqa"], splits=["findings"], shards={},
        metric_settings=judges, metaeval={}, ref_section={"findings": "findings"},
        generation=[
            {"model": "mg", "dataset": "iu_gen", "adapter": "iu_xray", "root": str(tmp_path), "generator": "medgemma",
             "settings": {"max_new_tokens": 100}, "shards": 2},
            {"model": "mg_vllm", "dataset": "iu_gen", "adapter": "iu_xray", "root": str(tmp_path),
             "generator": "medgemma", "settings": {"backend": "vllm"}},
            {"model": "maira", "dataset": "iu_gen", "adapter": "iu_xray", "root": str(tmp_path),
             "generator": "maira2", "settings": {}},
            {"model": "own", "dataset": "iu_gen", "adapter": "iu_xray", "root": str(tmp_path),
             "generator": "mypackage.gen:generate", "settings": {"temperature": 0.0}},
        ])
    return config


def params_of(config) -> dict:
    """Every score and generation job's params, by rule / output (and those of the jobs downstream: ingest,
    bootstrap, leaderboard, report)."""
    plan = Plan(validate_config(copy.deepcopy(config)), REPO)
    out = {"report": plan.report_job().params()}
    for dataset, split in plan.groups():
        out[f"bootstrap:{dataset}/{split}"] = plan.bootstrap_job(dataset, split).params()
        out[f"leaderboard:{dataset}/{split}"] = plan.leaderboard_job(dataset, split).params()
        for model in plan.models_for(dataset, split):
            out[f"ingest:{dataset}/{split}/{model}"] = plan.ingest_job(dataset, split, model).params()
    for rule in plan.score_rules():
        out[rule.name] = plan.score_job(rule).params()
        out[rule.name + ":collect"] = plan.collect_job(rule).params()
    for sub in plan.generations():
        gen = sub.generation
        for split in gen.splits:
            for i in range(gen.shards):
                out[f"generate:{gen.dataset}/{split}/{gen.model}.{i}"] = \
                    plan.generation_job(gen.dataset, split, gen.model, f"{i}-of-{gen.shards}").params()
    return out


@pytest.fixture
def config(tmp_path):
    return base_config(tmp_path)


@pytest.fixture
def before(config):
    out = params_of(config)
    assert any(k.startswith("score_green") for k in out) and any(k.startswith("generate:") for k in out)
    return out


def changed(before: dict, after: dict) -> set:
    assert set(before) == set(after)
    return {k for k in before if before[k] != after[k]}


def test_an_unrelated_trust_remote_code_id_plans_no_job(config, before):
    config["trust_remote_code"] = [*config["trust_remote_code"], "someone/unrelated-model", "/a/local/folder"]
    assert changed(before, params_of(config)) == set()


def test_device_batch_size_and_placement_plan_no_job(config, before):
    for name, values in config["metric_settings"].items():
        specs = field_specs(metrics.get(name).Settings)
        for key, value in (("device", "cpu"), ("batch_size", 1), ("max_num_seqs", 7), ("tensor_parallel_size", 2),
                           ("gpu_memory_utilization", 0.5), ("cache_dir", "/elsewhere"), ("static_cache", False),
                           ("enforce_eager", True)):
            if key in specs and not specs[key].scores:
                values[key] = value
    for name in ("bleu2", "bertscore", "chexbert", "radgraph", "semb"):
        specs = field_specs(metrics.get(name).Settings)
        values = config["metric_settings"].setdefault(name, {})
        values.update({k: v for k, v in (("device", "cpu"), ("batch_size", 3)) if k in specs})
    gens = config["generation"]
    gens[0]["settings"].update(device="cpu", batch_size=2)
    gens[0]["batch_size"] = 5  # samples per generator call
    gens[1]["settings"].update(tensor_parallel_size=2, max_num_seqs=16, gpu_memory_utilization=0.5,
                               enforce_eager=True, cpu_kv_cache_gb=2.0, device="cuda:1")
    gens[2]["settings"].update(device="cpu", batch_size=1)
    gens[3]["batch_size"] = 2
    assert changed(before, params_of(config)) == set()


def test_the_models_own_remote_code_permission_is_in_its_identity(config, before):
    """The yes/no for the model a job loads is in its identity: allowing the judges' model reruns the judges that
    load it, and taking MAIRA-2 off the list reruns its shards only."""
    config["trust_remote_code"] = [JUDGE]
    moved = changed(before, params_of(config))
    judges = {k for k in before if k.startswith("score_") and before[k].get("identity", {}).get("settings", {})
              .get("trust_remote_code") is not None}
    assert judges and {k.split(":")[0] for k in moved if k.startswith("score_")} == {k.split(":")[0] for k in judges}
    assert {k for k in moved if k.startswith("generate:")} == {"generate:iu_gen/findings/maira.0"}
    assert {k for k in moved if not k.startswith(("score_", "generate:"))} == {"report"}  # its config hash
    for rule in judges:
        assert before[rule]["identity"]["settings"]["trust_remote_code"] is False
        assert params_of(config)[rule]["identity"]["settings"]["trust_remote_code"] is True


def test_a_generation_parameter_reruns_that_generation_only(config, before):
    config["generation"][0]["settings"]["max_new_tokens"] = 101
    assert changed(before, params_of(config)) == {"generate:iu_gen/findings/mg.0", "generate:iu_gen/findings/mg.1",
                                                  "report"}
    config["generation"][0]["settings"]["max_new_tokens"] = 100
    config["generation"][3]["settings"]["temperature"] = 0.5  # a callable's settings: all of them count
    assert changed(before, params_of(config)) == {"generate:iu_gen/findings/own.0", "report"}


def test_a_generation_identity_holds_no_placement_and_no_list(config):
    plan = Plan(validate_config(copy.deepcopy(config)), REPO)
    for model in ("mg", "mg_vllm", "maira"):
        identity = plan.generation_job("iu_gen", "findings", model, "0-of-1").params()["identity"]
        generator = config["generation"][[g["model"] for g in config["generation"]].index(model)]["generator"]
        speed = {k for k, spec in field_specs(backbones.get(generator).Settings).items() if not spec.scores}
        assert {"device", "batch_size"} <= speed and not set(identity["settings"]) & speed, model
        assert identity.get("trust_remote_code") in (None, True, False), model
    params = plan.generation_job("iu_gen", "findings", "maira", "0-of-1").params()
    assert {"settings", "trust_remote_code", "batch_size"}.isdisjoint(params)


def test_the_generation_job_reads_its_settings_and_list_from_the_config(config):
    """What the params leave out, the job reads from the config again (and refuses a config that differs from its
    identity, as a score job does)."""
    plan = Plan(validate_config(copy.deepcopy(config)), REPO)
    job = plan.generation_job("iu_gen", "findings", "maira", "0-of-1")
    config["generation"][2]["settings"]["device"] = "cpu"
    config["generation"][2]["batch_size"] = 4
    rebuilt = jobs.Generate.from_params(job.params(), config)
    assert rebuilt.settings.device == "cpu" and rebuilt.batch_size == 4
    assert rebuilt.trust_remote_code == (MAIRA,)
    assert rebuilt.settings == job.settings.replace(device="cpu")
    config["generation"][2]["settings"]["max_new_tokens"] = 7
    with pytest.raises(RuntimeError, match="rerun Snakemake"):
        jobs.Generate.from_params(job.params(), config)
