"""Tiny random stand-ins for RaTEScore's two models, built and saved locally (nothing downloaded).

* NER model (stands in for Angelakeke/RaTE-NER-Deberta): a 2-layer, 32-wide
  ``DebertaV2ForTokenClassification`` whose config carries the BIO label set the
  package reads (``AutoConfig(...).id2label``; entity types ABNORMALITY,
  NON-ABNORMALITY, DISEASE, NON-DISEASE, ANATOMY — the types of its affinity
  matrices), with a SentencePiece-style tokenizer (Unigram + Metaspace, "▁"
  pieces, "[CLS]"/"[SEP]" specials as DeBERTa-v3 has them; the package's
  post-processing skips exactly those two tokens) trained here with ``tokenizers``.
* Eval model (stands in for FremyCompany/BioLORD-2023-C): a 2-layer, 32-wide
  ``BertModel`` with a WordPiece tokenizer trained here; the package embeds
  entities by the last hidden state of the first token.

The classifier's output layer is scaled and its "O" bias raised so that a random
model tags some tokens as entities of varied types, not every token and not none.
"""

from __future__ import annotations

import random
from pathlib import Path

TYPES = ("ABNORMALITY", "NON-ABNORMALITY", "DISEASE", "NON-DISEASE", "ANATOMY")
LABELS = ("O",) + tuple(f"{p}-{t}" for t in TYPES for p in ("B", "I"))
SPECIALS = ["[PAD]", "[CLS]", "[SEP]", "[UNK]", "[MASK]"]

WORDS = ("no acute cardiopulmonary process small bilateral pleural effusions with bibasilar atelectasis mild "
         "cardiomegaly effusion clear lungs heart size is normal the are there pneumothorax left lower lobe "
         "consolidation concerning for pneumonia right upper opacity possibly or infection endotracheal tube "
         "terminates cm above carina unchanged pulmonary edema stable enlarged silhouette focal").split()


def corpus(n: int = 600, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        words = [rng.choice(WORDS) for _ in range(rng.randint(3, 12))]
        text = " ".join(words)
        out.append(text[0].upper() + text[1:] + rng.choice([".", ".", ",", ""]))
    return out


def build_ner(directory, seed: int = 0, o_bias: float = 1.5, scale: float = 8.0) -> Path:
    import torch
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import DebertaV2Config, DebertaV2ForTokenClassification, PreTrainedTokenizerFast

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer(models.Unigram())
    tok.normalizer = normalizers.NFKC()
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    tok.train_from_iterator(corpus(seed=seed), trainers.UnigramTrainer(
        vocab_size=300, special_tokens=SPECIALS, unk_token="[UNK]", show_progress=False))
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]",
        special_tokens=[("[CLS]", tok.token_to_id("[CLS]")), ("[SEP]", tok.token_to_id("[SEP]"))])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="[PAD]", cls_token="[CLS]", sep_token="[SEP]",
                                   unk_token="[UNK]", mask_token="[MASK]", model_max_length=512)
    fast.save_pretrained(str(directory))
    config = DebertaV2Config(
        vocab_size=tok.get_vocab_size(), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=37, max_position_embeddings=512, relative_attention=True, position_buckets=32,
        max_relative_positions=-1, pos_att_type=["p2c", "c2p"], position_biased_input=False,
        pad_token_id=tok.token_to_id("[PAD]"), num_labels=len(LABELS),
        id2label=dict(enumerate(LABELS)), label2id={label: i for i, label in enumerate(LABELS)})
    torch.manual_seed(seed)
    model = DebertaV2ForTokenClassification(config)
    with torch.no_grad():
        model.classifier.weight.mul_(scale)
        model.classifier.bias.zero_()
        model.classifier.bias[0] = o_bias
    model.save_pretrained(str(directory))
    return directory


def build_eval(directory, seed: int = 0, init_range: float = 0.5) -> Path:
    import torch
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import BertConfig, BertModel, PreTrainedTokenizerFast

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    # An uncased WordPiece tokenizer built as a `tokenizers` object (transformers 5's BertTokenizerFast
    # no longer reads a vocab_file argument: every token would be [UNK]).
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    tok.train_from_iterator(corpus(seed=seed + 1), trainers.WordPieceTrainer(
        vocab_size=300, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"], show_progress=False))
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]",
        special_tokens=[("[CLS]", tok.token_to_id("[CLS]")), ("[SEP]", tok.token_to_id("[SEP]"))])
    PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="[PAD]", cls_token="[CLS]", sep_token="[SEP]",
                            unk_token="[UNK]", mask_token="[MASK]",
                            model_max_length=512).save_pretrained(str(directory))
    # A large init range: with BERT's default 0.02 the first token's output hardly depends on the
    # others, so every entity embeds to nearly the same vector (cosines all ~1).
    config = BertConfig(vocab_size=tok.get_vocab_size(), hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=37, max_position_embeddings=512,
                        initializer_range=init_range, pad_token_id=tok.token_to_id("[PAD]"))
    torch.manual_seed(seed + 1)
    BertModel(config).save_pretrained(str(directory))
    return directory


def build(root, seed: int = 0) -> tuple[Path, Path]:
    """(ner_dir, eval_dir) under ``root``."""
    root = Path(root)
    return build_ner(root / "ner", seed=seed), build_eval(root / "eval", seed=seed)
