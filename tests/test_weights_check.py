"""Missing model weights fail when the workflow loads (radrank.models.check_workflow_weights), and the
top-level `trust_remote_code` list is the only switch for remote code."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from _workflow import make_workdir
from radrank import backbones, metrics, models
from radrank.errors import ConfigError, MissingWeightsError
from radrank.workflow import Plan

REPO = Path(__file__).resolve().parents[1]
NO_HF_WEIGHTS = {"mammo_green", "radfact_ct", "temporal"}  # API metrics; stanza resources


@pytest.fixture
def hub(tmp_path, monkeypatch):
    """An empty Hugging Face cache; ``add(repo, files)`` puts a snapshot of ``repo`` in it."""
    cache = tmp_path / "hub"
    cache.mkdir()
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv(models.WEIGHTS_CHECK_ENV, raising=False)

    def add(repo: str, files=("config.json",), commit="0123abcd"):
        root = cache / ("models--" + repo.replace("/", "--"))
        (root / "refs").mkdir(parents=True, exist_ok=True)
        (root / "refs/main").write_text(commit)
        for name in files:
            f = root / "snapshots" / commit / name
            f.parent.mkdir(parents=True, exist_ok=True)
            f.write_text("{}")

    return add


def plan(metric_names, metric_settings=None, generations=()):
    config = {"metric_settings": metric_settings or {}}
    return SimpleNamespace(config=config, _used_metrics=lambda: list(metric_names),
                           generations=lambda: [SimpleNamespace(generation=g) for g in generations])


def test_every_model_metric_and_backbone_is_covered():
    for name in metrics.names():
        spec = metrics.get(name)
        if name in NO_HF_WEIGHTS or spec.env == "core":
            assert name not in models.METRIC_WEIGHTS
            continue
        assert name in models.METRIC_WEIGHTS, f"{name} loads weights: add it to radrank.models.METRIC_WEIGHTS"
        for ws in models.METRIC_WEIGHTS[name]:
            for key in (ws.setting, ws.filename_setting, ws.when and ws.when[0]):
                assert key is None or key in spec.settings, (name, key)
    for name in backbones.names():
        spec = backbones.get(name)
        assert spec.weights and all(s in spec.settings for s in spec.weights)


def test_a_cached_or_local_model_passes_and_a_missing_one_names_model_and_config_key(hub, tmp_path):
    local = tmp_path / "bert-local"
    local.mkdir()
    (local / "config.json").write_text("{}")
    hub("distilroberta-base")
    assert models.missing_weights({"bertscore": {}}) == []  # the default id, from the cache
    assert models.missing_weights({"bertscore": {"model": str(local)}}) == []
    problems = models.missing_weights({"bertscore": {"model": "org/not-downloaded"},
                                       "semb": {"checkpoint": str(tmp_path / "nowhere")}})
    assert len(problems) == 3  # bertscore's model; semb's checkpoint and its (uncached) tokenizer
    assert "metric 'bertscore': model 'org/not-downloaded' is not available locally" in problems[0]
    assert "metric_settings.bertscore.model" in problems[0] and "huggingface-cli download" in problems[0]
    assert "metric_settings.semb.checkpoint" in problems[1] and "no such local path" in problems[1]
    assert "metric_settings.semb.tokenizer" in problems[2]


def test_local_radgraph_models_in_every_layout_the_metric_loads(hub, tmp_path):
    """An unpacked model folder, a folder holding <model_type>/ or <model_type>.tar.gz, or the archive itself."""
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
        assert models.missing_weights({"radgraph": {"model": str(model), "encoder": str(unpacked)}}) == [], model
    empty = tmp_path / "empty"
    empty.mkdir()
    problems = models.missing_weights({"radgraph": {"model": str(empty), "encoder": str(unpacked)}})
    assert len(problems) == 1 and "metric_settings.radgraph.model" in problems[0] and str(empty) in problems[0]


def test_files_inside_a_repo_and_conditional_models(hub, tmp_path):
    hub("StanfordAIMI/RRG_scorers", files=("radgraph.tar.gz",))
    hub("bert-base-uncased")
    assert models.missing_weights({"radgraph": {}}) == []
    missing = models.missing_weights({"semb": {}})  # chexbert.pth is not in the cached snapshot
    assert len(missing) == 1 and "chexbert.pth of it is not in the Hugging Face cache" in missing[0]
    local = tmp_path / "ckpt"
    local.mkdir()
    assert "does not exist" in models.missing_weights({"chexbert": {"checkpoint": str(local)}})[0]
    # endpoint backends load no weights
    assert models.missing_weights({"crimson": {"backend": "openai"}, "mrscore_rubric": {}}) == []
    assert len(models.missing_weights({"mrscore_rubric": {"backend": "local", "model": "org/judge"}})) == 1
    # a partial download (a snapshot without the file) is missing, and so is a revision not cached
    hub("org/judge", files=("tokenizer.json",))
    assert len(models.missing_weights({"green": {"model": "org/judge"}})) == 1
    hub("org/judge2")
    assert models.missing_weights({"green": {"model": "org/judge2"}}) == []
    assert len(models.missing_weights({"green": {"model": "org/judge2", "revision": "v2"}})) == 1


def test_backbone_weights_are_checked_too(hub):
    gen = SimpleNamespace(model="mg", dataset="iu", generator="medgemma", settings={})
    with pytest.raises(MissingWeightsError) as info:
        models.check_workflow_weights(plan([], generations=[gen]))
    assert "config 'generation' entry for 'mg' on 'iu': backbone 'medgemma': model 'google/medgemma-4b-it'" \
        in str(info.value)
    hub("google/medgemma-4b-it")
    models.check_workflow_weights(plan([], generations=[gen]))
    own = SimpleNamespace(model="x", dataset="iu", generator="my_pkg.mod:generate", settings={})
    models.check_workflow_weights(plan([], generations=[own]))  # a user's callable: its own business


def test_check_lists_every_missing_model_at_once_and_can_be_switched_off(hub, monkeypatch):
    p = plan(["bleu2", "bertscore", "green"], {"green": {"model": "org/green"}})
    with pytest.raises(MissingWeightsError) as info:
        models.check_workflow_weights(p)
    text = str(info.value)
    assert text.startswith("2 model(s) the config needs are not available locally")
    assert "metric_settings.bertscore.model" in text and "metric_settings.green.model" in text
    monkeypatch.setenv(models.WEIGHTS_CHECK_ENV, "off")
    models.check_workflow_weights(p)


def test_check_of_the_full_panel_takes_milliseconds(hub):
    names = [n for n in metrics.names() if n in models.METRIC_WEIGHTS]
    t0 = time.perf_counter()
    problems = models.missing_weights({n: {} for n in names})
    elapsed = time.perf_counter() - t0
    assert len(problems) >= len(names)
    print(f"weights check of {len(names)} model metrics: {elapsed * 1000:.1f} ms")
    assert elapsed < 1.0  # stat calls only: no torch, no network


def test_workflow_fails_at_load_naming_the_model(hub, tmp_path):
    work = make_workdir(tmp_path / "wd", metrics=["bleu2", "bertscore"],
                        metric_settings={"bertscore": {"model": "org/absent-bert"}})
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", "-n"], cwd=work, env=env,
                          capture_output=True, text=True)
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert "metric 'bertscore': model 'org/absent-bert' is not available locally" in out
    assert "metric_settings.bertscore.model" in out
    assert time.perf_counter() - t0 < 60  # the DAG is never built; no job starts
    env[models.WEIGHTS_CHECK_ENV] = "off"
    dry = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", "-n", "--quiet", "rules"], cwd=work,
                         env=env, capture_output=True, text=True)
    assert dry.returncode == 0, dry.stderr[-3000:]


# --- trust_remote_code: one list --------------------------------------------------------------------


def plan_config(**overrides):
    config = yaml.safe_load((REPO / "config/config.yaml").read_text())
    config.update(submissions=str(REPO / "config/submissions.tsv"), models=None, trust_remote_code=[],
                  metric_settings={}, splits=["findings", "reports"], vqa_metrics=["vqa"], shards={},
                  generation=[])
    config.update(overrides)
    return config


def test_top_level_list_reaches_every_judge_and_nothing_else():
    config = plan_config(metrics=["bleu2", "green", "crimson"], trust_remote_code=["org/judge"])
    Plan.from_config(config, base_dir=REPO)
    assert config["metric_settings"]["green"]["trust_remote_code"] == ["org/judge"]
    assert config["metric_settings"]["crimson"]["trust_remote_code"] == ["org/judge"]
    assert "bleu2" not in config["metric_settings"]
    default = plan_config(metrics=["green"])
    Plan.from_config(default, base_dir=REPO)
    assert default["metric_settings"]["green"]["trust_remote_code"] == []  # nothing runs remote code


def test_a_per_metric_trust_remote_code_is_refused():
    config = plan_config(metrics=["green"], metric_settings={"green": {"trust_remote_code": ["org/x"]}})
    with pytest.raises(ConfigError, match=r"metric_settings\.green\.trust_remote_code: remote code is allowed "
                                          r"in one place only, the top-level list `trust_remote_code`"):
        Plan.from_config(config, base_dir=REPO)


def test_allow_list_decides():
    assert models.trust_remote_code("org/judge", ["org/judge"])
    assert not models.trust_remote_code("org/judge", [])
    assert not models.trust_remote_code("org/judge", None)
