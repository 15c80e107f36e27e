"""A tiny random Mistral built locally (nothing downloaded), the backbone of the training tests.

A byte-level BPE tokenizer is trained with ``tokenizers`` on a small radiology-like corpus and wrapped
as a fast tokenizer with Mistral's special tokens (``<unk>``, ``<s>``, ``</s>``) and no pad token, and
saved beside a random ``MistralForCausalLM`` (hidden 64, 2 layers, 4 heads, 2 KV heads).

The chat template closes the user turn with the EOS token on purpose (as Llama-3's and many other
templates do): with the usual ``pad = eos`` a sequence classifier would pool one token early, the trap
the trainer must avoid.
"""

from __future__ import annotations

import random
from pathlib import Path

WORDS = (
    "the lungs are clear without focal consolidation pleural effusion pneumothorax is seen heart size normal "
    "mildly enlarged cardiomediastinal silhouette within limits there mild pulmonary vascular congestion small "
    "bilateral effusions with bibasilar atelectasis patchy opacity in right lower lobe may reflect pneumonia "
    "left basilar likely represents endotracheal tube terminates cm above carina nasogastric courses below "
    "assess quality candidate reference report radiologist chest ray impression findings"
).split()
SPECIAL = ("<unk>", "<s>", "</s>")
INST_EOS_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' + eos_token }}"
    "{% else %}{{ message['content'] + eos_token }}{% endif %}{% endfor %}"
)


def corpus(n: int = 300, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 16))) + rng.choice([".", ",", ""])
            for _ in range(n)]


def report(rng: random.Random, lo: int = 4, hi: int = 18) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(lo, hi))]
    return " ".join(words).capitalize() + "."


def build_mistral(directory, *, hidden: int = 64, layers: int = 2, heads: int = 4, kv_heads: int = 2,
                  intermediate: int = 128, vocab_size: int = 400, seed: int = 0,
                  chat_template: str | None = INST_EOS_TEMPLATE) -> Path:
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import MistralConfig, MistralForCausalLM, PreTrainedTokenizerFast

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    bpe = Tokenizer(models.BPE(unk_token=None))
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(SPECIAL),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    bpe.train_from_iterator(corpus(), trainer=trainer)
    bos, eos = bpe.token_to_id("<s>"), bpe.token_to_id("</s>")
    bpe.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B",
                                                       special_tokens=[("<s>", bos)])
    fast = PreTrainedTokenizerFast(tokenizer_object=bpe, bos_token="<s>", eos_token="</s>", unk_token="<unk>",
                                   model_max_length=4096)
    if chat_template:
        fast.chat_template = chat_template
    fast.save_pretrained(str(directory))
    config = MistralConfig(vocab_size=bpe.get_vocab_size(), hidden_size=hidden, intermediate_size=intermediate,
                           num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=kv_heads,
                           max_position_embeddings=4096, bos_token_id=bos, eos_token_id=eos, pad_token_id=None,
                           sliding_window=None, tie_word_embeddings=False)
    torch.manual_seed(seed)
    MistralForCausalLM(config).eval().save_pretrained(str(directory))
    return directory


def pairs_frame(n: int = 8, seed: int = 0, *, words: tuple = (4, 18)):
    """n preference pairs in the trainer's columns; margins are score differences on the 0-1 scale."""
    import pandas as pd

    rng = random.Random(seed)
    rows = []
    for i in range(n):
        ref = report(rng, *words)
        sc, sr = rng.choice([1.0, 0.9, 0.8]), rng.choice([0.3, 0.5, 0.6])
        rows.append({"pair_id": f"p{i}", "reference_id": f"r{i // 2}", "reference": ref,
                     "chosen": report(rng, *words), "rejected": report(rng, *words),
                     "score_chosen": sc, "score_rejected": sr, "margin": round(sc - sr, 6)})
    return pd.DataFrame(rows)
