"""The generation-backbone registry and the generator / answerer contracts (no torch needed).

Registry specs, lazy imports, settings validation, fail-fast missing weights with
the config key, the trust_remote_code allow-list, arity detection of user
generators and the indication plumbing. The backbones' real recipes run on tiny
random models in tests/envs/gen-medgemma.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from radrank import backbones
from radrank.backbones.base import (BackboneSpec, CheckedGenerator, Recipe, accepts_indications, as_answerer,
                                    as_generator, check_outputs, indication_text, merge_settings)
from radrank.datasets.base import indication_of
from radrank.errors import ConfigError, MissingWeightsError

ROOT = Path(__file__).resolve().parents[1]
REQUIREMENTS = ROOT / "envs" / "requirements"


# --- registry ---------------------------------------------------------------------------------------


def test_registry_lists_the_four_backbones():
    assert backbones.names() == ["medgemma", "maira2", "chexagent2", "llava_rad"]
    with pytest.raises(KeyError, match="unknown backbone 'nope'"):
        backbones.get("nope")


@pytest.mark.parametrize("name", ["medgemma", "maira2", "chexagent2", "llava_rad"])
def test_spec_declares_env_model_resources_and_settings(name):
    spec = backbones.get(name)
    assert isinstance(spec, BackboneSpec) and spec.name == name
    assert spec.env.startswith("gen-") and (REQUIREMENTS / f"{spec.env}.in").is_file()
    assert spec.resources.gpu == 1
    assert spec.settings["model"] == spec.model
    for key in ("model", "revision", "dtype", "device", "batch_size", "max_new_tokens", "use_indication"):
        assert key in spec.settings, key
    assert "report" in spec.tasks and set(spec.tasks) <= {"report", "vqa"}
    assert callable(backbones.module(name).load)


def test_declared_models_tasks_and_remote_code():
    got = {n: (backbones.get(n).model, backbones.get(n).tasks, backbones.get(n).remote_code, backbones.get(n).inputs)
           for n in backbones.names()}
    assert got == {
        "medgemma": ("google/medgemma-4b-it", ("report", "vqa"), False, "pil"),
        "maira2": ("microsoft/maira-2", ("report",), True, "pil"),
        "chexagent2": ("StanfordAIMI/CheXagent-2-3b", ("report", "vqa"), True, "paths"),
        "llava_rad": ("microsoft/llava-rad", ("report",), False, "pil"),
    }
    maira = backbones.get("maira2").settings
    assert maira["max_new_tokens"] == 300 and maira["use_indication"] is True
    assert backbones.get("llava_rad").settings["model_base"] == "lmsys/vicuna-7b-v1.5"
    assert backbones.get("llava_rad").settings["max_new_tokens"] == 256


def test_importing_the_registry_and_specs_imports_no_torch():
    code = ("import sys, radrank.backbones as b\n"
            "[b.get(n) for n in b.names()]\n"
            "bad = [m for m in ('torch', 'transformers', 'PIL', 'monai') if m in sys.modules]\n"
            "print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": str(ROOT / "src")}, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_settings_are_validated():
    spec = backbones.get("medgemma")
    assert merge_settings(spec, {"batch_size": 2})["batch_size"] == 2
    with pytest.raises(ConfigError, match=r"no setting\(s\) \['temperature'\].*backbone_settings.medgemma"):
        merge_settings(spec, {"temperature": 0.7})
    with pytest.raises(ConfigError, match="batch_size must be a positive integer"):
        merge_settings(spec, {"batch_size": 0})
    with pytest.raises(ConfigError, match="max_new_tokens"):
        merge_settings(spec, {"max_new_tokens": "many"})
    with pytest.raises(ConfigError, match="model is empty"):
        merge_settings(spec, {"model": ""})


# --- missing weights: fast, with the config key -----------------------------------------------------


@pytest.mark.parametrize("name,setting", [("medgemma", "model"), ("maira2", "model"), ("chexagent2", "model")])
def test_missing_local_weights_fail_fast_with_the_config_key(name, setting, tmp_path):
    start = time.perf_counter()
    with pytest.raises(MissingWeightsError) as e:
        backbones.load(name, {setting: str(tmp_path / "no-such-model")}, ["anything"])
    assert time.perf_counter() - start < 5
    assert f"backbone_settings.{name}.{setting}" in str(e.value) and "no such local path" in str(e.value)


def test_a_directory_without_config_json_is_refused(tmp_path):
    (tmp_path / "weights").mkdir()
    with pytest.raises(MissingWeightsError, match=r"backbone_settings.medgemma.model.*no config.json"):
        backbones.load("medgemma", {"model": str(tmp_path / "weights")})


def test_hub_ids_not_in_the_cache_fail_fast_offline(tmp_path):
    # A fresh process: hub off, an empty cache, every backbone's default id.
    code = ("import time, json\n"
            "from radrank import backbones\n"
            "from radrank.errors import MissingWeightsError\n"
            "from radrank.backbones import llava_rad\n"
            "llava_rad.llava_modules = lambda: {}\n"  # the llava package is checked first; skip that here
            "res = {}\n"
            "for name in backbones.names():\n"
            "    t = time.perf_counter()\n"
            "    try:\n"
            "        backbones.load(name, {}, [])\n"
            "        res[name] = 'loaded?'\n"
            "    except MissingWeightsError as e:\n"
            "        res[name] = [str(e), time.perf_counter() - t]\n"
            "print(json.dumps(res))\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "TRANSFORMERS_CACHE"):
        env.pop(var, None)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    res = json.loads(out.stdout.strip().splitlines()[-1])
    for name in backbones.names():
        message, seconds = res[name]
        model = backbones.get(name).model
        assert f"backbone {name!r}: model {model!r} is not available locally" in message
        assert f"backbone_settings.{name}.model" in message
        assert seconds < 10


def test_remote_code_needs_the_allow_list(tmp_path):
    model = tmp_path / "maira"
    model.mkdir()
    (model / "config.json").write_text("{}")
    for name in ("maira2", "chexagent2"):
        with pytest.raises(ConfigError, match=r"trust_remote_code.*adding .* to the config list `trust_remote_code`"):
            backbones.load(name, {"model": str(model)}, ["microsoft/maira-2", "StanfordAIMI/CheXagent-2-3b"])


def test_llava_rad_without_its_package_says_how_to_install(monkeypatch):
    import importlib.util

    from radrank.backbones import llava_rad
    from radrank.backbones.base import BackboneUnavailable

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == "llava" else real(n, *a))
    with pytest.raises(BackboneUnavailable, match=r"own `llava` package.*pip install --no-deps git\+https"):
        llava_rad.load({})


def test_unsupported_tasks_are_config_errors(tmp_path):
    for name in ("maira2", "llava_rad"):
        with pytest.raises(ConfigError, match="does not support task 'vqa'"):
            backbones.load(name, {}, [], task="vqa")


# --- the contracts: arity detection, wrapping, checks --------------------------------------------------


def _imgs(n):
    return [[f"img{i}"] for i in range(n)]


def test_arity_detection():
    def legacy(imgs):
        return ["x"] * len(imgs)

    def modern(imgs, indications=None):
        return ["y"] * len(imgs)

    def positional(imgs, inds):
        return ["z"] * len(imgs)

    def keyword_only(imgs, *, indications=None):
        return ["k"] * len(imgs)

    def star(*args):
        return ["s"] * len(args[0])

    def kwargs_only(imgs, **kw):
        return ["w"] * len(imgs)

    class Legacy:
        def __call__(self, imgs):
            return ["o"] * len(imgs)

    class Modern:
        def __call__(self, imgs, indications=None):
            return ["m"] * len(imgs)

    assert not accepts_indications(legacy) and not accepts_indications(Legacy())
    for fn in (modern, positional, keyword_only, star, kwargs_only, Modern(), lambda imgs, inds=None: []):
        assert accepts_indications(fn), fn
    assert not accepts_indications(lambda imgs: [])
    assert not accepts_indications(len)  # a builtin of one argument


def test_as_generator_passes_indications_only_to_two_argument_generators():
    seen = {}

    def legacy(imgs):
        seen["legacy"] = len(imgs)
        return ["a"] * len(imgs)

    def modern(imgs, indications=None):
        seen["modern"] = indications
        return ["b"] * len(imgs)

    def keyword_only(imgs, *, indications=None):
        seen["kw"] = indications
        return ["c"] * len(imgs)

    inds = ["Cough.", None]
    assert as_generator(legacy)(_imgs(2), inds) == ["a", "a"] and seen["legacy"] == 2
    assert as_generator(legacy).legacy and not as_generator(modern).legacy
    assert as_generator(modern)(_imgs(2), inds) == ["b", "b"] and seen["modern"] == inds
    assert as_generator(keyword_only)(_imgs(2), inds) == ["c", "c"] and seen["kw"] == inds
    assert as_generator(modern)(_imgs(2)) == ["b", "b"] and seen["modern"] is None
    g = as_generator(modern)
    assert as_generator(g) is g and isinstance(g, CheckedGenerator)


def test_contract_violations_are_reported():
    gen = as_generator(lambda imgs, indications=None: ["x"] * len(imgs))
    with pytest.raises(ValueError, match="2 samples of images but 3 indications"):
        gen(_imgs(2), ["a", "b", "c"])
    with pytest.raises(TypeError, match=r"imgs\[0\] must be a list"):
        gen(["just-a-path.png"])
    with pytest.raises(ValueError, match=r"imgs\[1\] has no image"):
        gen([["a"], []])
    with pytest.raises(ValueError, match="returned 1 texts for 2 samples"):
        as_generator(lambda imgs: ["only one"])(_imgs(2))
    with pytest.raises(TypeError, match="non-string"):
        as_generator(lambda imgs: [None, "x"])(_imgs(2))
    with pytest.raises(TypeError, match="must return a list of strings"):
        as_generator(lambda imgs: "one string")(_imgs(1))
    assert check_outputs(("a", "b"), 2) == ["a", "b"]


def test_answerer_contract():
    ans = as_answerer(lambda imgs, questions: [q.upper() for q in questions])
    assert ans(_imgs(2), ["is it?", "where?"]) == ["IS IT?", "WHERE?"]
    with pytest.raises(ValueError, match="one question per sample"):
        ans(_imgs(2), None)
    with pytest.raises(ValueError, match="2 samples of images but 1 questions"):
        ans(_imgs(2), ["q"])
    with pytest.raises(TypeError, match="takes \\(imgs, questions\\)"):
        as_answerer(lambda imgs: [])


# --- indication plumbing through a recipe (fake model) ---------------------------------------------------


class EchoRecipe(Recipe):
    """A recipe whose 'model' answers with its prompt: what the model is asked becomes visible."""

    def report_prompt(self, indication):
        return f"[{indication}] write findings" if indication else "write findings"

    def vqa_prompt(self, question):
        return f"Q: {question}"

    def _generate(self, batch):
        self.batches = getattr(self, "batches", []) + [len(batch)]
        return [f"{prompt} ({len(images)} images)" for images, prompt in batch]


SPEC = BackboneSpec(name="echo", description="", env="gen-test", model="echo",
                    settings={"model": "echo", "revision": None, "dtype": "auto", "device": "cpu", "batch_size": 2,
                              "max_new_tokens": 5, "use_indication": True, "max_images": 1}, tasks=("report", "vqa"))

REPORTS = [
    "INDICATION: Cough and fever. FINDINGS: Small left pleural effusion. IMPRESSION: Effusion.",
    "FINDINGS: The lungs are clear. IMPRESSION: No acute process.",
    "INDICATION: ___ FINDINGS: Moderate cardiomegaly. IMPRESSION: Cardiomegaly.",
]


def test_the_prompt_gets_the_indication_when_use_indication_and_never_the_report_body():
    imgs = [["frontal", "lateral"], ["frontal"], ["frontal"]]
    inds = [indication_of(r) for r in REPORTS]
    assert inds[0] == "Cough and fever." and inds[1] is None
    gen = EchoRecipe(SPEC, dict(SPEC.settings), "report").callable()
    out = gen(imgs, inds)
    # MIMIC's "___" (de-identified text) is passed on as it is; max_images 1
    assert out == ["[Cough and fever.] write findings (1 images)", "write findings (1 images)",
                   "[___] write findings (1 images)"]
    assert gen.last_prompts[0].startswith("[Cough and fever.]")
    for report, prompt in zip(REPORTS, gen.last_prompts):
        body = report.split("FINDINGS:")[1]
        assert body.split(".")[0].strip() not in prompt
    assert gen.recipe.batches == [2, 1]  # batch_size 2, input order kept
    off = EchoRecipe(SPEC, {**SPEC.settings, "use_indication": False}, "report").callable()
    assert off(imgs, inds) == ["write findings (1 images)"] * 3
    assert off(imgs) == ["write findings (1 images)"] * 3
    assert accepts_indications(gen) and not as_generator(gen).legacy


def test_indication_text_normalises_and_drops_missing_markers():
    assert indication_text("  Cough,\n fever  ") == "Cough, fever"
    for missing in (None, "", "  ", "nan", "NaN", "None", float("nan")):
        assert indication_text(missing) is None


def test_recipe_answerer_contract_and_task_check():
    ans = EchoRecipe(SPEC, dict(SPEC.settings), "vqa").callable()
    assert ans([["a"], ["b"]], ["is there  effusion?", "where?"]) == ["Q: is there effusion? (1 images)",
                                                                      "Q: where? (1 images)"]
    with pytest.raises(ValueError, match="one question per sample"):
        ans([["a"]], None)
    spec = BackboneSpec(name="r", description="", env="gen-test", model="r", settings=dict(SPEC.settings))
    with pytest.raises(ConfigError, match="does not support task 'vqa'"):
        EchoRecipe(spec, dict(spec.settings), "vqa")
