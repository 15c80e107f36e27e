"""A tiny GREEN-shaped Llama whose greedy answer to every GREEN prompt is one stored GREEN
completion, so GREEN's parser and score run on a known answer through a real engine.

Built on the judge suite's builder (tests/envs/judge/tiny_judge.py, attention heads of 32 for
vLLM's CPU kernels). The completion (tests/envs/judge/data/green_completions.json, score 1/6)
is one added token. GREEN prompts end with EOS (upstream's ``add_eos_token``): the EOS
embedding is a large one-hot in a dimension of its own, which rides the residual stream
through the small random layers and which the (untied) output row of the answer token reads;
the answer token's embedding is another such one-hot, read by the EOS output row. So greedy
decoding writes the answer, then stops, on the hf engine and on vLLM alike.

    python tests/envs/vllm/tiny_green.py DIRECTORY   # prints the directory (for workflow tests)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "judge"))

COMPLETIONS = HERE.parent / "judge" / "data" / "green_completions.json"
ANSWER_INDEX = 1  # score 1/6: 1 matched finding, 5 clinically significant errors


def answer_text() -> str:
    return json.loads(COMPLETIONS.read_text(encoding="utf-8"))["completions"][ANSWER_INDEX]


def build(directory) -> Path:
    import torch
    from safetensors.torch import load_file, save_file
    from transformers import AutoConfig, PreTrainedTokenizerFast

    import tiny_judge

    directory = Path(directory)
    tiny_judge.build_green_like(directory, hidden=64, heads=2, intermediate=128)
    tok = PreTrainedTokenizerFast(tokenizer_file=str(directory / "tokenizer.json"))
    answer = answer_text()
    tok.add_tokens([answer])
    tok.backend_tokenizer.save(str(directory / "tokenizer.json"))
    answer_id, eos = tok.convert_tokens_to_ids(answer), tok.convert_tokens_to_ids("</s>")
    config = AutoConfig.from_pretrained(str(directory))
    weights = load_file(str(directory / "model.safetensors"))
    emb, head = weights["model.embed_tokens.weight"], weights["lm_head.weight"]
    extra = answer_id + 1 - emb.shape[0]
    if extra > 0:  # the added token gets an embedding row and an output row
        emb = torch.cat([emb, torch.zeros(extra, emb.shape[1])])
        head = torch.cat([head, torch.zeros(extra, head.shape[1])])
    for dim, (src, dst) in enumerate(((eos, answer_id), (answer_id, eos))):
        emb[src].zero_()
        emb[src, dim] = 100.0
        head[dst].zero_()
        head[dst, dim] = 100.0
    weights["model.embed_tokens.weight"], weights["lm_head.weight"] = emb.contiguous(), head.contiguous()
    save_file(weights, str(directory / "model.safetensors"), metadata={"format": "pt"})
    config.vocab_size = emb.shape[0]
    config.save_pretrained(str(directory))
    return directory


if __name__ == "__main__":
    print(build(sys.argv[1]))
