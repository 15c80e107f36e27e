"""The model runtime shared by metrics, LLM judges and generation backbones.

* :mod:`radrank.runtime.weights` — what a component loads (:class:`WeightRef`), the load-time
  check (:func:`available`), the one resolver (:func:`resolve`) and model provenance;
* :mod:`radrank.runtime.loaders` — tokenizers, encoders, causal LMs and vLLM engines from resolved
  local directories (torch, transformers and vllm are imported inside the functions);
* :mod:`radrank.runtime.generators` — the generators the LLM judges run on (transformers, vLLM, an
  OpenAI-compatible endpoint) and vLLM's engine settings, shared by the judges and the backbones;
* :class:`Runtime` — what a scoring call is given: resolution (recorded, so a test can compare what a
  metric resolved with what its ``weights(settings)`` declared), a model cache shared by every call in
  the process (a model is loaded once per job, whatever number of calls score with it), and objects
  supplied instead of loading (tests, benchmarks);
* :func:`api_key` and :func:`scrub` — endpoint keys read from the environment only, never written.

Importing this package costs no torch, transformers or huggingface_hub import.
"""

from __future__ import annotations

import os
import threading

from radrank.errors import ConfigError
from radrank.runtime.weights import (Resolved, WeightRef, available, fingerprint, hub_offline, provenance,
                                     resolve, revision_of, weights_digest)
from radrank.settings import on_allow_list

__all__ = ["Resolved", "Runtime", "WeightRef", "allows_remote_code", "api_key", "available", "clear_models",
           "fingerprint", "hub_offline", "provenance", "resolve", "revision_of", "scrub", "weights_digest"]

_MODELS: dict = {}
_MODELS_LOCK = threading.RLock()


class Runtime:
    """What a metric's ``score`` is given besides its pairs and settings (see the module docstring).

    ``supplied`` maps a metric name to an object the metric uses instead of loading its model (a
    generator for the judges, a reward model for MRScore) — how tests and benchmarks run a metric's
    real scoring code on a model they built.
    """

    def __init__(self, *, supplied: dict | None = None):
        self.supplied = dict(supplied or {})
        self.resolved: list[WeightRef] = []  # every reference this runtime resolved, in order

    def resolve(self, ref: WeightRef) -> Resolved:
        self.resolved.append(ref)
        return resolve(ref)

    def load(self, key, factory):
        """``factory()`` once per process per ``key``; every later call, from any Runtime, gets the same object."""
        with _MODELS_LOCK:
            if key not in _MODELS:
                _MODELS[key] = factory()
            return _MODELS[key]

    def supply(self, name: str):
        """The object supplied for ``name`` (None when the metric loads its own)."""
        return self.supplied.get(name)


def clear_models() -> None:
    """Forget every loaded model (tests that need a fresh load)."""
    with _MODELS_LOCK:
        _MODELS.clear()


def allows_remote_code(model: str, allow_list) -> bool:
    """True only when ``model`` (the id or path exactly as configured) is on the allow-list."""
    return on_allow_list(model, allow_list)


def api_key(owner: str, key: str, variable: str | None, default: str = "OPENAI_API_KEY") -> str:
    """The API key from the environment variable named by config ``key`` (never from the config itself)."""
    name = str(variable or default)
    value = os.environ.get(name, "")
    if not value:
        raise ConfigError(f"{owner}: the API key is read from the environment variable {name!r} (config {key}), "
                          f"which is not set; put the key there")
    return value


def scrub(text, *secrets) -> str:
    """``text`` with every secret replaced by ***, and URLs without user, password, query or fragment."""
    import re

    from radrank.provenance import scrub_url

    out = str(text)
    for secret in secrets:
        if secret:
            out = out.replace(secret, "***")
    return re.sub(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]+", lambda m: scrub_url(m.group(0)), out)
