"""What the judge metrics (GREEN, the MRScore rubric judge, CRIMSON) share: their settings and their placement.

:class:`JudgeSettings` are the settings of a judge that runs a local causal LM (backend ``hf`` or ``vllm``,
vLLM's engine settings from :class:`radrank.runtime.generators.VLLMSettings`); each metric subclasses them
with its own defaults, backend and prompt settings. :class:`JudgeMetric` answers where such a metric's job
runs from its ``backend``. The generators are in :mod:`radrank.runtime.generators`, the judge loop (response
cache, parsing, one retry) in :mod:`radrank.engine`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

from radrank.devices import DEVICE_DOC, check_device
from radrank.judge_cache import ResponseCache, root_of
from radrank.metrics.base import Metric
from radrank.runtime import WeightRef
from radrank.runtime.generators import VLLMSettings
from radrank.runtime.loaders import VLLM_FAMILY
from radrank.settings import remote_code, scored, speed


@dataclass(frozen=True)
class JudgeSettings(VLLMSettings):
    """Settings of a judge metric that runs a local causal LM (backend hf or vllm); each metric sets its own
    defaults and adds its backend and prompt settings."""

    model: str = scored("", "the judge model: a Hugging Face id or a local directory")
    revision: str | None = scored(None, "hub revision of the model (null: the cached / newest snapshot)")
    trust_remote_code: tuple[str, ...] = remote_code("model")
    max_new_tokens: int = scored(512, "the first answer's token budget", minimum=1)
    max_total_tokens: int | None = scored(None, "prompt + answer tokens at most (longer prompts are cut from "
                                                "the right)", minimum=2)
    dtype: Literal["auto", "fp32", "bf16", "fp16"] = scored("auto", "model precision (auto: the judge's CUDA "
                                                                   "precision on a GPU, fp32 on the CPU)")
    retry_temperature: float = scored(0.7, "the one retry of an unparsable, uncut answer samples at this "
                                           "temperature", minimum=0.0)
    seed: int = scored(0, "seed of the retry's sampling (and vLLM's)", minimum=0)
    batch_size: int = speed(8, "hf: rows per generate call (halved on out-of-memory)", minimum=1)
    device: str = speed("auto", "hf: " + DEVICE_DOC)
    static_cache: Literal["auto"] | bool = speed("auto", "hf: static KV cache and compiled decoding (auto: on "
                                                         "CUDA)")
    cache_dir: str | None = speed(None, "response cache folder (null: $RADRANK_JUDGE_CACHE or "
                                        "~/.cache/radrank/judge; off: no cache)")

    def check(self, where):
        check_device(self.device, f"{where}.device")


def cache_for(settings) -> ResponseCache:
    return ResponseCache(root_of(settings.cache_dir))


class JudgeMetric(Metric):
    """A metric whose scores are a judge model's answers: where its job runs follows the ``backend`` setting —
    ``vllm`` in the vllm environment on ``tensor_parallel_size`` GPUs, ``openai`` (an endpoint) without a GPU,
    any other backend in the metric's family on one GPU."""

    def env(self, s) -> str:
        return VLLM_FAMILY if s.backend == "vllm" else self.family

    def gpus(self, s) -> int:
        if s.backend == "vllm":
            return s.tensor_parallel_size
        return 0 if s.backend == "openai" else self.default_resources.gpu

    def resources(self, s):
        if s.backend == "openai":  # the job only sends requests
            return dataclasses.replace(self.default_resources, mem_mb=4000, threads=2, gpu=0)
        return dataclasses.replace(self.default_resources, gpu=self.gpus(s))


def model_ref(owner: str, key: str, s) -> WeightRef:
    """The judge model of settings ``s`` (``s.model`` at ``s.revision``), named by config ``key``."""
    return WeightRef(owner, key, s.model, need="model", revision=s.revision)

