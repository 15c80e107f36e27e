"""The generation-backbone registry: one module per backbone, imported only when asked for.

``import radrank.backbones`` costs nothing (no torch, no transformers): :data:`MODULES`
maps each backbone name to its module, and :func:`get` imports it the first time.
Each module declares ``SPEC`` (:class:`~radrank.backbones.base.BackboneSpec`: env
family, default model id, resources, settings, tasks) and
``load(settings, trust_remote_code_allow_list=(), task="report")``, which returns a
generator ``generator(imgs, indications=None) -> list[str]`` or, for ``task="vqa"``
where the backbone supports it, an answerer ``answerer(imgs, questions) -> list[str]``
(contracts in :mod:`radrank.backbones.base`).

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

Config (read by the generation job): ``backbone_settings.<name>.<setting>`` overrides
a backbone's defaults (``model`` may be a local directory), and the list
``trust_remote_code`` names the model ids / paths allowed to run their own code.
Adding a backbone is adding a module and one line here.
"""

from __future__ import annotations

import importlib
from functools import lru_cache

MODULES: dict[str, str] = {
    "medgemma": "radrank.backbones.medgemma",
    "maira2": "radrank.backbones.maira2",
    "chexagent2": "radrank.backbones.chexagent2",
    "llava_rad": "radrank.backbones.llava_rad",
}


def names() -> list[str]:
    return list(MODULES)


@lru_cache(maxsize=None)
def module(name: str):
    if name not in MODULES:
        raise KeyError(f"unknown backbone {name!r}; known backbones: {', '.join(MODULES)}")
    return importlib.import_module(MODULES[name])


def get(name: str):
    """The :class:`~radrank.backbones.base.BackboneSpec` of ``name``."""
    return module(name).SPEC


def load(name: str, settings: dict | None = None, trust_remote_code_allow_list=(), task: str = "report"):
    """A generator (``task="report"``) or answerer (``task="vqa"``) of backbone ``name``."""
    return module(name).load(settings or {}, trust_remote_code_allow_list, task=task)
