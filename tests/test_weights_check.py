"""Settings and weights are checked once, when the workflow loads (radrank.workflow.Plan): an unknown or
ill-typed setting, or a model the run needs and does not have, is one clear error naming the config key,
before any environment is built or job started. The top-level `trust_remote_code` list is the only switch
for remote code, and the Plan never changes the config it is given."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from _workflow import make_workdir
from radrank import metrics
from radrank.errors import ConfigError, MissingWeightsError
from radrank.runtime import available
from radrank.workflow import WEIGHTS_CHECK_ENV, Plan

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def hub(tmp_path, monkeypatch):
    """An empty Hugging Face cache; ``add(repo, files)`` puts a snapshot of ``repo`` in it."""
    cache = tmp_path / "hub"
    cache.mkdir()
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv(WEIGHTS_CHECK_ENV, raising=False)

    def add(repo: str, files=("config.json", "model.safetensors"), commit="0123abcd"):
        root = cache / ("models--" + repo.replace("/", "--"))
        (root / "refs").mkdir(parents=True, exist_ok=True)
        (root / "refs/main").write_text(commit)
        for name in files:
            f = root / "snapshots" / commit / name
            f.parent.mkdir(parents=True, exist_ok=True)
            f.write_text("{}")

    return add


def plan_config(**overrides):
    config = yaml.safe_load((REPO / "config/config.yaml").read_text())
    config.update(submissions=str(REPO / "config/submissions.tsv"), models=None, trust_remote_code=[],
                  metric_settings={}, splits=["findings", "reports"], vqa_metrics=["vqa"], shards={},
                  generation=[], metaeval={}, ref_section={"findings": "findings", "reports": "full"},
                  empty_hypothesis="score", max_report_chars=100000,
                  bootstrap={"n": 10, "seed": 0, "level": 0.95},
                  leaderboard={"rank_by": "radcliq_v1", "fallback_rank_by": "bleu2", "vqa_rank_by": "vqa_token_f1",
                               "decimals": 3}, report={"cases": 5})
    config.update(overrides)
    return config


def problems(metric: str, settings: dict | None = None) -> list[str]:
    """The load-time check's messages for one metric's weights (what Plan.check_weights lists)."""
    m = metrics.get(metric)
    return [str(ref.missing(why)) for ref in m.weights(m.settings(settings or {})) if (why := available(ref))]


# --- settings: checked at load, naming the key -------------------------------------------------------


@pytest.mark.parametrize("metric_settings, key, what", [
    ({"rouge": {"use_stemer": False}}, "metric_settings.rouge.use_stemer", "no such setting"),
    ({"bertscore": {"idf": "yes please"}}, "metric_settings.bertscore.idf", "expected true or false"),
    ({"bertscore": {"batch_size": 0}}, "metric_settings.bertscore.batch_size", "below the minimum 1"),
    ({"bertscore": {"modle": "x"}}, "metric_settings.bertscore.modle", "did you mean model"),
    ({"green": {"backend": "vlm"}}, "metric_settings.green.backend", "'hf' or 'vllm'"),
    ({"bertscore": {"device": "gpu"}}, "metric_settings.bertscore.device", "is not a device"),
])
def test_a_bad_setting_fails_when_the_plan_is_built_naming_the_key(metric_settings, key, what):
    names = ["bleu2", "bleu4", "rouge", *[m for m in metric_settings if m not in ("rouge",)]]
    with pytest.raises(ConfigError) as info:
        Plan(plan_config(metrics=names, metric_settings=metric_settings), base_dir=REPO)
    assert key in str(info.value) and what in str(info.value), str(info.value)


def test_every_metric_settings_are_built_once_with_the_defaults_of_their_class():
    plan = Plan(plan_config(metrics=["bleu2", "bertscore"], metric_settings={"bertscore": {"idf": True}}), REPO)
    s = plan.settings_of("bertscore")
    assert s.idf is True and s.model == "distilroberta-base" and s.batch_size == 128
    assert plan.identity_of("bertscore")["settings"] == s.identity() and "batch_size" not in s.identity()


def test_speed_settings_are_not_in_a_rules_identity():
    base = Plan(plan_config(metrics=["bertscore"]), REPO).identity_of("bertscore")
    faster = Plan(plan_config(metrics=["bertscore"],
                              metric_settings={"bertscore": {"batch_size": 512, "device": "cuda:1"}}), REPO)
    assert faster.identity_of("bertscore") == base
    idf = Plan(plan_config(metrics=["bertscore"], metric_settings={"bertscore": {"idf": True}}), REPO)
    assert idf.identity_of("bertscore") != base


def test_the_plan_never_changes_the_config_it_is_given():
    config = plan_config(metrics=["bleu2", "green", "crimson"], trust_remote_code=["org/judge"])
    before = copy.deepcopy(config)
    Plan(config, base_dir=REPO)
    assert config == before


# --- weights: what each metric loads, looked for before anything starts ----------------------------------


def test_a_cached_or_local_model_passes_and_a_missing_one_names_model_and_config_key(hub, tmp_path):
    local = tmp_path / "bert-local"
    local.mkdir()
    (local / "config.json").write_text("{}")
    (local / "model.safetensors").write_text("")
    hub("distilroberta-base")
    assert problems("bertscore") == []  # the default id, from the cache
    assert problems("bertscore", {"model": str(local)}) == []
    (local / "model.safetensors").unlink()
    assert "has no weight file" in problems("bertscore", {"model": str(local)})[0]
    missing = problems("bertscore", {"model": "org/not-downloaded"})
    assert len(missing) == 1
    assert "metric 'bertscore': model 'org/not-downloaded' is not available locally" in missing[0]
    assert "metric_settings.bertscore.model" in missing[0]
    assert "hf download org/not-downloaded" in missing[0] and "huggingface-cli download" in missing[0]
    semb = problems("semb", {"checkpoint": str(tmp_path / "nowhere")})
    assert len(semb) == 2  # the checkpoint, and the (uncached) tokenizer
    assert "metric_settings.semb.checkpoint" in semb[0] and "no such local path" in semb[0]
    assert "metric_settings.semb.tokenizer" in semb[1]


def test_files_inside_a_repo_partial_downloads_and_revisions(hub, tmp_path):
    hub("bert-base-uncased", files=("config.json", "vocab.txt"))
    hub("StanfordAIMI/RRG_scorers", files=("radgraph.tar.gz",))
    missing = problems("semb")  # chexbert.pth is not in the cached snapshot
    assert len(missing) == 1 and "chexbert.pth of it is not in the Hugging Face cache" in missing[0]
    local = tmp_path / "ckpt"
    local.mkdir()
    assert "does not exist" in problems("chexbert", {"checkpoint": str(local)})[0]
    hub("org/judge", files=("tokenizer.json",))  # a partial download: no config, no weights
    assert len(problems("green", {"model": "org/judge"})) == 1
    hub("org/judge2")
    assert problems("green", {"model": "org/judge2"}) == []
    assert len(problems("green", {"model": "org/judge2", "revision": "v2"})) == 1


def test_local_radgraph_models_in_every_layout_the_metric_loads(hub, tmp_path):
    """An unpacked model folder, a folder holding <model_type>/ or <model_type>.tar.gz, or the archive itself —
    judged in the core environment by the metric's own check, as the job would."""
    import tarfile

    unpacked = tmp_path / "unpacked"
    (unpacked / "vocabulary").mkdir(parents=True)
    (unpacked / "config.json").write_text("{}")
    (unpacked / "weights.th").write_bytes(b"")
    holder = tmp_path / "holder"
    holder.mkdir()
    (holder / "radgraph").symlink_to(unpacked, target_is_directory=True)
    archive = tmp_path / "radgraph.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(unpacked, arcname="radgraph")
    for model in (unpacked, holder, archive, tmp_path):  # tmp_path holds radgraph.tar.gz
        assert problems("radgraph", {"model": str(model), "encoder": str(unpacked)}) == [], model
    empty = tmp_path / "empty"
    empty.mkdir()
    found = problems("radgraph", {"model": str(empty), "encoder": str(unpacked)})
    assert len(found) == 1 and "metric_settings.radgraph.model" in found[0] and str(empty) in found[0]


def test_backends_decide_what_is_loaded(hub):
    """An endpoint loads no weights; a local judge does, on the hf backend and on vLLM alike."""
    assert problems("crimson", {"backend": "openai"}) == [] and problems("mrscore_rubric") == []
    for backend in ("hf", "vllm"):
        found = problems("crimson", {"backend": backend, "model": "org/absent-crimson"})
        assert len(found) == 1 and "metric_settings.crimson.model" in found[0], backend
    assert len(problems("mrscore_rubric", {"backend": "local", "model": "org/judge"})) == 1
    assert len(problems("mrscore_rubric", {"backend": "vllm", "model": "org/judge"})) == 1


def test_crimson_on_vllm_without_weights_fails_when_the_plan_loads(hub):
    config = plan_config(metrics=["bleu2", "crimson"], metric_settings={"crimson": {"backend": "vllm"}})
    with pytest.raises(MissingWeightsError) as info:
        Plan.load(config, base_dir=REPO)
    assert "metric 'crimson': model 'rajpurkarlab/medgemma-4b-it-crimson'" in str(info.value)
    assert "metric_settings.crimson.model" in str(info.value)


def test_the_plan_checks_what_the_metrics_declare_and_lists_every_missing_model_at_once(hub, monkeypatch):
    config = plan_config(metrics=["bleu2", "bertscore", "green"], metric_settings={"green": {"model": "org/green"}})
    plan = Plan(config, base_dir=REPO)
    declared = [r for m in ("bertscore", "green") for r in metrics.get(m).weights(plan.settings_of(m))]
    assert plan.weight_refs() == declared  # the same calls the jobs make
    with pytest.raises(MissingWeightsError) as info:
        plan.check_weights()
    text = str(info.value)
    assert text.startswith("2 model(s) the config needs are not available locally")
    assert "metric_settings.bertscore.model" in text and "metric_settings.green.model" in text
    monkeypatch.setenv(WEIGHTS_CHECK_ENV, "off")
    plan.check_weights()


def test_backbone_weights_are_checked_too(hub, tmp_path):
    root = tmp_path / "iu"
    root.mkdir()
    entry = {"model": "mg", "dataset": "iu", "adapter": "iu_xray", "root": str(root), "generator": "medgemma"}
    config = plan_config(generation=[entry])
    with pytest.raises(MissingWeightsError) as info:
        Plan.load(config, base_dir=REPO)
    assert "backbone 'medgemma'" in str(info.value) and "google/medgemma-4b-it" in str(info.value)
    hub("google/medgemma-4b-it")
    Plan.load(config, base_dir=REPO)
    own = {**entry, "model": "x", "generator": "my_pkg.mod:generate"}  # a user's callable: its own business
    Plan.load(plan_config(generation=[own]), base_dir=REPO)


def test_the_check_imports_no_model_library_and_opens_no_connection(tmp_path):
    """The full panel's check in a fresh process: torch, transformers and huggingface_hub stay unimported,
    and no socket is opened (the check reads local paths and the cache's layout only)."""
    code = (
        "import json, socket, sys\n"
        "def refuse(*a, **k):\n"
        "    raise AssertionError('the weights check opened a connection')\n"
        "socket.socket.connect = refuse\n"
        "from radrank import metrics\n"
        "from radrank.runtime import available\n"
        "found = 0\n"
        "for name in metrics.names():\n"
        "    m = metrics.get(name)\n"
        "    for ref in m.weights(m.settings()):\n"
        "        found += available(ref) is not None\n"
        "heavy = [x for x in ('torch', 'transformers', 'huggingface_hub', 'vllm') if x in sys.modules]\n"
        "print(json.dumps({'missing': found, 'heavy': heavy}))\n"
    )
    env = {**os.environ, "HF_HOME": str(tmp_path), "PYTHONPATH": str(REPO / "src")}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["heavy"] == [] and result["missing"] >= 10


@pytest.mark.workflow
def test_snakemake_stops_at_load_with_the_one_message_and_no_traceback(hub, tmp_path):
    work = make_workdir(tmp_path / "wd", metrics=["bleu2", "bertscore"],
                        metric_settings={"bertscore": {"model": "org/absent-bert", "idf": "yes please"}})
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", "-n"], cwd=work,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"}, capture_output=True, text=True)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "radrank: config metric_settings.bertscore.idf: 'yes please' is not allowed" in out, out
    assert "Traceback" not in out and 'File "' not in out, out


# --- trust_remote_code: one list ------------------------------------------------------------------------


def test_top_level_list_reaches_every_judge_and_nothing_else():
    plan = Plan(plan_config(metrics=["bleu2", "green", "crimson"], trust_remote_code=["org/judge"]), REPO)
    assert plan.settings_of("green").trust_remote_code == ("org/judge",)
    assert plan.settings_of("crimson").trust_remote_code == ("org/judge",)
    assert not hasattr(plan.settings_of("bleu2"), "trust_remote_code")
    assert Plan(plan_config(metrics=["green"]), REPO).settings_of("green").trust_remote_code == ()


def test_the_settings_hold_the_yes_no_for_their_own_model_in_the_identity():
    plan = Plan(plan_config(metrics=["green"], trust_remote_code=["org/judge", "org/other"],
                            metric_settings={"green": {"model": "org/judge"}}), REPO)
    assert plan.identity_of("green")["settings"]["trust_remote_code"] is True
    plan = Plan(plan_config(metrics=["green"], trust_remote_code=["org/other"],
                            metric_settings={"green": {"model": "org/judge"}}), REPO)
    assert plan.identity_of("green")["settings"]["trust_remote_code"] is False


def test_bertscore_num_layers_null_without_a_default_is_refused_at_load():
    """bert-score's default layer is known for distilroberta-base only: null for another model fails when the
    workflow loads, naming the key and the model (not in the job)."""
    Plan(plan_config(metrics=["bertscore"], metric_settings={"bertscore": {"num_layers": None}}), base_dir=REPO)
    config = plan_config(metrics=["bertscore"], metric_settings={"bertscore": {"num_layers": None,
                                                                               "model": "org/other-encoder"}})
    with pytest.raises(ConfigError, match=r"metric_settings\.bertscore\.num_layers: .*'org/other-encoder'"):
        Plan(config, base_dir=REPO)


def test_a_per_metric_trust_remote_code_is_refused():
    config = plan_config(metrics=["green"], metric_settings={"green": {"trust_remote_code": ["org/x"]}})
    with pytest.raises(ConfigError, match=r"metric_settings\.green\.trust_remote_code: remote code is allowed "
                                          r"in one place only, the top-level list `trust_remote_code`"):
        Plan(config, base_dir=REPO)
