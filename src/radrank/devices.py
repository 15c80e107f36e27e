"""Device and dtype settings shared by every model-backed piece (metrics, judges, backbones).

One device per job: "auto" takes the first visible CUDA device (and says so when more are
visible — pin one per job, e.g. through the scheduler), else the CPU.
"""

from __future__ import annotations

import logging

from radrank.errors import ConfigError

log = logging.getLogger("radrank")

DTYPES = {"fp32": "float32", "float32": "float32", "bf16": "bfloat16", "bfloat16": "bfloat16",
          "fp16": "float16", "float16": "float16"}


def device_of(setting) -> str:
    """The torch device for a ``device`` setting ("auto" or empty: cuda:0 when there is one, else cpu)."""
    import torch

    if setting in (None, "", "auto"):
        if torch.cuda.is_available():
            if torch.cuda.device_count() > 1:
                log.warning("%d CUDA devices are visible; using cuda:0 only (pin one device per job)",
                            torch.cuda.device_count())
            return "cuda:0"
        return "cpu"
    return str(setting)


def dtype_of(setting, device: str = "cpu", cuda_default: str = "bf16"):
    """The torch dtype for a ``dtype`` setting: "auto" is ``cuda_default`` on CUDA and fp32 on the CPU."""
    import torch

    name = str(setting or "auto").lower()
    if name == "auto":
        name = cuda_default if str(device).startswith("cuda") else "fp32"
    if name not in DTYPES:
        raise ConfigError(f"unknown dtype {setting!r}; use auto, fp32, bf16 or fp16")
    return getattr(torch, DTYPES[name])


DEVICE_DOC = "auto (cuda:0 when there is one, else cpu), cpu, cuda or cuda:N"


def check_device(value, key: str) -> None:
    """ConfigError naming ``key`` unless ``value`` is a device setting (:data:`DEVICE_DOC`)."""
    device = str(value).lower()
    if not (device in ("auto", "cpu", "cuda") or (device.startswith("cuda:") and device[5:].isdigit())):
        raise ConfigError(f"config {key}: {value!r} is not a device; use {DEVICE_DOC}")
