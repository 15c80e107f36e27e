"""Stand-ins for what cannot run offline: CheXagent-2's remote tokenizer/model and LLaVA-Rad's `llava` package.

They imitate the interfaces the recipes call (documented in radrank.backbones.chexagent2 /
llava_rad) and record what they are given, so the recipes' real code is checked:
prompts, image paths, left padding, grouping by length, decoding and order.
"""

from __future__ import annotations

import textwrap
from pathlib import Path


class WordTokenizer:
    """Whitespace tokenizer with a growing vocabulary; id 0 pad, 1 eos."""

    def __init__(self, pad: bool = True):
        self.vocab = {"<pad>": 0, "</s>": 1}
        self.words = ["<pad>", "</s>"]
        self.eos_token_id = 1
        self.pad_token_id = 0 if pad else None

    def ids(self, text: str) -> list:
        out = []
        for w in text.split():
            if w not in self.vocab:
                self.vocab[w] = len(self.words)
                self.words.append(w)
            out.append(self.vocab[w])
        return out

    def __call__(self, text):
        class Enc:
            pass

        enc = Enc()
        enc.input_ids = self.ids(text)
        return enc

    def decode(self, ids, skip_special_tokens=False):
        words = [self.words[i] for i in ids if 0 <= i < len(self.words)]
        if skip_special_tokens:
            words = [w for w in words if w not in ("<pad>", "</s>")]
        return " ".join(words)


class CheXagentTokenizer(WordTokenizer):
    """CheXagent-2's tokenizer interface: from_list_format (image *paths* in the text), apply_chat_template."""

    def __init__(self):
        super().__init__(pad=False)  # the recipe falls back to EOS as pad
        self.seen_paths = []

    def from_list_format(self, items):
        parts, n = [], 0
        for item in items:
            if "image" in item:
                n += 1
                path = Path(item["image"])
                assert path.is_file(), f"image path {path} does not exist when the prompt is built"
                self.seen_paths.append(str(path))
                parts.append(f"Picture {n}: <img>{path}</img>\n")
            else:
                parts.append(item["text"])
        return "".join(parts)

    def apply_chat_template(self, conv, add_generation_prompt=True):
        text = " ".join(f"<|{m['from']}|> {m['value']}" for m in conv)
        return self.ids(text + (" <|assistant|>" if add_generation_prompt else ""))


class EchoModel:
    """generate(): checks left padding, answers with the last word of the prompt before the assistant tag."""

    def __init__(self, tokenizer, returns_prompt: bool = True):
        from transformers import GenerationConfig

        self.tok = tokenizer
        self.generation_config = GenerationConfig(eos_token_id=tokenizer.eos_token_id)
        self.returns_prompt = returns_prompt
        self.calls = []
        self.config = type("Config", (), {"mm_use_im_start_end": False})()

    def _answer(self, ids: list) -> list:
        words = [self.tok.words[i] for i in ids if i >= 0]
        words = [w for w in words if w not in ("<pad>",) and not w.startswith("<|")]
        content = [w for w in words if w not in ("ASSISTANT:",)]
        return self.tok.ids(f"re:{content[-1]}") + [self.tok.eos_token_id]

    def generate(self, input_ids=None, attention_mask=None, images=None, generation_config=None, **kw):
        import torch

        assert generation_config.do_sample is False and generation_config.num_beams == 1
        self.calls.append({"input_ids": input_ids.clone(), "attention_mask": None if attention_mask is None else
                           attention_mask.clone(), "images": None if images is None else tuple(images.shape)})
        rows = []
        for r in range(input_ids.shape[0]):
            ids = input_ids[r].tolist()
            if attention_mask is not None:
                mask = attention_mask[r].tolist()
                first = mask.index(1)
                assert all(m == 0 for m in mask[:first]) and all(m == 1 for m in mask[first:]), "not left-padded"
                ids = ids[first:]
            rows.append(self._answer(ids))
        width = max(len(r) for r in rows)
        new = torch.tensor([r + [generation_config.pad_token_id] * (width - len(r)) for r in rows])
        return torch.cat([input_ids.cpu(), new], dim=1) if self.returns_prompt else new


class ImageProcessor:
    def preprocess(self, image, return_tensors="pt"):
        import numpy as np
        import torch

        arr = np.asarray(image.convert("RGB").resize((8, 8)), dtype="float32") / 255.0
        return {"pixel_values": torch.from_numpy(arr).permute(2, 0, 1)[None]}


LLAVA_FILES = {
    "llava/__init__.py": "",
    "llava/constants.py": """
        IMAGE_TOKEN_INDEX = -200
        DEFAULT_IMAGE_TOKEN = "<image>"
        DEFAULT_IM_START_TOKEN = "<im_start>"
        DEFAULT_IM_END_TOKEN = "<im_end>"
    """,
    "llava/conversation.py": """
        import copy


        class Conversation:
            def __init__(self, system, roles, sep=" ", sep2="</s>"):
                self.system, self.roles, self.sep, self.sep2 = system, roles, sep, sep2
                self.messages = []

            def copy(self):
                return copy.deepcopy(self)

            def append_message(self, role, message):
                self.messages.append((role, message))

            def get_prompt(self):
                out = self.system + self.sep
                for role, message in self.messages:
                    out += f"{role}: {message}{self.sep}" if message else f"{role}:"
                return out


        conv_templates = {"v1": Conversation("A chat.", ("USER", "ASSISTANT"))}
    """,
    "llava/mm_utils.py": """
        import torch


        def tokenizer_image_token(prompt, tokenizer, image_token_index, return_tensors=None):
            chunks = prompt.split("<image>")
            ids = []
            for i, chunk in enumerate(chunks):
                if i:
                    ids.append(image_token_index)
                ids.extend(tokenizer(chunk).input_ids)
            return torch.tensor(ids, dtype=torch.long) if return_tensors == "pt" else ids
    """,
    "llava/model/__init__.py": "",
    "llava/model/builder.py": """
        CALLS = []
        FACTORY = None  # set by the test: (model_path, model_base) -> (tokenizer, model, image_processor)


        def load_pretrained_model(model_path, model_base, model_name, load_8bit=False, load_4bit=False,
                                  device_map="auto", device="cuda"):
            CALLS.append(dict(model_path=model_path, model_base=model_base, model_name=model_name,
                              device_map=device_map, device=device))
            tokenizer, model, image_processor = FACTORY(model_path, model_base)
            return tokenizer, model, image_processor, 2048
    """,
}


def write_fake_llava(root: Path) -> Path:
    for rel, text in LLAVA_FILES.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root

