"""A tiny random Gemma-3 model of CRIMSON's class, built here (no download).

``rajpurkarlab/medgemma-4b-it-crimson`` is a MedGemma-4B-it fine-tune:
``Gemma3ForConditionalGeneration`` (SigLIP vision tower + Gemma-3 text model), loaded by
crimson-score through ``transformers.pipeline("text-generation", ...)``. ``build`` writes a
model of that class with a 2-layer, 32-wide text model, a 1-layer vision tower, a byte-level
BPE tokenizer trained here on a few sentences and on the package's own prompt text (so prompts
stay short in tokens), a chat template of our own and a
``generation_config.json`` (greedy, few new tokens).

With ``answer`` set, the weights are arranged so that greedy decoding is deterministic:
the answer text is one added token, whose logit dominates after the prompt's last token,
and the end-of-sequence token dominates after it (a large one-hot embedding in a dimension
of its own rides the residual stream through the small random layers, and the untied
``lm_head`` reads that dimension). So the real pipeline produces exactly ``answer``, and
the scoring path downstream of generation runs on a known text. Without ``answer`` the
weights stay random and the model writes junk.
"""

from __future__ import annotations

import json
from pathlib import Path

CORPUS = [
    "No acute cardiopulmonary process.",
    "Small bilateral pleural effusions with bibasilar atelectasis.",
    "Mild cardiomegaly. No pleural effusion.",
    "The heart size is normal. The lungs are clear.",
    "Left lower lobe consolidation concerning for pneumonia.",
    "You are an expert radiology evaluator that assesses the accuracy of radiology reports.",
    "Reference Findings (Ground Truth): Predicted Findings (Candidate): Patient Context: age indication",
    "{\"reference_findings\": [], \"predicted_findings\": [], \"matched_findings\": [], \"errors\": {}}",
]
SPECIAL = ["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>",
           "<start_of_image>", "<end_of_image>", "<image_soft_token>"]
# Our own minimal template (system text folded into the first user turn, as Gemma does).
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% set ns = namespace(system='') %}"
    "{% for m in messages %}"
    "{% if m['role'] == 'system' %}{% set ns.system = m['content'] + '\n\n' %}"
    "{% else %}"
    "<start_of_turn>{{ 'model' if m['role'] == 'assistant' else m['role'] }}\n"
    "{% if m['role'] == 'user' %}{{ ns.system }}{% set ns.system = '' %}{% endif %}"
    "{{ m['content'] }}<end_of_turn>\n"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"
)


def _prompt_corpus() -> list[str]:
    """CRIMSON prompts rendered by the installed package, so that the tokenizer learns their
    words and a prompt is a few thousand tokens, not ten thousand bytes (keeps tests fast)."""
    try:
        from CRIMSON.prompt_parts import build_prompt
    except ImportError:
        return []
    return [build_prompt("Reference report.", "Candidate report.", patient_context={"age": "1", "indication": "x"},
                         include_significance_examples=g, include_attribute_guidelines=g,
                         include_context_guidelines=g) for g in (True, False)]


def _tokenizer(answer: str | None):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=3000, special_tokens=SPECIAL, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(CORPUS + _prompt_corpus(), trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<bos>", eos_token="<eos>",
                                   pad_token="<pad>", unk_token="<unk>", padding_side="left")
    if answer is not None:
        fast.add_tokens([answer])
    fast.chat_template = CHAT_TEMPLATE
    return fast


def build(directory, answer: str | None = None, max_new_tokens: int = 12, seed: int = 0) -> Path:
    import torch
    from transformers import Gemma3Config, Gemma3ForConditionalGeneration, GenerationConfig

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    tok = _tokenizer(answer)
    ids = {t: tok.convert_tokens_to_ids(t) for t in SPECIAL}
    text = dict(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                num_attention_heads=2, num_key_value_heads=1, head_dim=16, max_position_embeddings=4096,
                sliding_window=64, pad_token_id=ids["<pad>"], bos_token_id=ids["<bos>"],
                eos_token_id=ids["<eos>"], tie_word_embeddings=False)
    vision = dict(model_type="siglip_vision_model", hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                  num_attention_heads=2, image_size=28, patch_size=14)
    config = Gemma3Config(text_config=text, vision_config=vision, mm_tokens_per_image=4,
                          boi_token_index=ids["<start_of_image>"], eoi_token_index=ids["<end_of_image>"],
                          image_token_index=ids["<image_soft_token>"], tie_word_embeddings=False,
                          pad_token_id=ids["<pad>"], bos_token_id=ids["<bos>"], eos_token_id=ids["<eos>"])
    torch.manual_seed(seed)
    model = Gemma3ForConditionalGeneration(config).eval()
    if answer is not None:
        prompt = tok.apply_chat_template([{"role": "user", "content": "x"}], add_generation_prompt=True,
                                         tokenize=True, return_dict=False)
        last = prompt[-1] if isinstance(prompt[-1], int) else prompt["input_ids"][-1]
        answer_id = tok.convert_tokens_to_ids(answer)
        eos = ids["<eos>"]
        emb = model.get_input_embeddings().weight
        head = model.get_output_embeddings().weight
        with torch.no_grad():
            for i, (src, dst) in enumerate(((last, answer_id), (answer_id, eos))):
                emb[src].zero_()
                emb[src, i] = 100.0
                head[dst].zero_()
                head[dst, i] = 100.0
    model.save_pretrained(directory)
    tok.save_pretrained(directory)
    GenerationConfig(do_sample=False, max_new_tokens=max_new_tokens, bos_token_id=ids["<bos>"],
                     eos_token_id=ids["<eos>"], pad_token_id=ids["<pad>"]).save_pretrained(directory)
    (directory / "tiny.json").write_text(json.dumps({"answer": answer}))
    return directory
