"""radrank's RadEval extras (radeval_bertscore, f1radbert_ct, srrbert, temporal) against the
radeval package's own classes, on tiny random models of the same classes (tiny_radeval.py).

The references: an independent greedy-matching BERTScore computed here from the tiny
ModernBERT's hidden states; ``F1RadbertCT.forward`` (accuracy, per-sample accuracy and
scikit-learn's report); ``SRRBert.evaluate`` (weighted report and per-sample P / R / F).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from _strict import reference
from tiny_radeval import FakeStanza

from radrank import metrics
from radrank.errors import MissingWeightsError
from radrank.metrics import radeval_extras as rx
from radrank.runtime import Runtime, available


@pytest.fixture(autouse=True)
def radeval_package():
    """The package whose classes these metrics run (under RADRANK_STRICT=1 its absence fails)."""
    return reference("radeval")

REFS = [
    "No acute cardiopulmonary process.",
    "Small bilateral pleural effusions. Stable cardiomegaly.",
    "Mild cardiomegaly. No pleural effusion.",
    "New right upper lobe nodule, increased since prior.",
    "No acute cardiopulmonary process.",  # repeated reference
    "Left lower lobe consolidation concerning for pneumonia. Emphysema. Dr. Smith was notified.",
    "Hiatal hernia. Calcification of the coronary arteries.",
]
HYPS = [
    "No acute findings.",
    "Bilateral pleural effusions, increased. Cardiomegaly unchanged.",
    "Mild cardiomegaly with clear lungs.",
    "New right upper lobe nodule, increased since prior.",  # identical to its reference
    "Right upper lobe opacity, possibly pneumonia.",
    "Resolved consolidation. Stable emphysema.",
    "",  # empty hypothesis
]


def _pairs(refs=REFS, hyps=HYPS):
    return pd.DataFrame({"sample_id": [f"s{i}" for i in range(len(refs))], "reference": refs, "hypothesis": hyps})


def _totals(out, leaf):
    return leaf.statistics(out).sum(axis=0)


# --- the import work-around ---------------------------------------------------------------------------------


IMPORT_PROBE = """
import socket, sys
import nltk

attempts, downloads = [], []

def refuse(self, address):
    attempts.append(address)
    raise OSError("test: no network")

socket.socket.connect = refuse
real = nltk.download

def recording(*args, **kwargs):
    downloads.append(args)
    return real(*args, **kwargs)

nltk.download = recording
from radrank.metrics import radeval_extras as rx

rx._import("radeval.utils")
assert nltk.download is recording, "nltk.download not restored"
assert not downloads, f"nltk.download was called: {downloads}"
assert not attempts, f"the import reached for the network: {attempts}"
assert "radeval.metrics.radgraph" not in sys.modules  # broken in 2.2.1 (`from RadEval...`); never imported
"""


def test_radeval_imports_without_download():
    """radeval/utils.py calls nltk.download("punkt_tab") at import: in a fresh interpreter (where radeval was
    never imported), our import never calls it and opens no connection."""
    src = str(Path(__file__).resolve().parents[3] / "src")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", IMPORT_PROBE], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]


def test_declarations():
    for metric in (rx.RADEVAL_BERTSCORE, rx.F1RADBERT_CT, rx.SRRBERT, rx.TEMPORAL):
        assert metrics.get(metric.name) is metric and metric.family == "radeval"
        used = {c for leaf in metric.leaves for c in ((leaf.column,) if leaf.is_mean else leaf.stats)}
        assert set(metric.columns) >= used
        s = metric.settings()
        assert metric.gpus(s) == (0 if metric is rx.TEMPORAL else 1)  # temporal runs stanza on the CPU by default
        assert metric.gpus(s.replace(device="cpu")) == 0 and metric.gpus(s.replace(device="cuda:1")) == 1
        assert "batch_size" not in s.identity() and "device" not in s.identity()
    assert rx.F1RADBERT_CT.settings().identity() == {"model": "IAMJB/RadBERT-CT", "threshold": 0.5}


# --- radeval_bertscore ---------------------------------------------------------------------------------------


def _reference_bertscore(model_dir, num_layers, refs, hyps):
    """Greedy cosine matching written out here (bert-score's definition with idf off: every token
    weighs 1 but [CLS] and [SEP], which weigh 0)."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModel.from_pretrained(model_dir).eval()
    model.layers = torch.nn.ModuleList(list(model.layers[:num_layers]))

    def embed(text):
        ids = tok.encode(text, add_special_tokens=True, truncation=True, max_length=512)
        with torch.no_grad():
            h = model(input_ids=torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long))[0][0]
        w = torch.tensor([0.0 if i in (tok.cls_token_id, tok.sep_token_id) else 1.0 for i in ids])
        return h / h.norm(dim=-1, keepdim=True), w

    out = []
    for r, h in zip(refs, hyps):
        (er, wr), (eh, wh) = embed(r), embed(h)
        sim = eh @ er.T
        p = float((sim.max(dim=1).values * wh).sum() / wh.sum())
        rec = float((sim.max(dim=0).values * wr).sum() / wr.sum())
        out.append((p, rec, 2 * p * rec / (p + rec)))
    return np.array(out)


def test_radeval_bertscore_equals_greedy_matching(tiny):
    refs, hyps = REFS[:6], HYPS[:6]
    out = metrics.score("radeval_bertscore", _pairs(refs, hyps),
                        {"model": tiny["modernbert"], "num_layers": 2, "batch_size": 4, "device": "cpu"})
    expected = _reference_bertscore(tiny["modernbert"], 2, refs, hyps)
    assert out["radeval_bertscore_precision"].to_numpy() == pytest.approx(expected[:, 0], abs=1e-5)
    assert out["radeval_bertscore_recall"].to_numpy() == pytest.approx(expected[:, 1], abs=1e-5)
    assert out["radeval_bertscore"].to_numpy() == pytest.approx(expected[:, 2], abs=1e-5)
    assert out["radeval_bertscore"].iloc[3] == pytest.approx(1.0, abs=1e-6)  # identical report
    assert out["radeval_bertscore"].nunique() >= 5


def test_radeval_bertscore_equals_package_scorer(tiny):
    """RadEvalBERTScorer.score (the adapter's call) gives the same F1."""
    import torch
    from radeval.metrics.radevalbertscore.radevalbertscore import RadEvalBERTScorer

    scorer = RadEvalBERTScorer(model_type=tiny["modernbert"], num_layers=3, device=torch.device("cpu"), batch_size=3)
    _, f1 = scorer.score(refs=REFS[:6], hyps=HYPS[:6])
    out = metrics.score("radeval_bertscore", _pairs(REFS[:6], HYPS[:6]),
                        {"model": tiny["modernbert"], "num_layers": 3, "batch_size": 3, "device": "cpu"})
    assert out["radeval_bertscore"].tolist() == pytest.approx(f1.tolist(), abs=1e-6)


# --- f1radbert_ct ------------------------------------------------------------------------------------------


def test_f1radbert_ct_equals_package(tiny):
    from radeval.metrics.f1Radbert_ct.f1Radbert_ct import F1RadbertCT

    settings = {"model": tiny["radbert_ct"], "device": "cpu", "batch_size": 3}
    out = metrics.score("f1radbert_ct", _pairs(), settings)
    accuracy, sample_acc, report = F1RadbertCT(model_id=tiny["radbert_ct"], device="cpu", batch_size=3)(HYPS, REFS)
    assert out["f1radbert_ct_sample_acc"].tolist() == sample_acc
    leaves = {leaf.name: leaf for leaf in rx.F1RADBERT_CT.leaves}
    acc = leaves["f1radbert_ct_accuracy"]
    assert acc.value(_totals(out, acc)) == pytest.approx(accuracy)
    for avg in ("micro", "macro", "weighted"):
        leaf = leaves[f"f1radbert_ct_{avg}_f1"]
        assert leaf.value(_totals(out, leaf)) == pytest.approx(report[f"{avg} avg"]["f1-score"], abs=1e-12)
    # The tiny model says yes and no, differently for different texts.
    ref = out[list(rx.RCT_REF)].to_numpy()
    assert 0 < ref.sum() < ref.size and len({tuple(r) for r in ref}) >= 3
    assert 0 < report["macro avg"]["f1-score"] < 1


def test_f1radbert_ct_labels_each_text_once(tiny, monkeypatch):
    from radeval.metrics.f1Radbert_ct.f1Radbert_ct import F1RadbertCT

    seen = []
    real = F1RadbertCT._predict_label_matrix

    def spy(self, reports, on_batch_done=None):
        seen.extend(reports)
        return real(self, reports, on_batch_done)

    monkeypatch.setattr(F1RadbertCT, "_predict_label_matrix", spy)
    metrics.score("f1radbert_ct", _pairs(), {"model": tiny["radbert_ct"], "device": "cpu"})
    assert sorted(seen) == sorted(set(REFS) | set(HYPS))


# --- srrbert -------------------------------------------------------------------------------------------------


def _settings_srr(tiny):
    return {"model": tiny["srr_model"], "tokenizer": tiny["srr_tokenizer"], "nltk_data": tiny["nltk_data"],
            "batch_size": 4, "device": "cpu"}


def test_srrbert_equals_package_evaluate(tiny):
    out = metrics.score("srrbert", _pairs(), _settings_srr(tiny))
    scorer = rx.srr_scorer(Path(tiny["srr_model"]), Path(tiny["srr_tokenizer"]), 4, "cpu")
    report, precision, recall, f1 = scorer.evaluate(REFS, HYPS)
    assert out["srrbert_sample_f1"].to_numpy() == pytest.approx(f1, abs=1e-12)
    assert out["srrbert_sample_precision"].to_numpy() == pytest.approx(precision, abs=1e-12)
    assert out["srrbert_sample_recall"].to_numpy() == pytest.approx(recall, abs=1e-12)
    for leaf in rx.SRRBERT.leaves:
        which = leaf.name.rsplit("_", 1)[1]
        key = "f1-score" if which == "f1" else which
        assert leaf.value(_totals(out, leaf)) == pytest.approx(report["weighted avg"][key], abs=1e-12)
    ref = out[list(rx.SRR_REF)].to_numpy()
    assert 0 < ref.sum() < ref.size and len({tuple(r) for r in ref}) >= 3
    assert 0 < report["weighted avg"]["f1-score"] < 1


def test_srrbert_uses_configured_tokenizer_and_restores_the_class(tiny):
    from radeval.metrics.SRRBert import srr_bert

    real = srr_bert.BertTokenizer
    scorer = rx.srr_scorer(Path(tiny["srr_model"]), Path(tiny["srr_tokenizer"]), 4, "cpu")
    assert srr_bert.BertTokenizer is real
    vocab = (Path(tiny["srr_tokenizer"]) / "vocab.txt").read_text().split()
    assert set(scorer.tokenizer.get_vocab()) == set(vocab)  # the configured directory's vocabulary
    assert scorer.model.config.num_labels == rx.SRR_LABELS


def test_srrbert_sentences_split_by_package_parser(tiny, monkeypatch):
    scorer = rx.srr_scorer(Path(tiny["srr_model"]), Path(tiny["srr_tokenizer"]), 4, "cpu")
    rx.use_nltk_data(tiny["nltk_data"])
    seen = []
    real = type(scorer).forward

    def spy(self, sentences):
        seen.extend(sentences)
        return real(self, sentences)

    monkeypatch.setattr(type(scorer), "forward", spy)
    rx.srr_labels(scorer, [REFS[5], REFS[5], ""])
    # "Dr." is an abbreviation of the tiny punkt model: three sentences, each labelled once.
    assert seen == ["Left lower lobe consolidation concerning for pneumonia.", "Emphysema.", "Dr. Smith was notified.",
                    "."]


def test_srrbert_without_punkt_fails_with_key(tiny, tmp_path):
    settings = {**_settings_srr(tiny), "nltk_data": str(tmp_path / "no_nltk_here")}
    (ref,) = [r for r in rx.SRRBERT.weights(rx.SRRBERT.settings(settings)) if r.setting == "nltk_data"]
    assert "no_nltk_here" in available(ref)  # the load-time check refuses it, without NLTK
    with pytest.raises(MissingWeightsError, match="metric_settings.srrbert.nltk_data"):
        metrics.score("srrbert", _pairs(), settings)


def test_srrbert_finds_punkt_on_nltk_path_in_the_job(tiny, monkeypatch, tmp_path):
    """nltk_data null: declared with no path (NLTK's data path is the job's), found in the job under the same key."""
    import nltk

    settings = {k: v for k, v in _settings_srr(tiny).items() if k != "nltk_data"}
    (declared,) = [r for r in rx.SRRBERT.weights(rx.SRRBERT.settings(settings)) if r.setting == "nltk_data"]
    assert declared.ref is None and available(declared) is None
    monkeypatch.setattr(nltk.data, "path", [str(tmp_path / "empty"), tiny["nltk_data"]])
    runtime = Runtime()
    out = metrics.score("srrbert", _pairs(), settings, runtime=runtime)
    assert (declared.key, tiny["nltk_data"]) in {(r.key, r.ref) for r in runtime.resolved}
    assert out.attrs["models"]["nltk_data"] == tiny["nltk_data"]
    monkeypatch.setattr(nltk.data, "path", [str(tmp_path / "empty")])
    with pytest.raises(MissingWeightsError, match=r"NLTK's data path.*metric_settings\.srrbert\.nltk_data"):
        metrics.score("srrbert", _pairs(), settings)


# --- temporal -------------------------------------------------------------------------------------------------
#
# stanza's pipeline is a recorded stand-in (tiny_radeval.FakeStanza): radrank's construction hook and the
# package's F1Temporal run for real.


def test_temporal_through_package(fake_stanza):
    refs = ["Stable/unchanged small effusion.", "New right lower lobe opacity.", "No acute process.",
            "Stable/unchanged small effusion.", "Heart size normal."]
    hyps = ["Unchanged effusion.", "Right lower lobe opacity, worsening.", "Normal chest.",
            "Stable/unchanged small effusion.", "New nodule."]
    out = metrics.score("temporal", _pairs(refs, hyps), {"stanza_dir": str(fake_stanza)})
    # The pipeline was built as f1temporal asks for it, from our directory, downloads off.
    (kwargs,) = FakeStanza.built
    from stanza.pipeline.core import DownloadMethod

    assert kwargs["lang"] == "en" and kwargs["package"] == "radiology"
    assert kwargs["processors"] == {"tokenize": "default", "ner": "radiology"}
    assert kwargs["dir"] == str(fake_stanza) and kwargs["download_method"] == DownloadMethod.NONE
    # Each distinct text annotated once.
    assert sorted(FakeStanza.calls) == sorted(set(refs) | set(hyps))
    # 0: ref {stable, unchanged} (stanza only: the regex sees "stableunchanged"), hyp {unchanged}: P 1, R 1/2.
    assert out["temporal"].iloc[0] == pytest.approx(2 * 1 * 0.5 / 1.5, abs=1e-9)
    assert out["temporal_ref_entities"].iloc[0] == 2 and out["temporal_matched"].iloc[0] == 1
    assert out["temporal"].iloc[1] == pytest.approx(0.0, abs=1e-9)  # {new} vs {worsening}
    assert out["temporal"].iloc[2] == 1.0  # neither has a temporal entity
    assert out["temporal"].iloc[3] == pytest.approx(1.0)
    assert out["temporal"].iloc[4] == pytest.approx(1e-10)  # only the candidate has one: the package's epsilon
    mod = sys.modules[rx.TEMPORAL_MODULE]
    expected = mod.F1Temporal(predictions=hyps, references=refs)["sample_scores"]
    assert out["temporal"].tolist() == pytest.approx(expected, abs=1e-15)


def test_temporal_without_stanza_models_fails_before_stanza(tmp_path, monkeypatch, fresh_temporal_module):
    import stanza

    built = []
    monkeypatch.setattr(stanza, "Pipeline", lambda *a, **k: built.append(k))
    missing = str(tmp_path / "no_stanza")
    (ref,) = rx.TEMPORAL.weights(rx.TEMPORAL.settings({"stanza_dir": missing}))
    assert "resources.json does not exist" in available(ref)  # the load-time check refuses it
    with pytest.raises(MissingWeightsError, match="metric_settings.temporal.stanza_dir"):
        metrics.score("temporal", _pairs(), {"stanza_dir": missing})
    assert built == [] and rx.TEMPORAL_MODULE not in sys.modules


def test_temporal_incomplete_stanza_dir_fails_with_key(tmp_path, connections, fresh_temporal_module):
    """A directory that looks like stanza's but lacks the models: stanza itself fails, without downloading."""
    d = tmp_path / "stanza_resources"
    (d / "en").mkdir(parents=True)
    (d / "resources.json").write_text(json.dumps({"en": {"default_processors": {"tokenize": "combined"}}}))
    with pytest.raises(MissingWeightsError, match="metric_settings.temporal.stanza_dir") as err:
        metrics.score("temporal", _pairs(), {"stanza_dir": str(d)})
    assert "stanza could not load" in str(err.value)
    assert connections == []  # downloads off: nothing reached for the network


# --- missing weights --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name,key", [("radeval_bertscore", "model"), ("f1radbert_ct", "model"),
                                      ("srrbert", "model"), ("srrbert", "tokenizer")])
def test_missing_weights_fail_before_loading(tiny, monkeypatch, name, key):
    settings = _settings_srr(tiny) if name == "srrbert" else {}
    settings = {**settings, key: "radrank-test/not-in-any-cache"}
    imported = []
    monkeypatch.setattr(rx, "_import", lambda module: imported.append(module))
    runtime = Runtime()
    with pytest.raises(MissingWeightsError) as err:
        metrics.score(name, _pairs(), settings, runtime=runtime)
    assert "radrank-test/not-in-any-cache" in str(err.value)
    assert f"metric_settings.{name}.{key}" in str(err.value)
    assert imported == []  # failed at resolution: no radeval module, no model loaded
    assert runtime.resolved[-1].key == f"metric_settings.{name}.{key}"
    (ref,) = [r for r in metrics.get(name).weights(metrics.get(name).settings(settings)) if r.setting == key]
    assert "not in the Hugging Face cache" in available(ref)  # what the workflow's load-time check says
