"""Tiny random stand-ins for the models of RadEval's extras, built locally (nothing downloaded).

* ``IAMJB/RadEvalModernBERT`` → a 3-layer, 32-wide ``ModernBertModel`` with a WordPiece
  tokenizer (``[CLS] … [SEP]``) over a fixed vocabulary (:func:`wordpiece`);
* ``IAMJB/RadBERT-CT`` (18 labels) and ``StanfordAIMI/SRR-BERT-Leaves-with-Statuses``
  (163 labels) → 2-layer, 32-wide ``BertForSequenceClassification`` multi-label models, their
  output layer scaled so that a random model says yes to some labels and no to others,
  differently for different texts;
* ``microsoft/BiomedVLP-CXR-BERT-general`` (SRR-BERT's tokenizer, loaded with
  ``BertTokenizer``) → a BERT tokenizer directory with ``vocab.txt`` (no ``tokenizer.json``);
* NLTK ``punkt_tab`` → a minimal English Punkt model (no collocations or sentence starters,
  one abbreviation) in an ``nltk_data`` tree;
* stanza's English radiology pipeline → :class:`FakeStanza`, a recorded stand-in. The real one (a
  neural tokenizer plus the radiology NER model with its word vectors and character language models,
  listed in a resources.json) is not built here: those are stanza training checkpoints whose
  vocabularies and argument sets only stanza's own training scripts produce. The tests run the
  package's F1Temporal and radrank's construction hook for real, with the stand-in for the loaded
  pipeline (the same call, recorded).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

WORDS = ("no acute cardiopulmonary process small bilateral pleural effusions with bibasilar atelectasis mild "
         "cardiomegaly effusion clear lungs heart size is normal the are there pneumothorax left lower lobe "
         "consolidation concerning for pneumonia right upper opacity nodule emphysema calcification hernia "
         "lymphadenopathy bronchiectasis new stable unchanged increased decreased resolved worsening improved "
         "interval since prior compared").split()
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def wordpiece(seed: int = 0):
    """A BERT-style WordPiece tokenizer over a fixed vocabulary: the specials, every word of WORDS,
    and single characters (as word starts and ``##`` continuations), so any text tokenises.

    Not trained: tokenizers' WordPiece trainer breaks ties in hash order, so a trained vocabulary
    (and every tiny model's numbers) would differ from run to run. ``seed`` shuffles the ids.
    """
    import string

    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

    chars = string.ascii_lowercase + string.digits
    pieces = sorted({w.lower() for w in WORDS} | set(chars) | {"##" + c for c in chars} | set(".,;:!?()/-'\"%"))
    random.Random(seed).shuffle(pieces)
    vocab = {token: i for i, token in enumerate([*SPECIALS, *pieces])}
    tok = Tokenizer(models.WordPiece(vocab=vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]",
        special_tokens=[("[CLS]", tok.token_to_id("[CLS]")), ("[SEP]", tok.token_to_id("[SEP]"))])
    return tok


def save_fast(tok, directory: Path) -> None:
    from transformers import PreTrainedTokenizerFast

    PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="[PAD]", cls_token="[CLS]", sep_token="[SEP]",
                            unk_token="[UNK]", mask_token="[MASK]", model_max_length=512
                            ).save_pretrained(str(directory))


def build_modernbert(directory, seed: int = 0, layers: int = 3) -> Path:
    import torch
    from transformers import ModernBertConfig, ModernBertModel

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    tok = wordpiece(seed)
    save_fast(tok, directory)
    config = ModernBertConfig(
        vocab_size=tok.get_vocab_size(), hidden_size=32, intermediate_size=48, num_hidden_layers=layers,
        num_attention_heads=2, max_position_embeddings=512, global_attn_every_n_layers=2, local_attention=16,
        pad_token_id=tok.token_to_id("[PAD]"), cls_token_id=tok.token_to_id("[CLS]"),
        sep_token_id=tok.token_to_id("[SEP]"), bos_token_id=tok.token_to_id("[CLS]"),
        eos_token_id=tok.token_to_id("[SEP]"), initializer_range=0.3)
    torch.manual_seed(seed)
    ModernBertModel(config).save_pretrained(str(directory))
    return directory


def build_classifier(directory, num_labels: int, seed: int = 0, scale: float = 4.0, tokenizer: bool = True,
                     tok=None) -> Path:
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    tok = tok or wordpiece(seed)
    if tokenizer:
        save_fast(tok, directory)
    config = BertConfig(vocab_size=tok.get_vocab_size(), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=37, max_position_embeddings=512, initializer_range=0.5,
                        pad_token_id=tok.token_to_id("[PAD]"), num_labels=num_labels,
                        problem_type="multi_label_classification")
    torch.manual_seed(seed)
    model = BertForSequenceClassification(config)
    with torch.no_grad():
        model.classifier.weight.mul_(scale)
        model.classifier.bias.zero_()
    model.save_pretrained(str(directory))
    return directory


def build_vocab_tokenizer(directory, seed: int = 0, tok=None) -> Path:
    """A BERT tokenizer directory as a model repository has it, without weights: config.json,
    vocab.txt and tokenizer_config.json (no tokenizer.json)."""
    from transformers import BertConfig

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    vocab = (tok or wordpiece(seed)).get_vocab()
    BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
               intermediate_size=37).save_pretrained(str(directory))
    (directory / "vocab.txt").write_text("\n".join(sorted(vocab, key=vocab.get)) + "\n")
    (directory / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "BertTokenizer", "do_lower_case": True, "model_max_length": 512}))
    return directory


def build_punkt(root) -> Path:
    """An nltk_data directory with a minimal English punkt_tab model; returns the nltk_data root."""
    root = Path(root)
    lang = root / "tokenizers" / "punkt_tab" / "english"
    lang.mkdir(parents=True, exist_ok=True)
    for name in ("collocations.tab", "sent_starters.txt", "ortho_context.tab"):
        (lang / name).write_text("")
    (lang / "abbrev_types.txt").write_text("dr\n")
    return root


def build(root, seed: int = 0) -> dict:
    """Every stand-in under ``root``: settings-ready paths by role."""
    root = Path(root)
    srr_tok = wordpiece(seed + 2)  # SRR-BERT's model and its separate tokenizer share one vocabulary
    return {
        "modernbert": str(build_modernbert(root / "modernbert", seed=seed)),
        "radbert_ct": str(build_classifier(root / "radbert_ct", 18, seed=seed + 1)),
        "srr_model": str(build_classifier(root / "srr", 163, seed=seed + 2, tokenizer=False, tok=srr_tok)),
        "srr_tokenizer": str(build_vocab_tokenizer(root / "cxr_bert_tokenizer", tok=srr_tok)),
        "nltk_data": str(build_punkt(root / "nltk_data")),
    }


class FakeStanza:
    """Stands in for ``stanza.Pipeline``: records how it was built; tags a few words as stanza's
    radiology NER would (OBSERVATION / OBSERVATION_MODIFIER), splitting words at "/"."""

    built: list = []
    calls: list = []
    TAGS = {"stable": "OBSERVATION_MODIFIER", "unchanged": "OBSERVATION_MODIFIER", "new": "OBSERVATION_MODIFIER",
            "effusion": "OBSERVATION", "worsening": "OBSERVATION_MODIFIER"}

    def __init__(self, *args, **kwargs):
        FakeStanza.built.append(kwargs)

    def __call__(self, text):
        from types import SimpleNamespace

        FakeStanza.calls.append(text)
        words = [w.strip(".,;:()").lower() for w in text.replace("/", " ").split()]
        return SimpleNamespace(entities=[SimpleNamespace(text=w, type=self.TAGS[w]) for w in words if w in self.TAGS])
