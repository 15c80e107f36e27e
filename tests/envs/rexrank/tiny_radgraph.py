"""A tiny random RadGraph model that the ``radgraph`` package (0.1.18) loads offline.

The real checkpoints (``radgraph.tar.gz`` / ``radgraph-xl.tar.gz`` in the hub
repo StanfordAIMI/RRG_scorers) are an extracted-archive layout::

    config.json      DyGIE++ training config (dataset_reader, model, ...)
    vocabulary/      AllenNLP label vocabularies
    weights.th       the DyGIE model's state_dict

plus a BERT encoder named inside config.json (PubMedBERT), of which only the
tokenizer and the config are read (the encoder's weights come from weights.th).

:func:`build` writes the same layout with a 2-layer, 32-wide BERT whose
WordPiece tokenizer is trained here, RadGraph's label sets and a DyGIE model
whose state_dict is saved as ``weights.th``; ``radgraph.RadGraph`` then loads
it with ``model_cache_dir`` pointing at the parent directory. Nothing is
downloaded. The output layer biases are nudged so that a random model predicts
a useful mix of entities and relations (not none, not every span).
"""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

NER_LABELS = ("ANAT-DP", "OBS-DP", "OBS-U", "OBS-DA")
RELATION_LABELS = ("modify", "located_at", "suggestive_of")
# Output-layer scale and bias: a random model then labels some spans and relates some pairs.
NER_SCALE, NER_BIAS = 10.0, -1.0
RELATION_SCALE, RELATION_BIAS = 10.0, 0.0

CORPUS = [
    "no acute cardiopulmonary abnormality",
    "no acute cardiopulmonary process",
    "small bilateral pleural effusions with bibasilar atelectasis",
    "bilateral pleural effusions and basilar atelectasis",
    "mild cardiomegaly . no pleural effusion",
    "mild cardiomegaly with clear lungs",
    "et tube terminates 2 cm above the carina",
    "endotracheal tube terminates 2 . 5 cm above the carina",
    "unchanged mild pulmonary edema no radiographic evidence pneumonia",
    "no evidence of acute pulmonary process moderately large size hiatal hernia",
    "the heart size is normal . the lungs are clear",
    "left lower lobe consolidation concerning for pneumonia",
    "right upper lobe opacity , possibly atelectasis or infection",
    "there is no pneumothorax / effusion ( stable ) : unchanged !",
]


def _config(encoder: str, dataset: str) -> dict:
    bert = {"model_name": encoder, "max_length": 512}
    return {
        "dataset_reader": {
            "type": "dygie",
            "token_indexers": {"bert": {"type": "pretrained_transformer_mismatched", **bert}},
            "max_span_width": 4,
        },
        "model": {
            "type": "dygie",
            "embedder": {"token_embedders": {"bert": {"type": "pretrained_transformer_mismatched", **bert}}},
            "initializer": {"regexes": [["_span_width_embedding.weight", {"type": "xavier_normal"}]]},
            "module_initializer": {"regexes": [[".*weight", {"type": "xavier_normal"}]]},
            "loss_weights": {"ner": 0.2, "relation": 1.0, "coref": 0.0, "events": 0.0},
            "feature_size": 8,
            "max_span_width": 4,
            "target_task": "relation",
            "feedforward_params": {"num_layers": 2, "hidden_dims": 16, "dropout": 0.4},
            "modules": {
                "coref": {"spans_per_word": 0.3, "max_antecedents": 10, "coref_prop": 0},
                "ner": {},
                "relation": {"spans_per_word": 0.5},
                "events": {"trigger_spans_per_word": 0.3, "argument_spans_per_word": 0.8,
                           "loss_weights": {"trigger": 1.0, "arguments": 1.0}},
            },
        },
        "_note": f"tiny random test model for dataset {dataset!r}; not RadGraph's weights",
    }


def build_encoder(out: Path, seed: int = 0) -> Path:
    """A 2-layer BERT with a locally trained WordPiece tokenizer (config + tokenizer + weights)."""
    import torch
    from tokenizers import BertWordPieceTokenizer
    from transformers import BertConfig, BertModel, BertTokenizerFast

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    wp = BertWordPieceTokenizer(lowercase=True)
    wp.train_from_iterator(CORPUS * 4, vocab_size=200, min_frequency=1, show_progress=False)
    wp.save_model(str(out))  # vocab.txt
    tok = BertTokenizerFast(vocab_file=str(out / "vocab.txt"), do_lower_case=True)
    tok.save_pretrained(out)
    torch.manual_seed(seed)
    cfg = BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=37, max_position_embeddings=512)
    BertModel(cfg).save_pretrained(out)
    return out


def build(root, model_type: str = "radgraph", seed: int = 0, encoder: Path | None = None) -> Path:
    """Write ``root/<model_type>/`` (config.json, vocabulary/, weights.th); return that directory.

    ``encoder``: an existing encoder directory (default: build one at ``root/encoder``).
    """
    import torch
    from dotmap import DotMap
    from radgraph.allennlp.data import Vocabulary
    from radgraph.allennlp.modules import text_field_embedders, token_embedders
    from radgraph.dygie.models import dygie

    root = Path(root)
    encoder = Path(encoder) if encoder is not None else build_encoder(root / "encoder", seed=seed)
    model_dir = root / model_type
    vocab_dir = model_dir / "vocabulary"
    vocab_dir.mkdir(parents=True, exist_ok=True)
    # Label namespaces are "<dataset>__ner_labels" etc., where the dataset is the model type
    # (radgraph.utils.preprocess_reports); NER's null label "" must be index 0.
    (vocab_dir / "non_padded_namespaces.txt").write_text("*tags\n*labels\n")
    (vocab_dir / f"{model_type}__ner_labels.txt").write_text("\n" + "\n".join(NER_LABELS) + "\n")
    (vocab_dir / f"{model_type}__relation_labels.txt").write_text("\n".join(RELATION_LABELS) + "\n")
    config = _config(str(encoder), model_type)
    (model_dir / "config.json").write_text(json.dumps(config, indent=1))

    # Build the model exactly as radgraph.RadGraph does, then save its state_dict.
    torch.manual_seed(seed)
    cfg = DotMap(json.loads(json.dumps(config)))
    vocab = Vocabulary.from_files(str(vocab_dir))
    bert = token_embedders.PretrainedTransformerMismatchedEmbedder(model_name=str(encoder), max_length=512)
    embedder = text_field_embedders.BasicTextFieldEmbedder({"bert": bert})
    model_kwargs = cfg.model
    for name in ("type", "embedder", "initializer", "module_initializer"):
        del model_kwargs[name]
    model = dygie.DyGIE(vocab=vocab, embedder=embedder, **model_kwargs)
    with torch.no_grad():
        for module in model._ner._ner_scorers.values():
            module[1]._module.weight.mul_(NER_SCALE)
            module[1]._module.bias.add_(NER_BIAS)
        for module in model._relation._relation_scorers.values():
            module.weight.mul_(RELATION_SCALE)
            module.bias.add_(RELATION_BIAS)
    torch.save(model.state_dict(), model_dir / "weights.th")
    lock = vocab_dir / ".lock"
    if lock.exists():
        lock.unlink()
    return model_dir


def archive(model_dir, out_path) -> Path:
    """Pack an extracted model directory the way RRG_scorers ships it (members at the top level)."""
    model_dir, out_path = Path(model_dir), Path(out_path)
    with tarfile.open(out_path, "w:gz") as tar:
        for p in sorted(model_dir.rglob("*")):
            if p.is_file() and p.name != ".lock":
                tar.add(p, arcname=str(p.relative_to(model_dir)))
    return out_path
