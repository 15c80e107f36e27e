"""Run the MedGemma backbone on a tiny model and print what it produced as JSON (one process per backend).

    python medgemma_run.py MODEL_DIR BACKEND '{"max_new_tokens": 12, ...}'

Used by test_vllm_generation.py: vLLM's Transformers modeling backend patches transformers'
Gemma 3 classes for the whole process, so the hf and vllm recipes of the same architecture each
run in a process of their own (as each generation job does). Generates the report task on
SAMPLES and the VQA task on the same images, with one backbone load per task; with
``"check_limit": true`` also calls the report generator on one sample with one image more
than ``vllm_max_images`` and records the error; with ``"check_model_len": N`` also starts an
engine with ``max_model_len`` N and records the error of a prompt that leaves too little room.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parents[2] / "src"), str(HERE.parent / "gen-medgemma")]
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "nobind")
os.environ.setdefault("VLLM_CONFIGURE_LOGGING", "0")

# (seed, size, mode) of each sample's images: one, two, one and three images of different sizes.
SAMPLES = [[(1, (32, 32), "L")], [(2, (64, 48), "L"), (3, (50, 90), "L")], [(4, (32, 32), "RGB")],
           [(5, (32, 32), "L"), (6, (120, 100), "L"), (7, (32, 32), "L")]]
INDICATIONS = ["Cough.", None, "Fever and dyspnea.", "Chest pain."]
QUESTIONS = ["Is there a pleural effusion?", "Where is the opacity?", "Is the heart size normal?",
             "What is seen in the right lower lobe?"]


def images(samples=SAMPLES):
    import tiny_vlm

    return [[tiny_vlm.synthetic_cxr(seed=seed, size=size, mode=mode) for seed, size, mode in sample]
            for sample in samples]


def prompt_ids(gen, imgs) -> list:
    """The model's input ids per sample as the hf recipe builds them (the processor on the rendered text)."""
    from radrank.backbones.medgemma import rgb

    texts = gen.rendered
    out = []
    for text, sample in zip(texts, imgs):
        enc = gen.processor(text=[text], images=[rgb(sample)], return_tensors="pt", add_special_tokens=False)
        out.append(enc["input_ids"][0].tolist())
    return out


def main():
    from radrank import backbones

    model_dir, backend, extra = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    check_limit = extra.pop("check_limit", False)
    check_model_len = extra.pop("check_model_len", None)
    settings = {"model": model_dir, "device": "cpu", "dtype": "fp32", "backend": backend, **extra}
    imgs = images()
    result = {}
    report = backbones.load("medgemma", {**settings, "use_indication": True})
    result["report"] = report(imgs, INDICATIONS)
    result["rendered"] = report.rendered
    result["stats"] = report.stats
    result["describe"] = report.describe()
    if backend == "vllm":
        result["prompt_ids"] = report.prompt_token_ids
        result["engine_id"] = id(report.llm)
    else:
        result["prompt_ids"] = prompt_ids(report, imgs)
    vqa = backbones.load("medgemma", settings, task="vqa")
    result["vqa"] = vqa(imgs, QUESTIONS)
    if backend == "vllm":
        result["vqa_engine_id"] = id(vqa.llm)
    if check_limit:
        limit = int(settings["vllm_max_images"])
        try:
            report(images([[(9 + k, (32, 32), "L") for k in range(limit + 1)]]))
            result["limit_error"] = None
        except Exception as e:  # the error the test expects
            result["limit_error"] = f"{type(e).__name__}: {e}"
    if check_model_len:
        short = backbones.load("medgemma", {**settings, "use_indication": True, "max_model_len": check_model_len})
        try:
            short(imgs, INDICATIONS)
            result["model_len_error"] = None
        except Exception as e:  # the error the test expects
            result["model_len_error"] = f"{type(e).__name__}: {e}"
    print("RESULT " + json.dumps(result, default=str))


if __name__ == "__main__":
    main()
