"""The tiny random models of ``make mrscore-demo``, built by the workflow itself (nothing is downloaded).

Three models of the architecture classes the real run uses — a Llama-class writer and judge
(``LlamaForCausalLM``) and a Mistral-class base (``MistralForCausalLM``, what Mistral-7B-Instruct is) —
with a byte-level BPE tokenizer trained on the references and radrank's own prompts, and a
Mistral-style chat template. Their weights are random: the candidates are word salad, the verdicts are
constrained (``verdict: constrained``, so every verdict parses) and the numbers mean nothing. What the
demo proves is the path: every stage runs its real code on real model classes.
"""

from __future__ import annotations

import json
from pathlib import Path

from radrank.metrics.mrscore import DEMO_MARKER

SPECIAL = ("<unk>", "<s>", "</s>", "<pad>")
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}"
    "{{ '[INST] ' + message['content'] | trim + ' [/INST]' }}{% else %}{{ ' ' + message['content'] | trim + "
    "eos_token }}{% endif %}{% endfor %}"
)
SHAPE = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
         "num_key_value_heads": 2, "max_position_embeddings": 4096}
# Weights drawn wider than transformers' 0.02: a tiny model initialised that narrowly answers nearly the same
# whatever its input (every constrained verdict 100, every candidate alike), and the demo would have no pairs.
INIT_STD = 0.5


def corpus(reference_texts) -> list[str]:
    """Text the tokenizer learns from: the references and every prompt radrank writes."""
    from radrank.metrics import mrscore, mrscore_rubric
    from radrank.mrscore_train.candidates import writer_prompt

    refs = [str(t) for t in reference_texts]
    sample = refs[0] if refs else "Findings: The lungs are clear. Impression: No acute process."
    return refs + [writer_prompt(sample, 0, 40), mrscore_rubric.build_prompt(sample, sample),
                   mrscore.DEFAULT_TEMPLATE, mrscore_rubric.constrained_answer({k: 1 for k in mrscore_rubric.KEYS})]


def build_tokenizer(texts, folder, vocab_size: int = 800):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(SPECIAL),
                                                       initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>",
                                   pad_token="<pad>")
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(str(folder))
    return fast


def build_models(reference_texts, root, seed: int = 0) -> dict:
    """Writer, judge and base under ``root``; returns ``{name: folder}``."""
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM, MistralConfig, MistralForCausalLM

    root = Path(root)
    texts = corpus(reference_texts)
    folders = {}
    for i, (name, config_class, model_class) in enumerate((("writer", LlamaConfig, LlamaForCausalLM),
                                                           ("judge", LlamaConfig, LlamaForCausalLM),
                                                           ("base", MistralConfig, MistralForCausalLM))):
        folder = root / name
        folder.mkdir(parents=True, exist_ok=True)
        tok = build_tokenizer(texts, folder)
        torch.manual_seed(seed + i)
        config = config_class(vocab_size=len(tok), bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                              pad_token_id=tok.pad_token_id, tie_word_embeddings=False, initializer_range=INIT_STD,
                              **SHAPE)
        model = model_class(config).eval()
        model.generation_config = GenerationConfig(bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                                                   pad_token_id=tok.pad_token_id)
        model.save_pretrained(str(folder))
        (folder / DEMO_MARKER).write_text(json.dumps({"what": "tiny random model for make mrscore-demo",
                                                              "seed": seed + i, "initializer_range": INIT_STD,
                                                              **SHAPE}, indent=1) + "\n")
        folders[name] = folder
    return folders
