"""The generation-backbone registry: one module per backbone, imported only when asked for.

``import radrank.backbones`` costs no torch or transformers: :data:`REGISTRY`
(:class:`radrank.registry.Registry`) maps each backbone name to its ``SPEC``, and a
module is imported the first time it is asked for. Each module declares ``SPEC``
(:class:`~radrank.backbones.base.BackboneSpec`: env family, default model id,
resources, settings, tasks) and ``load(settings, trust_remote_code_allow_list=(),
task="report", runtime=None)``, which returns a generator
``generator(imgs, indications=None) -> list[str]`` or, for ``task="vqa"`` where the
backbone supports it, an answerer ``answerer(imgs, questions) -> list[str]``
(contracts in :mod:`radrank.backbones.base`).

What the workflow asks of a generation entry, when it loads, is answered here in one
place: :func:`settings` (defaults merged and checked), :func:`env`, :func:`gpus`,
:func:`samples_per_call`, :func:`identity` (what a generation job's rerun depends on) and
:func:`weights` (exactly the models :func:`load` resolves, for the load-time check
:func:`radrank.runtime.available`).

=============  ======================================  ==============  ===========  ============  ==========
backbone       default model                           env family      tasks        remote code   on vLLM
=============  ======================================  ==============  ===========  ============  ==========
medgemma       google/medgemma-4b-it                   gen-medgemma    report, vqa  no            yes (vllm)
maira2         microsoft/maira-2                       gen-maira2      report       yes           no
chexagent2     StanfordAIMI/CheXagent-2-3b             gen-chexagent   report, vqa  yes           no
llava_rad      microsoft/llava-rad (+ vicuna-7b-v1.5)  gen-llavarad    report       no (own pkg)  no
=============  ======================================  ==============  ===========  ============  ==========

``backend: vllm`` in a backbone's settings (``SPEC.vllm``) generates with vLLM in the ``vllm``
family instead (:mod:`radrank.backbones.vllm_recipe`); the others say why they cannot
(``SPEC.vllm_note``).

Config: a ``generation`` entry's ``settings`` override the backbone's defaults (``model`` may
be a local directory; the job's messages name a setting ``backbone_settings.<name>.<setting>``),
and the top-level list ``trust_remote_code`` names the model ids / paths allowed to run their
own code. Adding a backbone is adding a module and one line in :data:`REGISTRY`.
"""

from __future__ import annotations

from radrank.backbones import base
from radrank.registry import Registry
from radrank.runtime import WeightRef
from radrank.runtime.loaders import VLLM_FAMILY

REGISTRY = Registry("backbone", {
    "medgemma": "radrank.backbones.medgemma:SPEC",
    "maira2": "radrank.backbones.maira2:SPEC",
    "chexagent2": "radrank.backbones.chexagent2:SPEC",
    "llava_rad": "radrank.backbones.llava_rad:SPEC",
})


names = REGISTRY.names
get = REGISTRY.get  # the BackboneSpec of ``name`` (a KeyError naming the known backbones)


def load(name: str, settings: dict | None = None, trust_remote_code_allow_list=(), task: str = "report",
         runtime=None):
    """A generator (``task="report"``) or answerer (``task="vqa"``) of backbone ``name``. ``runtime``
    (:class:`radrank.runtime.Runtime`) records what is resolved; a fresh one when None."""
    return REGISTRY.module(name).load(settings or {}, trust_remote_code_allow_list, task=task, runtime=runtime)


def settings(name: str, values: dict | None, where: str | None = None) -> dict:
    """Backbone ``name``'s settings: its defaults updated with ``values``, checked. An unknown key, a value of
    the wrong kind, an empty model or a backend the backbone lacks is a :class:`~radrank.errors.ConfigError`
    naming ``<where>.<key>`` (``where`` defaults to ``backbone_settings.<name>``)."""
    return base.merge_settings(get(name), values, where)


def env(name: str, settings: dict | None) -> str:
    """The environment family a generation job of ``name`` runs in: the backbone's, or the vllm family
    with ``backend: vllm``."""
    spec = get(name)
    return VLLM_FAMILY if spec.vllm and base.uses_vllm(settings) else spec.env


def gpus(name: str, settings: dict | None) -> int:
    """GPUs a generation job of ``name`` requests: ``tensor_parallel_size`` on vLLM, else the backbone's."""
    spec = get(name)
    return base.gpus_of(settings, spec.resources.gpu) if spec.vllm else spec.resources.gpu


def samples_per_call(name: str, settings: dict | None, batch_size: int | None) -> int:
    """Samples per generator call: the entry's ``batch_size``, else 8 — or, on vLLM, ``max_num_seqs``."""
    return base.samples_per_call(get(name), settings, batch_size)


def identity(name: str, settings: dict | None, allow_list=()) -> dict:
    """What a generation job of ``name`` with ``settings`` holds as its identity: the settings that change the
    reports (not device, batch size or vLLM placement: :data:`radrank.backbones.base.SPEED_SETTINGS`) and, for a
    backbone that runs its checkpoint's code, whether its model is on the allow-list (:func:`base.identity`)."""
    return base.identity(get(name), settings, allow_list)


def weights(name: str, settings: dict | None, where: str, key: str = "settings") -> tuple[WeightRef, ...]:
    """The models :func:`load` resolves for these settings — what the workflow's load-time check hands to
    :func:`radrank.runtime.available`. ``where`` owns them in messages (the generation entry, e.g. "config
    'generation' entry for 'mg' on 'iu': backbone 'medgemma'"); each is named ``<key>.<setting>`` (``key``:
    where the entry's settings are, e.g. ``generation[0].settings``)."""
    return base.weight_refs(get(name), settings, where, key)
