"""The contract every registered generation backbone passes (as tests/contract.py is for metrics); no torch needed.

:data:`CASES` holds, per backbone, what it is expected to declare — the one hand-kept list of backbones: a
backbone added to the registry without its case fails :func:`test_every_registered_backbone_has_a_case` (and
every test below). For every backbone:

* the declaration is complete and as expected (family and its requirements file, tasks, inputs, remote code,
  vLLM, weight settings; typed frozen Settings whose defaults pass the backbone's own checks);
* an unknown setting (with the closest name) and an ill-typed value of every setting are refused when the
  settings are built, naming ``<where>.<key>``, as are an empty model and a backend the backbone lacks;
* the identity holds the scored settings only: every speed setting, of every kind, varied on its own leaves it
  unchanged, every scored one changes it; device, batch size and vLLM placement are speed settings, and nothing
  else is; the
  ``trust_remote_code`` list enters as a yes/no for the backbone's own model, never the list;
* where a job runs follows the backend (vLLM: the vllm family, ``tensor_parallel_size`` GPUs,
  ``max_num_seqs`` samples per call).
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from contract import other_values, wrong_values
from radrank import backbones
from radrank.backbones.base import BackboneSettings, VLLMBackboneSettings
from radrank.errors import ConfigError
from radrank.settings import field_specs

REQUIREMENTS = Path(__file__).resolve().parents[1] / "envs" / "requirements"
WHERE = "generation[0].settings"  # where the workflow says a generation entry's settings are
PLACEMENT = {"device", "batch_size"}  # never in an identity
VLLM_PLACEMENT = {"gpu_memory_utilization", "tensor_parallel_size", "max_num_seqs", "enforce_eager", "cpu_kv_cache_gb"}

CASES = {
    "medgemma": dict(family="gen-medgemma", tasks=("report", "vqa"), inputs="pil", remote_code=False, vllm=True,
                     weights=("model",), model="google/medgemma-4b-it"),
    "maira2": dict(family="gen-maira2", tasks=("report",), inputs="pil", remote_code=True, vllm=False,
                   weights=("model",), model="microsoft/maira-2"),
    "chexagent2": dict(family="gen-chexagent", tasks=("report", "vqa"), inputs="paths", remote_code=True, vllm=False,
                       weights=("model",), model="StanfordAIMI/CheXagent-2-3b"),
    "llava_rad": dict(family="gen-llavarad", tasks=("report",), inputs="pil", remote_code=False, vllm=False,
                      weights=("model", "model_base"), model="microsoft/llava-rad"),
}


def test_every_registered_backbone_has_a_case():
    assert sorted(CASES) == sorted(backbones.names()), "a backbone without a case here is under no contract"


@pytest.fixture(params=backbones.names())
def name(request):
    return request.param


def test_declaration(name):
    b, case = backbones.get(name), CASES[name]
    assert b.name == name and b.description
    assert (b.family, b.tasks, b.inputs, b.remote_code, b.vllm, b.weight_settings, b.model) == \
           (case["family"], case["tasks"], case["inputs"], case["remote_code"], case["vllm"], case["weights"],
            case["model"])
    assert (REQUIREMENTS / f"{b.family}.in").is_file()
    assert set(b.tasks) <= {"report", "vqa"} and "report" in b.tasks
    assert issubclass(b.Settings, BackboneSettings) and b.Settings.__dataclass_params__.frozen
    assert issubclass(b.Settings, VLLMBackboneSettings) == case["vllm"]
    assert b.vllm or b.vllm_note  # a backbone vLLM cannot serve says why
    specs = field_specs(b.Settings)
    for setting in b.weight_settings:
        assert specs[setting].kinds == (str,) and specs[setting].scores, setting
    s = b.settings({})
    assert s == b.Settings() and s.model == case["model"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.model = "other"  # noqa


def test_unknown_and_ill_typed_settings_are_refused_naming_the_key(name):
    b = backbones.get(name)
    with pytest.raises(ConfigError, match=re.escape(f"config {WHERE}.max_new_token: no such setting (did you mean "
                                                    "max_new_tokens?)")):
        b.settings({"max_new_token": 5}, WHERE)
    for key, spec in field_specs(b.Settings).items():
        for bad in wrong_values(spec):
            with pytest.raises(ConfigError, match=re.escape(f"config {WHERE}.{key}: ")):
                b.settings({key: bad}, WHERE)
    for key in b.weight_settings:
        with pytest.raises(ConfigError, match=re.escape(f"config {WHERE}.{key}: is empty")):
            b.settings({key: ""}, WHERE)
    with pytest.raises(ConfigError, match=re.escape(f"config {WHERE}.device: 'gpu0' is not a device")):
        b.settings({"device": "gpu0"}, WHERE)
    with pytest.raises(ConfigError, match=re.escape(f"config {WHERE}.backend: 'tgi' is not allowed")):
        b.settings({"backend": "tgi"}, WHERE)
    if b.vllm:
        assert b.settings({"backend": "vllm"}).backend == "vllm"
    else:
        with pytest.raises(ConfigError, match=rf"backbone '{name}' cannot run on vLLM: .*{re.escape(WHERE)}\.backend"):
            b.settings({"backend": "vllm"}, WHERE)
        assert b.settings({"backend": "hf"}) == b.settings({})  # hf: its one backend


def test_identity_holds_the_scored_settings_only(name):
    b = backbones.get(name)
    base = b.settings({})
    specs = field_specs(b.Settings)
    speed = {k for k, spec in specs.items() if not spec.scores}
    assert PLACEMENT <= speed and (not b.vllm or VLLM_PLACEMENT <= speed), speed
    # and nothing else: a setting that may change a report (a prompt, a token budget) is never a speed one
    assert speed <= PLACEMENT | VLLM_PLACEMENT, speed - PLACEMENT - VLLM_PLACEMENT
    identity = b.identity(base)
    assert (identity["backbone"], identity["version"]) == (name, b.version)
    assert set(identity["settings"]) == set(specs) - speed
    for key, spec in specs.items():
        accepted = []
        for value in other_values(spec, getattr(base, key)):
            try:
                accepted.append(b.settings({**base.as_dict(), key: value}))
            except ConfigError:  # a value the backbone's own rules refuse
                continue
        assert accepted, f"{name}.{key}: every variation was refused"
        for changed in accepted:
            same = b.identity(changed) == identity
            assert same == (not spec.scores), (name, key, getattr(changed, key),
                                               "scored setting left the identity unchanged" if spec.scores
                                               else "speed setting changed the identity")


def test_the_allow_list_enters_as_a_yes_no_for_the_backbones_own_model(name):
    b = backbones.get(name)
    s = b.settings({"model": "/models/mine"})
    alone = b.identity(s)
    unrelated = b.identity(s, ("someone/unrelated", "/some/folder", b.model))
    allowed = b.identity(s, ("someone/unrelated", "/models/mine"))
    assert unrelated == alone
    if b.remote_code:
        assert (alone["trust_remote_code"], allowed["trust_remote_code"]) == (False, True)
    else:
        assert allowed == alone and "trust_remote_code" not in alone


def test_where_a_job_runs_follows_the_backend(name):
    b = backbones.get(name)
    s = b.settings({"device": "cpu", "batch_size": 3})
    assert (b.env(s), b.gpus(s), b.resources(s).gpu, b.samples_per_call(s, None), b.samples_per_call(s, 5)) == \
           (CASES[name]["family"], 1, 1, 8, 5)
    if b.vllm:
        on_vllm = b.settings({"backend": "vllm", "tensor_parallel_size": 3, "max_num_seqs": 40})
        assert (b.env(on_vllm), b.gpus(on_vllm), b.resources(on_vllm).gpu, b.samples_per_call(on_vllm, None)) == \
               ("vllm", 3, 3, 40)
        assert b.resources(on_vllm).mem_mb == b.resources(s).mem_mb
        assert b.gpus(b.settings({"backend": "hf", "tensor_parallel_size": 3})) == 1  # hf: one device per job
