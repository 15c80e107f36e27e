"""MRScore training's data stages (radrank.mrscore_train) in the core environment: references, tiered
candidates and their grades through scripted judges, preference pairs, the config section, and the folder
the mrscore metric loads. The training itself runs in tests/envs/train."""

from __future__ import annotations

import itertools
import json
import random

import pandas as pd
import pytest
from _judges import Scripted

from radrank.errors import ConfigError, InputError
from radrank.metrics import mrscore_rubric as rubric
from radrank.mrscore_train import candidates, pairs, references
from radrank.mrscore_train.config import DEFAULT_TIERS, TrainingConfig, read_tiers
from radrank.runtime import Runtime


def _verdict(**errors) -> str:
    return json.dumps({k: int(errors.get(k, 0)) for k in rubric.KEYS} | {"explanation": "why " + "-".join(errors)})


# --- references -----------------------------------------------------------------------------------------------


def test_references_from_json_csv_and_report_sections(tmp_path):
    js = tmp_path / "sub.json"
    js.write_text(json.dumps({
        "a": {"model_prediction": "x", "section_findings": "Clear lungs.", "section_impression": "Normal."},
        "b": {"model_prediction": "x", "section_findings": "Effusion.", "section_impression": None},
        "c": {"model_prediction": "x", "report": "FINDINGS: Small effusion.\nIMPRESSION: Effusion."},
    }))
    csv = tmp_path / "refs.csv"
    csv.write_text("case_id,report\nr1,\"FINDINGS: Heart normal. IMPRESSION: No acute process.\"\n"
                   "r2,Just one unlabelled sentence.\n")
    refs, drops = references.read_references([("ds", str(js)), (str(csv), str(csv))])
    assert refs["reference_id"].tolist() == ["ds:a", "ds:c", f"{csv}:r1"]
    assert refs.loc[1, "findings"] == "Small effusion." and refs.loc[1, "impression"] == "Effusion."
    assert refs.loc[0, "reference"] == "Findings: Clear lungs. Impression: Normal."
    assert drops["reference_id"].tolist() == ["ds:b", f"{csv}:r2"]
    assert "no impression" in drops.loc[0, "reason"] and drops.loc[0, "row"] == "b"
    assert "no findings and no impression" in drops.loc[1, "reason"] and drops.loc[1, "row"] == "3"


def test_reference_files_that_cannot_be_used_name_file_row_and_field(tmp_path):
    dup = tmp_path / "dup.csv"
    dup.write_text("reference_id,findings,impression\nx,a,b\nx,c,d\n")
    with pytest.raises(InputError, match=r"dup.csv, row 3: reference id 'x' appears twice \(also row 2\)"):
        references.read_references([("d", str(dup))])
    noid = tmp_path / "noid.csv"
    noid.write_text("findings,impression\na,b\n")
    with pytest.raises(InputError, match="noid.csv: no id column"):
        references.read_references([("d", str(noid))])
    nocol = tmp_path / "nocol.csv"
    nocol.write_text("case_id,text\na,b\n")
    with pytest.raises(InputError, match="needs columns findings and impression, or a report column"):
        references.read_references([("d", str(nocol))])
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"a": {"section_findings": 3, "section_impression": "x"}}))
    with pytest.raises(InputError, match="row a, field 'section_findings': must be text"):
        references.read_references([("d", str(bad))])


def test_reference_sample_is_seeded_and_keeps_order():
    refs = pd.DataFrame({"reference_id": [f"r{i}" for i in range(50)]})
    a, b = references.sample(refs, 10, 3), references.sample(refs, 10, 3)
    assert a.equals(b) and len(a) == 10
    assert a["reference_id"].tolist() == sorted(a["reference_id"], key=lambda r: int(r[1:]))
    assert not a.equals(references.sample(refs, 10, 4))
    assert len(references.sample(refs, None, 0)) == 50


# --- tiers ----------------------------------------------------------------------------------------------------


def test_tier_bounds_and_config_errors():
    low, mid, high = read_tiers(DEFAULT_TIERS)
    assert mid.holds(40, False) and not low.holds(40, False) and high.holds(100, True) and not mid.holds(70, False)
    reachable = {100 - sum(c) for n in range(8) for c in itertools.combinations([30, 20, 20, 10, 10, 5, 5], n)}
    assert sum(t.holds(s, i == 2) for s in reachable for i, t in enumerate((low, mid, high))) == len(reachable)
    for bad, msg in (([[0, 40], [30, 70]], "without overlap"), ([[40, 20]], "low < high"), ([[0, 101]], "<= 100"),
                     ([[0]], "not a \\[low, high\\] pair"), ([], "non-empty")):
        with pytest.raises(ConfigError, match=msg):
            read_tiers(bad)


# --- writing and grading --------------------------------------------------------------------------------------


def _refs():
    return pd.DataFrame({"reference_id": ["d:1", "d:2"], "reference": [
        "Findings: Right effusion. Impression: Right effusion.", "Findings: Clear. Impression: Normal."]})


def test_writer_prompt_names_the_tier_and_every_criterion():
    p = candidates.writer_prompt("Findings: X. Impression: Y.", 40, 70)
    assert "40 to 70 out of 100" in p and "between 30 and 60 points" in p and "Findings: X. Impression: Y." in p
    assert all(title in p for _, _, title, _ in rubric.CRITERIA) and "loses 30 points" in p
    assert "at most 30 points" in candidates.writer_prompt("r", 70, 100)
    assert "at least 60 points" in candidates.writer_prompt("r", 0, 40)


def test_candidates_are_written_per_tier_with_seeds_and_empty_ones_listed(tmp_path):
    tiers = read_tiers(DEFAULT_TIERS)

    def answer(prompt, params):
        if "Clear." in prompt and "0 to 40" in prompt:
            return "   "  # empty, also on the retry
        return f"```\nReport: cand seed={params.get('seed')} t={params['temperature']}\n```"

    gen = Scripted(answer)
    s = candidates.CandidateSettings.build({"candidates_per_tier": 2, "temperature": 0.7, "seed": 5,
                                            "cache_dir": str(tmp_path)})
    out, drops = candidates.write_candidates(_refs(), tiers, s, Runtime(), supplied=gen)
    assert len(out) == 2 * 3 * 2 - 2 and len(drops) == 2
    assert set(out["candidate"]) == {"cand seed=5 t=0.7", "cand seed=6 t=0.7"}  # fence and label taken off
    assert drops["reason"].str.contains("empty answer").all() and set(drops["tier"]) == {"0-40"}
    assert out["candidate_id"].is_unique and out.iloc[0]["candidate_id"] == "d:1|0-40|0"
    with pytest.raises(ConfigError, match="temperature: 0 writes the same candidate 2 times"):
        TrainingConfig.from_config({"mrscore_training": {"references": [{"path": "x.csv"}],
                                                         "candidates": {"candidates_per_tier": 2}}})


def test_grades_recompute_the_total_and_drop_unparsed_and_out_of_tier(tmp_path, caplog):
    tiers = read_tiers(DEFAULT_TIERS)
    cands = pd.DataFrame([
        {"candidate_id": "d:1|70-100|0", "reference_id": "d:1", "tier": "70-100", "tier_low": 70.0,
         "tier_high": 100.0, "k": 0, "candidate": "good"},
        {"candidate_id": "d:1|0-40|0", "reference_id": "d:1", "tier": "0-40", "tier_low": 0.0, "tier_high": 40.0,
         "k": 0, "candidate": "claims bad but is fine"},
        {"candidate_id": "d:2|0-40|0", "reference_id": "d:2", "tier": "0-40", "tier_low": 0.0, "tier_high": 40.0,
         "k": 0, "candidate": "bad"},
        {"candidate_id": "d:2|40-70|0", "reference_id": "d:2", "tier": "40-70", "tier_low": 40.0,
         "tier_high": 70.0, "k": 0, "candidate": "garbled"},
    ])

    def answer(prompt, params):
        body = prompt.split("CANDIDATE report:\n", 1)[1]
        if body.startswith("good"):  # a stated score the model made up is ignored: the flags decide
            return json.dumps({**json.loads(_verdict(grammar=1)), "score": 10})
        if body.startswith("claims bad"):
            return _verdict(terminology=1)
        if body.startswith("bad"):
            return _verdict(impression_consistency=1, impression_organ=1, lesion_description=1, completeness=1)
        return "no verdict at all"

    s = rubric.RubricSettings.build({"cache_dir": str(tmp_path)})
    graded, drops = candidates.grade_candidates(cands, _refs(), tiers, s, Runtime(supplied={
        "mrscore_rubric": Scripted(answer)}))
    assert graded["candidate_id"].tolist() == ["d:1|70-100|0", "d:2|0-40|0"]
    assert graded["score"].tolist() == [95.0, 20.0]
    assert graded.loc[0, "mrscore_rubric_grammar"] == 1 and graded.loc[0, "explanation"] == "why grammar"
    reasons = dict(zip(drops["candidate_id"], drops["reason"]))
    assert reasons["d:1|0-40|0"] == "graded 95, outside its tier 0-40"
    assert "no JSON object" in reasons["d:2|40-70|0"] and set(drops["stage"]) == {"grade"}
    empty = [r.getMessage() for r in caplog.records if "kept no candidate" in r.getMessage()]
    assert empty == ["mrscore_training: tier 40-70 kept no candidate (1 written; every one is listed in the drop "
                     "table with why)"]


# --- pairs ----------------------------------------------------------------------------------------------------


def _graded(seed=0, n_refs=12, per_ref=4):
    rng = random.Random(seed)
    rows = []
    for r in range(n_refs):
        for c in range(rng.randint(1, per_ref)):
            rows.append({"candidate_id": f"r{r}|c{c}", "reference_id": f"r{r}", "candidate": f"text {r} {c}",
                         "score": float(rng.choice([100, 95, 80, 70, 60, 45, 40, 30, 20, 0]))})
    return pd.DataFrame(rows)


@pytest.mark.parametrize("gap", [0.0, 15.0])
def test_pairs_equal_a_brute_force_enumeration(gap):
    graded = _graded()
    refs = pd.DataFrame({"reference_id": graded["reference_id"].unique(), "reference": "ref"})
    got = pairs.build_pairs(graded, refs, min_gap=gap, margin_scale=20.0, validation_fraction=0.25, seed=1)
    expected = {}
    for a, b in itertools.permutations(graded.to_dict("records"), 2):
        if a["reference_id"] == b["reference_id"] and a["score"] > b["score"] + gap:
            expected[a["candidate_id"], b["candidate_id"]] = (a["score"] - b["score"]) / 20.0
    assert dict(zip(zip(got["chosen_id"], got["rejected_id"]), got["margin"])) == pytest.approx(expected)
    assert len(got) == len(expected) and (got["score_chosen"] > got["score_rejected"] + gap).all()


def test_split_is_by_reference_and_seeded():
    graded = _graded(seed=3, n_refs=40)
    refs = pd.DataFrame({"reference_id": graded["reference_id"].unique(), "reference": "ref"})
    a = pairs.build_pairs(graded, refs, min_gap=0, margin_scale=20, validation_fraction=0.2, seed=7)
    sides = a.groupby("reference_id")["split"].nunique()
    assert (sides == 1).all() and set(a["split"]) == {"train", "validation"}
    with_pairs = a["reference_id"].unique()
    held = pairs.validation_references(with_pairs, 0.2, 7)
    assert len(held) == round(0.2 * len(with_pairs)) and set(a.loc[a["split"] == "validation", "reference_id"]) == held
    assert a.equals(pairs.build_pairs(graded, refs, min_gap=0, margin_scale=20, validation_fraction=0.2, seed=7))
    assert held != pairs.validation_references(graded["reference_id"], 0.2, 8)
    assert pairs.validation_references(["a", "b"], 0.01, 0) and not pairs.validation_references(["a", "b"], 0.0, 0)


# --- the trained folder the mrscore metric loads ------------------------------------------------------------


def _trained_folder(tmp_path, template="Ref {reference} Cand {hypothesis}"):
    folder = tmp_path / "model"
    (folder / "adapter").mkdir(parents=True)
    (folder / "adapter" / "adapter_config.json").write_text("{}")
    (folder / "adapter" / "adapter_model.safetensors").write_bytes(b"lora")
    (folder / "reward_head.safetensors").write_bytes(b"head")
    (folder / "mrscore.json").write_text(json.dumps({
        "format": "radrank-mrscore-1", "base_model": "org/base", "base_revision": "abc",
        "prompt": {"prompt_template": template, "chat_template": False, "max_report_words": 50, "max_length": 256},
        "adapter": "adapter", "head": "reward_head.safetensors"}))
    return folder


def test_a_trained_folder_fills_base_adapter_head_and_prompt(tmp_path):
    from radrank import metrics

    folder = _trained_folder(tmp_path)
    metric = metrics.get("mrscore")
    s = metric.settings({"model": str(folder)})
    assert (s.model, s.revision, s.prompt_template, s.chat_template, s.max_length) == (
        "org/base", "abc", "Ref {reference} Cand {hypothesis}", False, 256)
    assert s.adapter == str(folder / "adapter") and s.head == str(folder / "reward_head.safetensors")
    assert s.trained.startswith(f"{folder}@")
    before = metric.identity(s)
    (folder / "reward_head.safetensors").write_bytes(b"head, retrained")
    assert metric.identity(metric.settings({"model": str(folder)})) != before  # retraining re-scores
    assert metric.settings({"model": str(folder), "max_length": 256}).max_length == 256
    for values, msg in (({"adapter": "x"}, r"mrscore.adapter: .* names its own"),
                        ({"max_length": 512}, "was trained with max_length = 256"),
                        ({"trained": "x"}, "radrank sets it")):
        with pytest.raises(ConfigError, match=msg):
            metric.settings({"model": str(folder), **values})
    (folder / "reward_head.safetensors").unlink()
    with pytest.raises(ConfigError, match="is incomplete: .*reward_head.safetensors"):
        metric.settings({"model": str(folder)})


# --- the config section ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("section, msg", [
    ({"candidates": {"modle": "x"}}, r"mrscore_training.candidates.modle: no such setting \(did you mean model\?\)"),
    ({"rubric": {"verdict": "constrained"}}, "rubric.verdict: constrained verdicts need the local backend"),
    ({"prompt": {"model": "x"}}, "mrscore_training.prompt.model: not a prompt setting"),
    ({"demo_models": True, "train": {"base_model": "x"}}, "train.base_model: demo_models builds that model"),
    ({"pairs": {"margin_scale": 0}}, "pairs.margin_scale: 0 is below the minimum"),
    ({"train": {"trust_remote_code": ["x"]}}, "the top-level list"),
    ({"references": [{"dataset": "elsewhere"}]}, r"references\[0\]: dataset 'elsewhere' is not a dataset of the run"),
    ({"references": [{"file": "x"}]}, r"references\[0\]: .* must be \{dataset: <name>\} or \{path: <file>\}"),
    ({"name": "a b"}, "name: 'a b' must be letters"),
])
def test_config_errors_name_the_key(section, msg):
    values = {"references": [{"path": "refs.csv"}], **section}
    with pytest.raises(ConfigError, match=msg):
        TrainingConfig.from_config({"mrscore_training": values}, datasets={"demo_cxr"})


def test_config_identity_per_stage_and_weight_refs():
    cfg = TrainingConfig.from_config({"mrscore_training": {"references": [{"dataset": "demo_cxr"}],
                                                           "rubric": {"backend": "local", "model": "org/judge"}}},
                                     datasets={"demo_cxr"})
    keys = [r.key for r in cfg.weight_refs()]
    assert keys == ["mrscore_training.candidates.model", "mrscore_training.rubric.model",
                    "mrscore_training.train.base_model"]
    other = TrainingConfig.from_config({"mrscore_training": {
        "references": [{"dataset": "demo_cxr"}], "rubric": {"backend": "local", "model": "org/judge",
                                                            "batch_size": 3},
        "pairs": {"margin_scale": 10}}}, datasets={"demo_cxr"})
    assert cfg.identity("rubric") == other.identity("rubric")  # a speed setting changes no stage
    assert cfg.identity("pairs") != other.identity("pairs") and cfg.identity("train") == other.identity("train")
    demo = TrainingConfig.from_config({"mrscore_training": {"references": [{"dataset": "demo_cxr"}],
                                                            "demo_models": True, "name": "d"}})
    assert demo.weight_refs() == [] and demo.rubric.verdict == "constrained"
    assert demo.train.base_model == "results/mrscore/d/demo-models/base"


def test_an_unrelated_trust_remote_code_id_changes_no_stage():
    """Each stage holds whether *its* model may run remote code (a yes/no), never the top-level list."""
    section = {"references": [{"dataset": "demo_cxr"}], "rubric": {"backend": "local", "model": "org/judge"}}

    def identities(allow):
        cfg = TrainingConfig.from_config({"mrscore_training": section, "trust_remote_code": allow},
                                         datasets={"demo_cxr"})
        return {stage: cfg.identity(stage) for stage in ("candidates", "rubric", "train")}

    base = identities([])
    assert identities(["someone/unrelated"]) == base
    allowed = identities(["org/judge", "someone/unrelated"])
    assert allowed["rubric"] != base["rubric"] and allowed["train"] == base["train"]
    base_model = TrainingConfig.from_config({"mrscore_training": section}, datasets={"demo_cxr"}).train.base_model
    assert identities([base_model])["train"]["train"]["trust_remote_code"] is True
    assert base["train"]["train"]["trust_remote_code"] is False


def test_the_workflow_looks_for_every_training_model_at_load(monkeypatch):
    """A missing writer, judge or base model stops the workflow when it loads, each named by its key; the
    target's environments are the judge engines' and train's."""
    from radrank.errors import MissingWeightsError
    from radrank.workflow import Plan, read_config

    monkeypatch.delenv("RADRANK_WEIGHTS_CHECK", raising=False)
    config = read_config(["config/config.yaml"])
    config["mrscore_training"] = {"references": [{"dataset": "demo_cxr"}],
                                  "candidates": {"model": "/nowhere/writer"},
                                  "rubric": {"backend": "vllm", "model": "/nowhere/judge"},
                                  "train": {"base_model": "/nowhere/base"}}
    with pytest.raises(MissingWeightsError) as e:
        Plan.load(config)
    for key in ("candidates.model", "rubric.model", "train.base_model"):
        assert f"mrscore_training.{key}" in str(e.value)
    plan = Plan(config)
    assert plan.mrscore_envs() == ["judge", "train", "vllm"]
    assert plan.mrscore_sources() == ["example/demo_cxr/careful.json"]
    assert plan.mrscore_targets()[0] == "results/mrscore/mrscore/model/mrscore.json"
