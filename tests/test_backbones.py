"""The generation-backbone registry and the generator / answerer contracts (no torch needed).

Registry specs, lazy imports, what the workflow asks of a generation entry (settings, env, gpus,
samples per call, weights), fail-fast missing weights with the config key, the trust_remote_code
allow-list, arity detection of user generators and the indication plumbing. The backbones' real
recipes run on tiny random models in tests/envs/gen-medgemma.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from radrank import backbones, runtime
from radrank.backbones.base import (Backbone, BackboneSettings, CheckedGenerator, Recipe, accepts_indications,
                                    as_answerer, as_generator, check_outputs, indication_text)
from radrank.datasets.base import indication_of
from radrank.errors import ConfigError, MissingWeightsError
from radrank.settings import field_specs

ROOT = Path(__file__).resolve().parents[1]
ENTRY = "generation[0].settings"  # a `where` as the workflow names a generation entry's settings
AT = re.escape(ENTRY)


@pytest.fixture
def no_torch_no_network(monkeypatch):
    """Importing torch or transformers, or opening a connection, fails the test: what runs before them is
    everything a missing model may cost."""
    for name in ("torch", "transformers", "huggingface_hub"):
        monkeypatch.setitem(sys.modules, name, None)  # `import torch` raises ImportError

    def refuse(*args, **kwargs):
        raise AssertionError(f"a network connection was attempted: {args}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def _model_dir(path: Path, **config) -> Path:
    path.mkdir(parents=True)
    (path / "config.json").write_text(json.dumps(config))
    return path


# --- registry (each backbone's declaration and settings checks: tests/test_backbone_contract.py) ----------


def test_registry_names_each_backbone_object():
    assert [backbones.get(n).name for n in backbones.names()] == backbones.names()
    with pytest.raises(KeyError, match="unknown backbone 'nope'"):
        backbones.get("nope")


@pytest.mark.parametrize("name", backbones.names())
def test_backbone_answers_the_workflows_questions(name):
    b = backbones.get(name)
    assert isinstance(b, Backbone) and callable(b.load)
    assert b.family.startswith("gen-") and b.default_resources.gpu == 1
    for key in ("model", "revision", "dtype", "device", "batch_size", "max_new_tokens", "use_indication"):
        assert key in field_specs(b.Settings), key


def test_declared_defaults():
    maira = backbones.get("maira2").settings({})
    assert maira.max_new_tokens == 300 and maira.use_indication is True
    llava = backbones.get("llava_rad").settings({})
    assert (llava.model_base, llava.max_new_tokens, llava.dtype) == ("lmsys/vicuna-7b-v1.5", 256, "fp16")
    medgemma = backbones.get("medgemma").settings({})
    assert (medgemma.max_new_tokens, medgemma.vqa_max_new_tokens, medgemma.backend) == (300, 64, "hf")


def test_importing_the_registry_and_asking_it_imports_no_torch():
    code = ("import sys, radrank.backbones as b\n"
            "[(b.get(n).settings({}), b.get(n).env({}), b.get(n).gpus({}), b.get(n).weights({}),\n"
            "  b.get(n).identity({})) for n in b.names()]\n"
            "heavy = ('torch', 'transformers', 'PIL', 'monai', 'vllm', 'huggingface_hub')\n"
            "bad = [m for m in heavy if m in sys.modules]\n"
            "print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": str(ROOT / "src")}, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


# --- what the workflow asks of a generation entry ------------------------------------------------------


def test_settings_are_the_defaults_with_the_values_and_leave_the_values_alone():
    values = {"batch_size": 2}
    medgemma = backbones.get("medgemma")
    s = medgemma.settings(values, ENTRY)
    assert s == medgemma.Settings(batch_size=2) and s.as_dict() == {**medgemma.settings({}).as_dict(), "batch_size": 2}
    assert values == {"batch_size": 2}
    assert "backend" not in backbones.get("maira2").settings({"backend": "hf"}).as_dict()  # hf: its one backend


@pytest.mark.parametrize("values, message", [
    ({"temperature": 0.7}, AT + r"\.temperature: no such setting"),
    ({"batch_size": 0}, AT + r"\.batch_size: 0 is below the minimum 1"),
    ({"max_new_tokens": "many"}, AT + r"\.max_new_tokens: 'many' is not allowed; expected an integer"),
    ({"max_images": 0}, AT + r"\.max_images: 0 is below the minimum 1"),
    ({"use_indication": "yes please"}, AT + r"\.use_indication: 'yes please' is not allowed; expected true or false"),
    ({"report_prompt": 3}, AT + r"\.report_prompt: 3 is not allowed; expected a string"),
    ({"revision": 7}, AT + r"\.revision: 7 is not allowed; expected a string or null"),
    ({"gpu_memory_utilization": "most"}, AT + r"\.gpu_memory_utilization: 'most' is not allowed; expected a number"),
    ({"enforce_eager": "sometimes"}, AT + r"\.enforce_eager: 'sometimes' is not allowed; expected 'auto' or true"),
    ({"model": ""}, AT + r"\.model: is empty"),
    ({"dtype": "fp8"}, AT + r"\.dtype: 'fp8' is not allowed; expected 'auto' or 'fp32'"),
    ({"device": "gpu0"}, AT + r"\.device: 'gpu0' is not a device"),
    ({"backend": "tgi"}, AT + r"\.backend: 'tgi' is not allowed; expected 'hf' or 'vllm'"),
    ({"model_impl": "sglang"}, AT + r"\.model_impl: 'sglang' is not allowed"),
    ({"backend": "vllm", "tensor_parallel_size": 0}, AT + r"\.tensor_parallel_size: 0 is below the minimum 1"),
])
def test_settings_errors_name_the_key_where_the_config_has_it(values, message):
    with pytest.raises(ConfigError, match=message):
        backbones.get("medgemma").settings(values, ENTRY)


def test_settings_default_to_naming_backbone_settings_and_check_each_backbones_rules():
    with pytest.raises(ConfigError, match=r"config backbone_settings\.medgemma\.batch_size: -1 is below the minimum"):
        backbones.get("medgemma").settings({"batch_size": -1})
    with pytest.raises(ConfigError, match=r"backbone 'maira2' cannot run on vLLM: .*RAD-DINO.*"
                                          + AT + r"\.backend"):
        backbones.get("maira2").settings({"backend": "vllm"}, ENTRY)
    chexagent2 = backbones.get("chexagent2")
    with pytest.raises(ConfigError, match=AT + r"\.recipe: 'abcde' is not allowed; expected 'regions' or 'single'"):
        chexagent2.settings({"recipe": "abcde"}, ENTRY)
    with pytest.raises(ConfigError, match=AT + r"\.regions: is empty"):
        chexagent2.settings({"regions": []}, ENTRY)
    assert chexagent2.settings({"recipe": "single", "regions": []}).regions == ()
    with pytest.raises(ConfigError, match=AT + r"\.model_base: is empty"):
        backbones.get("llava_rad").settings({"model_base": ""}, ENTRY)


def test_env_is_the_backbones_family_or_vllm():
    medgemma = backbones.get("medgemma")
    assert medgemma.env({}) == "gen-medgemma"
    assert medgemma.env({"backend": "hf"}) == "gen-medgemma"
    assert medgemma.env(medgemma.settings({"backend": "vllm"})) == "vllm"
    assert backbones.get("llava_rad").env({}) == "gen-llavarad"
    assert backbones.get("maira2").env({"backend": "hf"}) == "gen-maira2"


def test_gpus_are_tensor_parallel_size_on_vllm_only():
    medgemma = backbones.get("medgemma")
    assert medgemma.gpus({}) == 1
    assert medgemma.gpus({"backend": "vllm", "tensor_parallel_size": 4}) == 4
    assert medgemma.gpus({"backend": "hf", "tensor_parallel_size": 4}) == 1
    assert backbones.get("chexagent2").gpus(backbones.get("chexagent2").settings({})) == 1


def test_samples_per_call():
    medgemma = backbones.get("medgemma")
    vllm = medgemma.settings({"backend": "vllm"})
    assert medgemma.samples_per_call({}, None) == 8
    assert medgemma.samples_per_call({}, 3) == 3
    assert medgemma.samples_per_call(vllm, None) == 256  # vLLM's continuous batch, by default
    assert medgemma.samples_per_call(vllm.replace(max_num_seqs=64), None) == 64
    assert medgemma.samples_per_call({"backend": "vllm"}, None) == 256
    assert medgemma.samples_per_call(vllm, 5) == 5
    assert backbones.get("maira2").samples_per_call(backbones.get("maira2").settings({}), None) == 8


def test_weights_name_the_entry_and_each_model_setting():
    where = "config 'generation' entry for 'mg' on 'iu': backbone 'medgemma'"
    medgemma = backbones.get("medgemma")
    (ref,) = medgemma.weights(medgemma.settings({"revision": "abc123"}), where, "settings")
    assert (ref.owner, ref.key, ref.ref, ref.need, ref.revision) == (where, "settings.model", "google/medgemma-4b-it",
                                                                       "config", "abc123")
    model, base = backbones.get("llava_rad").weights({"model": "/models/llava-rad"}, "entry", "generation[2].settings")
    assert (model.ref, model.key, base.ref, base.key) == ("/models/llava-rad", "generation[2].settings.model",
                                                           "lmsys/vicuna-7b-v1.5", "generation[2].settings.model_base")
    assert base.revision is None  # the hub revision is the LoRA's
    (own,) = medgemma.weights({})
    assert (own.owner, own.key) == ("backbone 'medgemma'", "backbone_settings.medgemma.model")


def test_weights_feed_the_load_time_check(tmp_path, monkeypatch, no_torch_no_network):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        monkeypatch.delenv(var, raising=False)
    where = "config 'generation' entry for 'mg' on 'iu': backbone 'medgemma'"
    (ref,) = backbones.get("medgemma").weights({}, where, "settings")
    why = runtime.available(ref)
    assert why is not None and "not in the Hugging Face cache" in why
    message = str(ref.missing(why))
    assert message.startswith(f"{where}: model 'google/medgemma-4b-it' is not available locally")
    assert "Point config settings.model at a local copy" in message and "hf download google/medgemma-4b-it" in message
    here = _model_dir(tmp_path / "medgemma")
    assert [runtime.available(r) for r in backbones.get("medgemma").weights({"model": str(here)}, where)] == [None]


@pytest.mark.parametrize("name", backbones.names())
def test_weights_are_exactly_what_load_resolves(name, tmp_path, monkeypatch):
    from radrank.backbones import llava_rad

    monkeypatch.setattr(llava_rad, "llava_modules", lambda: {})  # the llava package is checked first
    settings = {setting: str(_model_dir(tmp_path / setting)) for setting in backbones.get(name).weight_settings}
    settings["revision"] = "main"
    rt = runtime.Runtime()
    # The load stops after resolving: no torch here (core), or remote code not on the allow-list.
    with pytest.raises((ImportError, ConfigError)):
        backbones.load(name, settings, [], runtime=rt)
    declared = backbones.get(name).weights(backbones.get(name).settings(settings))
    assert [(r.ref, r.need, r.revision, r.setting) for r in rt.resolved] == \
           [(r.ref, r.need, r.revision, r.setting) for r in declared]
    assert [r.key for r in rt.resolved] == [f"backbone_settings.{name}.{r.setting}" for r in declared]
    assert {r.owner for r in rt.resolved} == {f"backbone {name!r}"}


# --- missing weights: before torch, without the network, with the config key ----------------------------


# every backbone but llava_rad, which looks for its llava package before its weights (tested below)
@pytest.mark.parametrize("name,setting", [(n, "model") for n in backbones.names() if n != "llava_rad"])
def test_missing_local_weights_fail_before_torch_with_the_config_key(name, setting, tmp_path, no_torch_no_network):
    with pytest.raises(MissingWeightsError) as e:
        backbones.load(name, {setting: str(tmp_path / "no-such-model")}, ["anything"])
    assert f"backbone_settings.{name}.{setting}" in str(e.value) and "no such local path" in str(e.value)


def test_a_directory_without_config_json_is_refused(tmp_path, no_torch_no_network):
    (tmp_path / "weights").mkdir()
    with pytest.raises(MissingWeightsError, match=r"no config.json.*backbone_settings.medgemma.model"):
        backbones.load("medgemma", {"model": str(tmp_path / "weights")})


def test_hub_ids_not_in_the_cache_fail_offline_before_torch_and_the_network(tmp_path):
    # A fresh process: hub off, an empty cache, every backbone's default id; a connection attempt is recorded.
    code = ("import json, socket, sys\n"
            "attempts = []\n"
            "def refuse(*a, **k):\n"
            "    attempts.append(repr(a))\n"
            "    raise OSError('no network in this test')\n"
            "socket.socket.connect = refuse\n"
            "socket.create_connection = refuse\n"
            "from radrank import backbones\n"
            "from radrank.errors import MissingWeightsError\n"
            "from radrank.backbones import llava_rad\n"
            "llava_rad.llava_modules = lambda: {}\n"  # the llava package is checked first; skip that here
            "res = {}\n"
            "for name in backbones.names():\n"
            "    try:\n"
            "        backbones.load(name, {}, [])\n"
            "        res[name] = 'loaded?'\n"
            "    except MissingWeightsError as e:\n"
            "        res[name] = str(e)\n"
            "heavy = [m for m in ('torch', 'transformers', 'huggingface_hub') if m in sys.modules]\n"
            "print(json.dumps({'res': res, 'attempts': attempts, 'heavy': heavy}))\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "TRANSFORMERS_CACHE"):
        env.pop(var, None)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["attempts"] == [] and got["heavy"] == []
    for name in backbones.names():
        message = got["res"][name]
        model = backbones.get(name).model
        assert f"backbone {name!r}: model {model!r} is not available locally" in message
        assert f"backbone_settings.{name}.model" in message and "HF_HUB_OFFLINE=1" in message


def test_remote_code_needs_the_allow_list(tmp_path):
    model = _model_dir(tmp_path / "maira")
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
        llava_rad.BACKBONE.load({})


def test_backend_vllm_outside_its_env_names_the_environment(tmp_path):
    import importlib.util

    from radrank.backbones import vllm_recipe

    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vllm is installed here")
    settings = backbones.get("medgemma").settings({"backend": "vllm"})
    with pytest.raises(ConfigError, match="backend vllm runs in the vllm environment"):
        vllm_recipe.engine_args(tmp_path, settings, images_per_prompt=1)


def test_unsupported_tasks_are_config_errors(tmp_path):
    for name in ("maira2", "llava_rad"):
        with pytest.raises(ConfigError, match=r"does not support task 'vqa' \(it supports: report\)"):
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


class Echo(Backbone):
    name, description, family, tasks = "echo", "answers with its prompt", "gen-test", ("report", "vqa")


ECHO = Echo()
ECHO_SETTINGS = BackboneSettings(model="echo", device="cpu", batch_size=2, max_new_tokens=5, use_indication=True,
                                 max_images=1)

REPORTS = [
    "INDICATION: Cough and fever. FINDINGS: Small left pleural effusion. IMPRESSION: Effusion.",
    "FINDINGS: The lungs are clear. IMPRESSION: No acute process.",
    "INDICATION: ___ FINDINGS: Moderate cardiomegaly. IMPRESSION: Cardiomegaly.",
]


def test_the_prompt_gets_the_indication_when_use_indication_and_never_the_report_body():
    imgs = [["frontal", "lateral"], ["frontal"], ["frontal"]]
    inds = [indication_of(r) for r in REPORTS]
    assert inds[0] == "Cough and fever." and inds[1] is None
    gen = EchoRecipe(ECHO, ECHO_SETTINGS, "report").callable()
    out = gen(imgs, inds)
    # MIMIC's "___" (de-identified text) is passed on as it is; max_images 1
    assert out == ["[Cough and fever.] write findings (1 images)", "write findings (1 images)",
                   "[___] write findings (1 images)"]
    assert gen.last_prompts[0].startswith("[Cough and fever.]")
    for report, prompt in zip(REPORTS, gen.last_prompts):
        body = report.split("FINDINGS:")[1]
        assert body.split(".")[0].strip() not in prompt
    assert gen.recipe.batches == [2, 1]  # batch_size 2, input order kept
    off = EchoRecipe(ECHO, ECHO_SETTINGS.replace(use_indication=False), "report").callable()
    assert off(imgs, inds) == ["write findings (1 images)"] * 3
    assert off(imgs) == ["write findings (1 images)"] * 3
    assert accepts_indications(gen) and not as_generator(gen).legacy


def test_indication_text_normalises_and_drops_missing_markers():
    assert indication_text("  Cough,\n fever  ") == "Cough, fever"
    for missing in (None, "", "  ", "nan", "NaN", "None", float("nan")):
        assert indication_text(missing) is None


def test_recipe_answerer_contract_and_task_check():
    ans = EchoRecipe(ECHO, ECHO_SETTINGS, "vqa").callable()
    assert ans([["a"], ["b"]], ["is there  effusion?", "where?"]) == ["Q: is there effusion? (1 images)",
                                                                      "Q: where? (1 images)"]
    with pytest.raises(ValueError, match="one question per sample"):
        ans([["a"]], None)
    class ReportOnly(Echo):
        tasks = ("report",)

    with pytest.raises(ConfigError, match="does not support task 'vqa'"):
        EchoRecipe(ReportOnly(), ECHO_SETTINGS, "vqa")
