"""Random-weight vision-language models built locally, for the backbone tests and the device benchmark.

Nothing is downloaded. A word-level tokenizer is built with ``tokenizers`` from a
small radiology-like vocabulary plus the special tokens each architecture
needs, models are built from configs with random weights and saved with
``save_pretrained`` next to their processors, so radrank's real loading code
(``from_pretrained`` from a local directory, offline) runs on them.

* :func:`build_gemma3` — ``Gemma3ForConditionalGeneration`` (SigLIP vision tower,
  Gemma 3 text decoder) + ``Gemma3Processor`` (PIL image processor, a Gemma-style
  chat template written here, ``<start_of_image>`` / ``<image_soft_token>`` /
  ``<end_of_image>`` tokens): the MedGemma architecture, any size;
* :func:`build_maira2_like` — ``LlavaForConditionalGeneration`` (CLIP vision tower,
  Llama decoder) saved with *remote code* of our own: a model class and a
  processor class with MAIRA-2's processor interface (``format_reporting_input``
  returning ``(prompt, images)`` with INDICATION / TECHNIQUE / COMPARISON slots,
  ``convert_output_to_plaintext_or_grounded_sequence``), so the MAIRA-2 recipe,
  including its ``trust_remote_code`` path, runs offline;
* :func:`synthetic_cxr` — grey PIL images with a chest-X-ray-like intensity layout.

Works with transformers 4.46+ and 5.x.
"""

from __future__ import annotations

import json
from pathlib import Path

WORDS = (
    "the lungs are clear without focal consolidation pleural effusion pneumothorax is seen heart size normal "
    "mildly enlarged cardiomediastinal silhouette within limits there mild pulmonary vascular congestion small "
    "bilateral effusions with bibasilar atelectasis patchy opacity in right lower lobe may reflect pneumonia "
    "left basilar likely represents endotracheal tube terminates cm above carina no acute process findings "
    "impression indication cough fever dyspnea chest pain evaluate for write describe radiology report this "
    "x-ray x ray question answer yes what where image section of clinical concisely about user model assistant "
    "technique comparison n/a frontal lateral view pa ap provide structured description given current"
).split()
PUNCT = tuple(".,:;?!()/-'\"")

GEMMA_SPECIAL = ("<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>", "<start_of_image>",
                 "<end_of_image>", "<image_soft_token>")

# A Gemma-3-style chat template (turn markers, images where their content entries are).
GEMMA_CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "<start_of_turn>{{ 'model' if message['role'] == 'assistant' else message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}"
    "{% for item in message['content'] %}{% if item['type'] == 'image' %}<start_of_image>"
    "{% elif item['type'] == 'text' %}{{ item['text'] }}{% endif %}{% endfor %}{% endif %}"
    "<end_of_turn>\n{% endfor %}{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"
)


def word_tokenizer(special, words=WORDS, *, vocab_size: int | None = None, **kwargs):
    """A PreTrainedTokenizerFast over ``special`` + ``words`` (+ filler words up to ``vocab_size``)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {}
    for token in (*special, *PUNCT, *sorted(set(words))):
        vocab.setdefault(token, len(vocab))
    if vocab_size is not None:
        i = 0
        while len(vocab) < vocab_size:
            vocab.setdefault(f"w{i}", len(vocab))
            i += 1
    unk = next(t for t in special if "unk" in t)
    tk = Tokenizer(models.WordLevel(vocab, unk_token=unk))
    tk.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation()])
    tk.decoder = decoders.WordPiece(prefix="##", cleanup=True)  # joins words with spaces
    return PreTrainedTokenizerFast(tokenizer_object=tk, **kwargs)


def _pil_image_processor(name: str, **kwargs):
    """The PIL-backend image processor class ``name`` (transformers 5: ``<name>Pil``; 4.x: the slow one)."""
    import transformers

    cls = getattr(transformers, name + "Pil", None) or getattr(transformers, name)
    return cls(**kwargs)


def build_gemma3(directory, *, hidden: int = 32, layers: int = 2, heads: int = 2, kv_heads: int = 1,
                 head_dim: int = 16, intermediate: int = 64, vision_hidden: int = 32, vision_layers: int = 1,
                 vision_heads: int = 2, vision_intermediate: int = 64, image_size: int = 32, patch_size: int = 8,
                 mm_tokens: int = 4, vocab_size: int | None = None, seed: int = 0, dtype: str = "float32",
                 init_std: float = 0.02, tie_embeddings: bool = True) -> Path:
    """A random Gemma3ForConditionalGeneration + Gemma3Processor saved to ``directory``.

    ``mm_tokens`` (image tokens per image) must be a square whose side divides
    ``image_size // patch_size`` (the projector average-pools the patch grid).
    With ``tie_embeddings`` off the output head has weights of its own: a tiny random
    model with tied embeddings mostly repeats its last input token, one without
    answers differently per prompt and image (what an equality test needs).
    """
    import torch
    from transformers import (Gemma3Config, Gemma3ForConditionalGeneration, Gemma3Processor, Gemma3TextConfig,
                              SiglipVisionConfig)

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    tok = word_tokenizer(GEMMA_SPECIAL, vocab_size=vocab_size, bos_token="<bos>", eos_token="<eos>",
                         pad_token="<pad>", unk_token="<unk>", additional_special_tokens=list(GEMMA_SPECIAL[4:]),
                         extra_special_tokens={"boi_token": "<start_of_image>", "eoi_token": "<end_of_image>",
                                               "image_token": "<image_soft_token>"})
    ids = {t: tok.convert_tokens_to_ids(t) for t in GEMMA_SPECIAL}
    image_processor = _pil_image_processor("Gemma3ImageProcessor", size={"height": image_size, "width": image_size})
    processor = Gemma3Processor(image_processor=image_processor, tokenizer=tok, chat_template=GEMMA_CHAT_TEMPLATE,
                                image_seq_length=mm_tokens)
    text = Gemma3TextConfig(vocab_size=len(tok) if vocab_size is None else max(vocab_size, len(tok)),
                            hidden_size=hidden, intermediate_size=intermediate, num_hidden_layers=layers,
                            num_attention_heads=heads, num_key_value_heads=kv_heads, head_dim=head_dim,
                            max_position_embeddings=4096, sliding_window=512, query_pre_attn_scalar=head_dim,
                            pad_token_id=ids["<pad>"], eos_token_id=ids["<eos>"], bos_token_id=ids["<bos>"],
                            initializer_range=init_std)
    vision = SiglipVisionConfig(hidden_size=vision_hidden, intermediate_size=vision_intermediate,
                                num_hidden_layers=vision_layers, num_attention_heads=vision_heads,
                                image_size=image_size, patch_size=patch_size,
                                vision_use_head=False)  # as MedGemma's config: Gemma 3 has no pooling head
    config = Gemma3Config(text_config=text, vision_config=vision, mm_tokens_per_image=mm_tokens,
                          boi_token_index=ids["<start_of_image>"], eoi_token_index=ids["<end_of_image>"],
                          image_token_index=ids["<image_soft_token>"], initializer_range=init_std,
                          tie_word_embeddings=tie_embeddings)
    text.tie_word_embeddings = tie_embeddings
    for key in ("pad_token_id", "eos_token_id", "bos_token_id"):
        setattr(config, key, getattr(text, key))
    torch.manual_seed(seed)
    model = Gemma3ForConditionalGeneration(config).to(getattr(torch, dtype)).eval()
    model.generation_config.eos_token_id = [ids["<eos>"], ids["<end_of_turn>"]]
    model.generation_config.pad_token_id = ids["<pad>"]
    model.save_pretrained(str(directory))
    processor.save_pretrained(str(directory))
    return directory


# --- a MAIRA-2-like checkpoint with remote code ------------------------------------------------------

LLAMA_SPECIAL = ("<unk>", "<s>", "</s>", "<pad>", "<image>")

_MODELING = '''"""Test-only remote code: a LLaVA model standing in for MAIRA-2's Maira2ForConditionalGeneration."""
from transformers import LlavaForConditionalGeneration


class TinyMairaForConditionalGeneration(LlavaForConditionalGeneration):
    pass
'''

_PROCESSING = '''"""Test-only remote code: MAIRA-2's processor interface on a LlavaProcessor (radrank tests)."""
from transformers import LlavaProcessor


class TinyMairaProcessor(LlavaProcessor):
    def format_reporting_input(self, current_frontal, current_lateral, prior_frontal, indication, technique,
                               comparison, prior_report, get_grounding=False, assistant_text=None):
        images = [current_frontal] + ([current_lateral] if current_lateral is not None else [])
        marks = " ".join(["<image>"] * len(images))
        text = (f"USER: frontal {marks} provide structured description of the findings . "
                f"INDICATION: {indication or 'n/a'} TECHNIQUE: {technique or 'n/a'} "
                f"COMPARISON: {comparison or 'n/a'} ASSISTANT:")
        return text, images

    def convert_output_to_plaintext_or_grounded_sequence(self, text):
        return text.strip()
'''


def build_maira2_like(directory, *, hidden: int = 32, layers: int = 2, heads: int = 2, intermediate: int = 64,
                      vision_hidden: int = 32, vision_layers: int = 1, image_size: int = 32, patch_size: int = 8,
                      seed: int = 0, init_std: float = 0.2) -> Path:
    """A random LLaVA (CLIP + Llama) saved with MAIRA-2-style remote code (model + processor classes)."""
    import torch
    from transformers import CLIPVisionConfig, LlamaConfig, LlavaConfig, LlavaForConditionalGeneration, LlavaProcessor

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    tok = word_tokenizer(LLAMA_SPECIAL, bos_token="<s>", eos_token="</s>", pad_token="<pad>", unk_token="<unk>",
                         additional_special_tokens=["<image>"])
    image_id = tok.convert_tokens_to_ids("<image>")
    image_processor = _pil_image_processor("CLIPImageProcessor", size={"shortest_edge": image_size},
                                           crop_size={"height": image_size, "width": image_size})
    processor = LlavaProcessor(image_processor=image_processor, tokenizer=tok, patch_size=patch_size,
                               vision_feature_select_strategy="default", num_additional_image_tokens=1)
    text = LlamaConfig(vocab_size=len(tok), hidden_size=hidden, intermediate_size=intermediate,
                       num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=heads,
                       max_position_embeddings=2048, pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id,
                       eos_token_id=tok.eos_token_id, initializer_range=init_std)
    vision = CLIPVisionConfig(hidden_size=vision_hidden, intermediate_size=intermediate,
                              num_hidden_layers=vision_layers, num_attention_heads=heads, image_size=image_size,
                              patch_size=patch_size, projection_dim=vision_hidden)
    config = LlavaConfig(vision_config=vision, text_config=text, image_token_index=image_id,
                         vision_feature_select_strategy="default", vision_feature_layer=-1)
    config.initializer_range = init_std
    config.image_seq_length = (image_size // patch_size) ** 2  # transformers 4.4x: tokens the processor expands to
    vision.initializer_range = init_std
    config.pad_token_id = tok.pad_token_id
    torch.manual_seed(seed)
    model = LlavaForConditionalGeneration(config).eval()
    model.generation_config.eos_token_id = tok.eos_token_id
    model.generation_config.pad_token_id = tok.pad_token_id
    model.save_pretrained(str(directory))
    processor.save_pretrained(str(directory))
    _llava_keys_as_loaded(directory)
    (directory / "modeling_tinymaira.py").write_text(_MODELING)
    (directory / "processing_tinymaira.py").write_text(_PROCESSING)
    cfg = json.loads((directory / "config.json").read_text())
    cfg["auto_map"] = {"AutoModelForCausalLM": "modeling_tinymaira.TinyMairaForConditionalGeneration"}
    (directory / "config.json").write_text(json.dumps(cfg, indent=2))
    for name in ("processor_config.json", "preprocessor_config.json", "tokenizer_config.json"):
        path = directory / name
        if path.is_file():
            data = json.loads(path.read_text())
            data.setdefault("auto_map", {})["AutoProcessor"] = "processing_tinymaira.TinyMairaProcessor"
            if name == "processor_config.json" or "processor_class" in data:
                data["processor_class"] = "TinyMairaProcessor"
            path.write_text(json.dumps(data, indent=2))
    if not (directory / "processor_config.json").is_file():
        (directory / "processor_config.json").write_text(json.dumps(
            {"processor_class": "TinyMairaProcessor", "patch_size": patch_size,
             "vision_feature_select_strategy": "default", "num_additional_image_tokens": 1,
             "auto_map": {"AutoProcessor": "processing_tinymaira.TinyMairaProcessor"}}, indent=2))
    return directory


def _llava_keys_as_loaded(directory: Path):
    """transformers 5 saves LLaVA weights under the legacy names and renames them when loading by class;
    a class reached through remote code (``auto_map``) is loaded without that renaming, so the weights are
    stored here under the names the v5 module tree uses (transformers 4.x: left as they are)."""
    import transformers
    from safetensors.torch import load_file, save_file

    if int(transformers.__version__.split(".")[0]) < 5:
        return
    path = directory / "model.safetensors"
    tensors = load_file(str(path))
    renames = (("language_model.lm_head.", "lm_head."), ("language_model.model.", "model.language_model."),
               ("vision_tower.", "model.vision_tower."), ("multi_modal_projector.", "model.multi_modal_projector."))
    out = {}
    for key, value in tensors.items():
        for old, new in renames:
            if key.startswith(old):
                key = new + key[len(old):]
                break
        out[key] = value.contiguous()
    save_file(out, str(path), metadata={"format": "pt"})


# --- images --------------------------------------------------------------------------------------------


def synthetic_cxr(size=(96, 80), seed: int = 0, mode: str = "L"):
    """A grey image with two dark lung fields, a bright mediastinum and noise (PIL)."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(seed)
    h, w = size
    y, x = np.mgrid[0:h, 0:w].astype("float32")
    img = 0.75 - 0.45 * (np.exp(-(((x - 0.3 * w) / (0.14 * w)) ** 2 + ((y - 0.5 * h) / (0.3 * h)) ** 2))
                         + np.exp(-(((x - 0.7 * w) / (0.14 * w)) ** 2 + ((y - 0.5 * h) / (0.3 * h)) ** 2)))
    img = np.clip(img + 0.05 * rng.standard_normal((h, w)), 0, 1)
    return Image.fromarray((img * 255).astype("uint8"), mode="L").convert(mode)
