"""Tiny random transformer models built locally, for tests and the device benchmark.

Nothing is downloaded: tokenizers are trained with ``tokenizers`` on a small
radiology-like corpus, models are built from a config with random weights and
saved with ``save_pretrained``, so the metrics' real loading code runs on them.
Works with transformers 4.x and 5.x (the tokenizer class is chosen by a
``tokenizer_config.json`` and built by ``AutoTokenizer`` from the vocabulary
files, then saved again with its ``tokenizer.json``).

* :func:`build_roberta` — byte-level BPE + RobertaModel (the BERTScore shape);
* :func:`build_bert` — WordPiece (uncased) + BERT config (CheXbert's tokenizer/config);
* :func:`build_chexbert_checkpoint` — a ``chexbert.pth`` as upstream saves it:
  ``{"model_state_dict": {"module.bert.…", "module.linear_heads.{i}.…"}}``;
* :func:`write_baseline` — a bert-score rescaling table (``LAYER,P,R,F``).
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
    "diaphragm tip not visualized internal jugular central venous catheter ends mid svc median sternotomy wires "
    "mediastinal clips intact moderate cardiomegaly unchanged from prior study no acute osseous abnormality "
    "identified degenerative changes noted thoracic spine hilar contours interval improvement edema has slightly "
    "worsened calcified granuloma upper stable pacemaker leads atrium ventricle aortic knob calcification present "
    "volumes low crowding bronchovascular markings subsegmental base apical hyperinflation consistent emphysema "
    "elevation hemidiaphragm again free air beneath multiple rib fractures healing findings impression "
    "cardiopulmonary process support devices standard position recommend follow-up radiograph evidence disease"
).split()
EXTRA = ("Findings:", "Impression:", "AP", "PA", "lateral", "views", "1.5", "4", "10", "mm", "°", "µ", "é", "x",
         "(", ")", ",", ".", ";", "-", "/", "___", "'", '"', "?", "!", "%", "\n", "\t")


def corpus(n: int = 3000, seed: int = 0) -> list[str]:
    """Radiology-like sentences (mixed case, punctuation, digits, a little unicode)."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        words = [rng.choice(WORDS) for _ in range(rng.randint(3, 18))]
        if rng.random() < 0.3:
            words.insert(rng.randint(0, len(words)), rng.choice(EXTRA))
        text = " ".join(words)
        out.append(text[0].upper() + text[1:] + rng.choice([".", ".", ".", ",", ""]))
    return out


def _write_json(path: Path, obj):
    path.write_text(json.dumps(obj, indent=1), encoding="utf-8")


def _finish_tokenizer(directory: Path, tokenizer_config: dict):
    """Let AutoTokenizer build the tokenizer from the vocabulary files, and save it with tokenizer.json."""
    from transformers import AutoTokenizer

    _write_json(directory / "tokenizer_config.json", tokenizer_config)
    tok = AutoTokenizer.from_pretrained(str(directory), use_fast=True)
    tok.save_pretrained(str(directory))
    return tok


def _layernorm_shift(model, scale: float, seed: int):
    """Add one shared random direction to every LayerNorm bias, so token vectors share a common
    component and their cosines are positive, as in trained models (random ones are isotropic)."""
    import torch

    g = torch.Generator().manual_seed(seed + 1)
    hidden = model.config.hidden_size
    direction = torch.randn(hidden, generator=g)
    direction = direction / direction.norm() * scale
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, torch.nn.LayerNorm):
                module.bias.add_(direction)


def build_roberta(directory, *, hidden: int = 32, layers: int = 3, heads: int = 2, intermediate: int = 64,
                  vocab_size: int = 600, max_length: int = 128, seed: int = 0, shift: float = 1.0,
                  texts=None) -> Path:
    """A RoBERTa with a byte-level BPE tokenizer (distilroberta-base shape: hidden 768, layers 6,
    heads 12, intermediate 3072, max_length 512)."""
    import torch
    from tokenizers import ByteLevelBPETokenizer
    from transformers import RobertaConfig, RobertaModel

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(texts or corpus(), vocab_size=vocab_size, min_frequency=1, show_progress=False,
                            special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
    bpe.save_model(str(directory))  # vocab.json, merges.txt
    config = RobertaConfig(vocab_size=bpe.get_vocab_size(), hidden_size=hidden, num_hidden_layers=layers,
                           num_attention_heads=heads, intermediate_size=intermediate,
                           max_position_embeddings=max_length + 2, type_vocab_size=1, pad_token_id=1,
                           bos_token_id=0, eos_token_id=2)
    config.save_pretrained(str(directory))
    _finish_tokenizer(directory, {"tokenizer_class": "RobertaTokenizer", "model_max_length": max_length,
                                  "add_prefix_space": False, "bos_token": "<s>", "eos_token": "</s>",
                                  "sep_token": "</s>", "cls_token": "<s>", "unk_token": "<unk>",
                                  "pad_token": "<pad>", "mask_token": "<mask>"})
    torch.manual_seed(seed)
    model = RobertaModel(config)
    _layernorm_shift(model, shift, seed)
    model.save_pretrained(str(directory))
    return directory


def build_bert(directory, *, hidden: int = 32, layers: int = 2, heads: int = 2, intermediate: int = 64,
               vocab_size: int = 600, max_length: int = 512, weights: bool = False, seed: int = 0,
               initializer_range: float = 0.2, texts=None) -> Path:
    """An uncased WordPiece tokenizer and a BERT config (bert-base-uncased shape: hidden 768,
    layers 12, heads 12, intermediate 3072); ``weights`` also saves a random BertModel.

    The default initializer_range (0.2, ten times BERT's) makes the random encoder contextual
    enough that CLS vectors of different reports differ (cosines ~0.2-0.9, not 0.99999)."""
    from tokenizers import BertWordPieceTokenizer
    from transformers import BertConfig

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    wp = BertWordPieceTokenizer(lowercase=True)
    wp.train_from_iterator(texts or corpus(), vocab_size=vocab_size, min_frequency=1, show_progress=False,
                           special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
    wp.save_model(str(directory))  # vocab.txt
    config = BertConfig(vocab_size=wp.get_vocab_size(), hidden_size=hidden, num_hidden_layers=layers,
                        num_attention_heads=heads, intermediate_size=intermediate,
                        max_position_embeddings=max(max_length, 512), pad_token_id=0,
                        initializer_range=initializer_range)
    config.save_pretrained(str(directory))
    _finish_tokenizer(directory, {"tokenizer_class": "BertTokenizer", "do_lower_case": True,
                                  "model_max_length": max_length, "unk_token": "[UNK]", "sep_token": "[SEP]",
                                  "pad_token": "[PAD]", "cls_token": "[CLS]", "mask_token": "[MASK]"})
    if weights:
        import torch
        from transformers import BertModel

        torch.manual_seed(seed)
        BertModel(config).save_pretrained(str(directory))
    return directory


def build_chexbert_checkpoint(path, bert_dir, *, seed: int = 0, texts=None) -> Path:
    """A CheXbert checkpoint for the BERT config and tokenizer in ``bert_dir``: encoder + 13
    four-way heads + one two-way head, saved as upstream's DataParallel training did ("module."
    prefixes under "model_state_dict").

    A random encoder gives CLS vectors that differ little from text to text, so the heads are
    fitted to spread them: each head projects the centred CLS vectors of a sample corpus on random
    directions scaled by their spread, so every class occurs and labels vary from report to report.
    """
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel

    config = BertConfig.from_pretrained(str(bert_dir))
    torch.manual_seed(seed)
    bert = BertModel(config).eval()  # with the pooler, as upstream's bert_labeler has it
    tok = AutoTokenizer.from_pretrained(str(bert_dir))
    sample = texts or corpus(400, seed=seed + 11)
    with torch.no_grad():
        enc = tok(sample, padding=True, truncation=True, max_length=128, return_tensors="pt")
        cls = bert(**enc).last_hidden_state[:, 0]
    mean, std = cls.mean(0), cls.std(0) + 1e-6
    state = {f"module.bert.{k}": v for k, v in bert.state_dict().items()}
    g = torch.Generator().manual_seed(seed + 7)
    for i in range(14):
        classes = 4 if i < 13 else 2
        w = torch.randn(classes, config.hidden_size, generator=g) / std / config.hidden_size ** 0.5
        state[f"module.linear_heads.{i}.weight"] = w
        state[f"module.linear_heads.{i}.bias"] = -(w @ mean) + 0.1 * torch.randn(classes, generator=g)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"epoch": 1, "model_state_dict": state}, str(path))
    return path


def write_baseline(path, rows) -> Path:
    """bert-score's rescaling table: header LAYER,P,R,F, one (P, R, F) row per layer from 0."""
    path = Path(path)
    lines = ["LAYER,P,R,F"] + [f"{i},{p},{r},{f}" for i, (p, r, f) in enumerate(rows)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path
