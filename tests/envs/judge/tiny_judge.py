"""Tiny random generative models built locally, for the judge environment's tests.

Nothing is downloaded. A byte-level BPE tokenizer is trained with ``tokenizers``
on a small radiology-like corpus, wrapped as a fast tokenizer with the special
tokens and chat template of the model it stands in for, and saved beside a
random model built from a small config, so the real loading and generation code
(:mod:`radrank.engine`) runs on it.

* :func:`build_green_like` — a Llama (``LlamaForCausalLM``) shaped like
  GREEN-radllama2-7b: ``<s>``/``</s>``/``<unk>``, the ``<|user|>``/``<|assistant|>``
  tokens, and a tokenizer_config that names a custom tokenizer class through
  ``auto_map`` (as the real repository does), so loading without
  trust_remote_code must fall back to transformers' own Llama tokenizer class.
* :func:`build_gemma_like` — a Gemma-3 text model (``Gemma3ForCausalLM``) with a
  Gemma-style chat template (``<start_of_turn>``/``<end_of_turn>``), the CRIMSON /
  rubric-judge shape.
* :func:`build_lora_adapter` / :func:`build_reward_head` — a LoRA adapter saved
  with peft on top of a tiny Llama and a linear reward head (the MRScore shape).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

WORDS = (
    "the lungs are clear without focal consolidation pleural effusion pneumothorax is seen heart size normal "
    "mildly enlarged cardiomediastinal silhouette within limits there mild pulmonary vascular congestion small "
    "bilateral effusions with bibasilar atelectasis patchy opacity in right lower lobe may reflect pneumonia "
    "left basilar likely represents endotracheal tube terminates cm above carina nasogastric courses below "
    "clinically significant insignificant errors matched findings explanation candidate reference report "
    "false missing misidentification misassessment severity comparison omitting prior study"
).split()

LLAMA_SPECIAL = ("<unk>", "<s>", "</s>")
GREEN_ROLE_TOKENS = ("<|user|>", "<|assistant|>", "<|system|>")
GEMMA_SPECIAL = ("<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>")

GEMMA_CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "{% set role = 'model' if message['role'] == 'assistant' else message['role'] %}"
    "{{ '<start_of_turn>' + role + '\n' + message['content'] | trim + '<end_of_turn>\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<start_of_turn>model\n' }}{% endif %}"
)


def corpus(n: int = 400, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        words = [rng.choice(WORDS) for _ in range(rng.randint(3, 16))]
        text = " ".join(words)
        out.append(text[0].upper() + text[1:] + rng.choice([".", ".", ",", ":", ""]))
    return out


def _write_json(path: Path, obj):
    path.write_text(json.dumps(obj, indent=1), encoding="utf-8")


def _train_bpe(special: tuple, added: tuple = (), vocab_size: int = 400):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(special) + list(added),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(corpus(), trainer=trainer)
    return tok


def _train_llama_bpe(vocab_size: int = 600):
    """Llama-style BPE: "▁" word boundaries, byte fallback (<0x00>..<0xFF>), <unk> <s> </s> first."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="never", split=False)
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])
    byte_tokens = [f"<0x{i:02X}>" for i in range(256)]
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(LLAMA_SPECIAL) + byte_tokens,
                                  show_progress=False)
    tok.train_from_iterator(corpus(), trainer=trainer)
    return tok


def build_green_like(directory, *, hidden: int = 32, layers: int = 2, heads: int = 2, intermediate: int = 64,
                     seed: int = 0) -> Path:
    """A GREEN-shaped tiny Llama: a Llama-style BPE (byte fallback) with Llama's special tokens and GREEN's
    role tokens added after the vocabulary, as in the real repository's added_tokens.json."""
    import torch
    from tokenizers import processors
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    bpe = _train_llama_bpe()
    bos, eos = bpe.token_to_id("<s>"), bpe.token_to_id("</s>")
    bpe.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B",
                                                       special_tokens=[("<s>", bos)])
    fast = PreTrainedTokenizerFast(tokenizer_object=bpe, bos_token="<s>", eos_token="</s>", unk_token="<unk>",
                                   model_max_length=2048)
    fast.add_tokens(list(GREEN_ROLE_TOKENS))
    fast.save_pretrained(str(directory))
    # As the real repository: a custom tokenizer class reached through auto_map (remote code).
    cfg = json.loads((directory / "tokenizer_config.json").read_text())
    cfg.update({"tokenizer_class": "CheXagentTokenizer", "add_bos_token": True, "add_eos_token": False,
                "auto_map": {"AutoTokenizer": ["tokenization_chexagent.CheXagentTokenizer", None]}})
    _write_json(directory / "tokenizer_config.json", cfg)
    (directory / "tokenization_chexagent.py").write_text(
        "raise RuntimeError('remote tokenizer code must not run in tests')\n", encoding="utf-8")
    config = LlamaConfig(vocab_size=len(fast), hidden_size=hidden, intermediate_size=intermediate,
                         num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=heads,
                         max_position_embeddings=2048, bos_token_id=bos, eos_token_id=eos, pad_token_id=None,
                         tie_word_embeddings=False)
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config).eval()
    model.save_pretrained(str(directory))
    return directory


def build_llama(directory, *, hidden: int = 32, layers: int = 2, heads: int = 2, intermediate: int = 64,
                seed: int = 1, chat_template: str | None = None) -> Path:
    """A plain tiny Llama with a loadable fast tokenizer (reward-model backbone)."""
    import torch
    from tokenizers import processors
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    bpe = _train_bpe(LLAMA_SPECIAL)
    bos, eos = bpe.token_to_id("<s>"), bpe.token_to_id("</s>")
    bpe.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B",
                                                       special_tokens=[("<s>", bos)])
    fast = PreTrainedTokenizerFast(tokenizer_object=bpe, bos_token="<s>", eos_token="</s>", unk_token="<unk>",
                                   model_max_length=2048)
    if chat_template:
        fast.chat_template = chat_template
    fast.save_pretrained(str(directory))
    config = LlamaConfig(vocab_size=bpe.get_vocab_size(), hidden_size=hidden, intermediate_size=intermediate,
                         num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=heads,
                         max_position_embeddings=2048, bos_token_id=bos, eos_token_id=eos,
                         tie_word_embeddings=False)
    torch.manual_seed(seed)
    LlamaForCausalLM(config).eval().save_pretrained(str(directory))
    return directory


def build_gemma_like(directory, *, hidden: int = 32, layers: int = 2, heads: int = 2, kv_heads: int = 1,
                     head_dim: int = 16, intermediate: int = 64, sliding_window: int = 16, seed: int = 2) -> Path:
    """A Gemma-3-text-shaped tiny model with a Gemma-style chat template."""
    import torch
    from tokenizers import processors
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig, PreTrainedTokenizerFast

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    bpe = _train_bpe(GEMMA_SPECIAL)
    bos = bpe.token_to_id("<bos>")
    bpe.post_processor = processors.TemplateProcessing(single="$A", pair="$A $B", special_tokens=[])
    fast = PreTrainedTokenizerFast(tokenizer_object=bpe, bos_token="<bos>", eos_token="<eos>", unk_token="<unk>",
                                   pad_token="<pad>", model_max_length=4096)
    fast.chat_template = GEMMA_CHAT_TEMPLATE
    fast.save_pretrained(str(directory))
    end_of_turn = bpe.token_to_id("<end_of_turn>")
    config = Gemma3TextConfig(vocab_size=bpe.get_vocab_size(), hidden_size=hidden, intermediate_size=intermediate,
                              num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=kv_heads,
                              head_dim=head_dim, sliding_window=sliding_window, max_position_embeddings=4096,
                              query_pre_attn_scalar=head_dim, bos_token_id=bos,
                              eos_token_id=[bpe.token_to_id("<eos>"), end_of_turn],
                              pad_token_id=bpe.token_to_id("<pad>"), tie_word_embeddings=True)
    torch.manual_seed(seed)
    Gemma3ForCausalLM(config).eval().save_pretrained(str(directory))
    return directory


def build_lora_adapter(directory, base_dir, *, r: int = 4, seed: int = 3) -> Path:
    """A LoRA adapter (q_proj, v_proj) on ``base_dir`` saved with peft, with non-zero B so it changes outputs."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    directory = Path(directory)
    base = AutoModelForCausalLM.from_pretrained(str(base_dir))
    peft_model = get_peft_model(base, LoraConfig(r=r, lora_alpha=8, target_modules=["q_proj", "v_proj"],
                                                 lora_dropout=0.0, task_type="CAUSAL_LM"))
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in peft_model.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=g) * 0.5)
    peft_model.save_pretrained(str(directory))
    return directory


def build_reward_head(path, hidden: int, *, seed: int = 4, prefix: str = "") -> Path:
    """A linear reward head (hidden -> 1) saved as safetensors: ``{prefix}weight``, ``{prefix}bias``."""
    import torch
    from safetensors.torch import save_file

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    g = torch.Generator().manual_seed(seed)
    save_file({f"{prefix}weight": torch.randn(1, hidden, generator=g), f"{prefix}bias": torch.tensor([0.1])},
              str(path))
    return path
