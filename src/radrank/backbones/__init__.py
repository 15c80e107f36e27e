"""The generation-backbone registry: one object per backbone, its module imported only when asked for.

``import radrank.backbones`` costs no torch or transformers: :data:`REGISTRY`
(:class:`radrank.registry.Registry`) maps each backbone name to its object, a
:class:`~radrank.backbones.base.Backbone` (the contract, in :mod:`radrank.backbones.base`), and a
module is imported the first time it is asked for. What the workflow asks of a generation entry,
when it loads, the backbone answers for its typed settings ``s = get(name).settings(values)``:
``env(s)``, ``gpus(s)``, ``resources(s)``, ``samples_per_call(s, batch_size)``, ``identity(s,
allow_list)`` (what a generation job's rerun depends on) and ``weights(s)`` (exactly the models
``load`` resolves, for the load-time check :func:`radrank.runtime.available`); ``load(s,
allow_list, task, runtime)`` returns a generator ``generator(imgs, indications=None) -> list[str]``
or, for ``task="vqa"`` where the backbone supports it, an answerer ``answerer(imgs, questions) ->
list[str]``.

=============  ======================================  ==============  ===========  ============  ==========
backbone       default model                           env family      tasks        remote code   on vLLM
=============  ======================================  ==============  ===========  ============  ==========
medgemma       google/medgemma-4b-it                   gen-medgemma    report, vqa  no            yes (vllm)
maira2         microsoft/maira-2                       gen-maira2      report       yes           no
chexagent2     StanfordAIMI/CheXagent-2-3b             gen-chexagent   report, vqa  yes           no
llava_rad      microsoft/llava-rad (+ vicuna-7b-v1.5)  gen-llavarad    report       no (own pkg)  no
=============  ======================================  ==============  ===========  ============  ==========

``backend: vllm`` in a backbone's settings (a backbone whose Settings are
:class:`~radrank.backbones.base.VLLMBackboneSettings`) generates with vLLM in the ``vllm`` family
instead (:mod:`radrank.backbones.vllm_recipe`); the others say why they cannot (``vllm_note``).

Config: a ``generation`` entry's ``settings`` override the backbone's defaults (``model`` may
be a local directory; the job's messages name a setting ``backbone_settings.<name>.<setting>``),
and the top-level list ``trust_remote_code`` names the model ids / paths allowed to run their
own code. Adding a backbone is adding its module (its ``Settings`` and ``BACKBONE``), one line in
:data:`REGISTRY`, its environment and its case in tests/test_backbone_contract.py.
"""

from __future__ import annotations

from radrank.registry import Registry

REGISTRY = Registry("backbone", {
    "medgemma": "radrank.backbones.medgemma:BACKBONE",
    "maira2": "radrank.backbones.maira2:BACKBONE",
    "chexagent2": "radrank.backbones.chexagent2:BACKBONE",
    "llava_rad": "radrank.backbones.llava_rad:BACKBONE",
})


names = REGISTRY.names
get = REGISTRY.get  # the Backbone called ``name`` (a KeyError naming the known backbones)


def load(name: str, settings=None, allow_list=(), task: str = "report", runtime=None):
    """A generator (``task="report"``) or answerer (``task="vqa"``) of backbone ``name`` with ``settings`` (its
    Settings, or a mapping checked into them). ``runtime`` (:class:`radrank.runtime.Runtime`) records what is
    resolved; a fresh one when None."""
    return get(name).load(settings, allow_list, task=task, runtime=runtime)
