"""The metric registry: one module per metric, imported only when asked for.

``import radrank.metrics`` costs nothing: :data:`MODULES` maps each metric name
to its module path, and :func:`get` imports a module the first time it is used.
Adding a metric is adding a module and one line here.
"""

from __future__ import annotations

import importlib
from functools import lru_cache

MODULES: dict[str, str] = {
    "bleu2": "radrank.metrics.bleu2",
    "bleu4": "radrank.metrics.bleu4",
    "rouge": "radrank.metrics.rouge",
    "radcliq": "radrank.metrics.radcliq",
    "bertscore": "radrank.metrics.bertscore",
    "semb": "radrank.metrics.semb",
    "chexbert": "radrank.metrics.chexbert",
    "radgraph": "radrank.metrics.radgraph",
    "ratescore": "radrank.metrics.ratescore",
    "green": "radrank.metrics.green",
    "crimson": "radrank.metrics.crimson",
    "mrscore": "radrank.metrics.mrscore",
    "mrscore_rubric": "radrank.metrics.mrscore_rubric",
    "radeval_bertscore": "radrank.metrics.radeval_extras",
    "f1radbert_ct": "radrank.metrics.radeval_extras",
    "srrbert": "radrank.metrics.radeval_extras",
    "temporal": "radrank.metrics.radeval_extras",
    "mammo_green": "radrank.metrics.radeval_api",
    "radfact_ct": "radrank.metrics.radeval_api",
    "vqa": "radrank.metrics.vqa",
}


def names() -> list[str]:
    return list(MODULES)


@lru_cache(maxsize=None)
def module(name: str):
    if name not in MODULES:
        raise KeyError(f"unknown metric {name!r}; known metrics: {', '.join(MODULES)}")
    return importlib.import_module(MODULES[name])


def get(name: str):
    """The :class:`~radrank.metrics.base.MetricSpec` of ``name``.

    A module may define several metrics (``SPECS``: name -> MetricSpec) or one (``SPEC``).
    """
    mod = module(name)
    specs = getattr(mod, "SPECS", None)
    return specs[name] if specs is not None else mod.SPEC


VLLM_ENV = "vllm"  # the environment family of every metric run with `backend: vllm`


def uses_vllm(name: str, settings: dict | None = None) -> bool:
    """True when metric ``name`` is configured (``metric_settings.<name>.backend``) to generate through vLLM."""
    spec = get(name)
    merged = {**spec.settings, **(settings or {})}
    return "backend" in spec.settings and str(merged.get("backend") or "").lower() == "vllm"


def env_for(name: str, settings: dict | None = None) -> str:
    """The environment family that scores ``name`` with these settings: the vllm family for
    ``backend: vllm``, else the metric's own (``MetricSpec.env``)."""
    return VLLM_ENV if uses_vllm(name, settings) else get(name).env


def gpus_for(name: str, settings: dict | None = None) -> int:
    """GPUs one scoring job of ``name`` requests: ``tensor_parallel_size`` (default 1) with
    ``backend: vllm``, else the metric's own ``resources.gpu``."""
    if uses_vllm(name, settings):
        return max(1, int((settings or {}).get("tensor_parallel_size") or 1))
    return get(name).resources.gpu


def leaves(name: str):
    return get(name).leaves


def score(name: str, pairs, settings: dict | None = None, inputs: dict | None = None):
    """Per-sample scores of metric ``name`` on ``pairs`` (sample_id + SPEC.columns)."""
    spec = get(name)
    merged = {**spec.settings, **(settings or {})}
    unknown = set(merged) - set(spec.settings)
    if unknown:
        raise KeyError(f"metric {name!r} has no setting(s) {sorted(unknown)}; known: {sorted(spec.settings)}")
    mod = module(name)
    out = mod.score(name, pairs, merged, inputs or {}) if hasattr(mod, "SPECS") else mod.score(pairs, merged, inputs or {})
    missing = [c for c in ("sample_id", *spec.columns) if c not in out.columns]
    if missing:
        raise RuntimeError(f"metric {name!r} did not return columns {missing}")
    result = out[["sample_id", *spec.columns]]
    result.attrs = dict(out.attrs)  # model provenance travels in attrs["models"]
    return result
