"""GREEN: radeval's prompt, template and parser; upstream's score rule; the metric on a tiny model."""

from __future__ import annotations

import math
import random
import re
import sys

import numpy as np
import pytest

from radrank.runtime import Runtime


def test_parser_on_the_five_stored_completions(green_fixture):
    from radrank.metrics import green

    scores = [green.parse(c)["score"] for c in green_fixture["completions"]]
    assert scores == pytest.approx([0.0, 1 / 6, 1 / 3, 0.5, 0.25], abs=1e-12)
    assert scores == pytest.approx(green_fixture["expected_scores"], abs=1e-12)
    assert float(np.mean(scores)) == pytest.approx(green_fixture["expected_mean"], rel=1e-9)
    assert float(np.std(scores)) == pytest.approx(green_fixture["expected_std"], rel=1e-9)


def test_parser_counts(green_fixture):
    from radrank.metrics import green

    v = green.parse(green_fixture["completions"][1])
    assert v["matched"] == 1 and v["sig"] == [2, 1, 2, 0, 0, 0] and v["insig"] == [0] * 6
    assert v["score"] == pytest.approx(1 / (1 + 5))
    first = green.parse(green_fixture["completions"][0])
    assert first["matched"] == 0 and first["score"] == 0.0  # upstream: 0 when nothing matched


def _upstream_results(completions):
    """radeval's GREEN end to end from answers: a GREEN built without a model, given the completions as its own
    ``infer`` leaves them, then its ``process_results`` — (mean, std, scores, per-sample error counts)."""
    from radrank.metrics import green

    up = green.upstream()
    judge = type(up.parser)(model_name=None, cpu=True)
    judge.dataset = {"reference": [""] * len(completions), "prediction": [""] * len(completions)}
    judge.completions = [up.clean_responses(c) for c in completions]  # get_response cleans every answer
    mean, std, scores, results = judge.process_results()
    return mean, std, scores, results, judge.sub_categories


def _constructed_answer(rng, sub_categories):
    """An answer in GREEN's format with random counts; returns (text, matched, significant, insignificant)."""
    sig = [rng.choice([0, 0, 1, 2, 3]) for _ in sub_categories]
    insig = [rng.choice([0, 0, 1]) for _ in sub_categories]
    matched = rng.choice([0, 1, 2, 5])

    def section(counts):
        if not any(counts) and rng.random() < 0.5:
            return "No errors."
        return "\n".join(f"{name}: {n}." + (" " + "; ".join(f"item {i}" for i in range(n)) if n else "")
                         for name, n in zip(sub_categories, counts))

    matched_text = f"{matched}. " + "; ".join(f"finding {i}" for i in range(matched)) if matched else "0."
    text = ("[Explanation]:\nThe candidate was compared with the reference.\n\n"
            f"[Clinically Significant Errors]:\n{section(sig)}\n\n"
            f"[Clinically Insignificant Errors]:\n{section(insig)}\n\n"
            f"[Matched Findings]:\n{matched_text}\n")
    return text, matched, sig, insig


def test_scores_and_counts_equal_upstreams(green_fixture, pairs, scripted):
    """On the stored completions and on constructed answers of known counts, the metric's columns equal what
    radeval's GREEN computes end to end (process_results), and the known counts and the paper's rule
    (matched / (matched + Σ significant), 0 when nothing matched)."""
    from radrank import metrics

    rng = random.Random(7)
    sub_categories = _upstream_results(["x"])[4]
    constructed = [_constructed_answer(rng, sub_categories) for _ in range(40)]
    answers = green_fixture["completions"] + [c[0] for c in constructed]
    mean, std, scores, results, _ = _upstream_results(answers)
    assert mean == pytest.approx(float(np.mean(scores)))

    df = pairs.iloc[[0] * len(answers)].assign(sample_id=[f"a{i}" for i in range(len(answers))],
                                                 reference=[f"case {i}" for i in range(len(answers))])
    gen = scripted(lambda req, params: answers[int(re.search(r"case (\d+)", req[0]["content"]).group(1))])
    out = metrics.score("green", df.reset_index(drop=True), {"cache_dir": "off"},
                        runtime=Runtime(supplied={"green": gen}))
    assert (out["green_unparsed"] == 0).all()
    assert out["green"].tolist() == pytest.approx([float(x) for x in scores], abs=1e-12)
    assert out["green_matched"].tolist() == results["Matched Findings"].tolist()
    for letter, name in zip("abcdef", sub_categories):
        assert out[f"green_sig_{letter}"].tolist() == results[name].tolist()
    assert out["green"].iloc[:5].tolist() == pytest.approx(green_fixture["expected_scores"], abs=1e-12)

    known = out.iloc[5:].reset_index(drop=True)
    for i, (_, matched, sig, insig) in enumerate(constructed):
        row = known.iloc[i]
        assert row["green_matched"] == matched and row["green_significant"] == sum(sig)
        assert [row[f"green_sig_{c}"] for c in "abcdef"] == sig and row["green_insignificant"] == sum(insig)
        assert row["green"] == pytest.approx(matched / (matched + sum(sig)) if matched else 0.0, abs=1e-12)


@pytest.mark.parametrize("text", ["", "The candidate report is fine.",
                                  "[Clinically Significant Errors]:\n(a) x: 1.\n\n[Matched Findings]:\n1. y"])
def test_parser_rejects_answers_without_all_sections(text):
    from radrank.engine import ParseError
    from radrank.metrics import green

    with pytest.raises(ParseError, match=r"no \["):
        green.parse(text)


def test_upstream_pieces_come_from_radeval_without_side_effects():
    import multiprocessing as mp

    from radrank.metrics import green

    before = mp.get_start_method(allow_none=True)
    up = green.upstream()
    assert mp.get_start_method(allow_none=True) == before
    assert up.make_prompt.__module__ == "radeval.metrics.green_score.utils"
    assert type(up.parser).__module__ == "radeval.metrics.green_score.green"
    assert "<|user|>" in up.chat_template and "<|assistant|>" in up.chat_template
    assert "radeval" not in sys.modules or hasattr(sys.modules["radeval"], "RadEval")  # no stub left behind
    p = green.prompt_text("zzref " * 400, "hyp")
    assert p.count("zzref") == 300 and "2. Reference Report:" in p  # upstream's 300-word cut


def test_score_with_stored_completions(pairs, scripted, green_fixture, tmp_path):
    """The metric's columns from answers that are GREEN's stored completions (through the engine loop), on the
    generator the Runtime supplies."""
    from radrank import metrics
    from radrank.metrics import green

    completions = green_fixture["completions"]
    # pair k's reference says "lungs" k times; the scripted judge answers it with stored completion k
    gen = scripted(lambda req, params: completions[req[0]["content"].count("lungs")])
    df = pairs.iloc[:5].assign(reference=[f"{'lungs ' * k}clear" for k in range(5)])
    out = metrics.score("green", df, {"cache_dir": str(tmp_path)}, runtime=Runtime(supplied={"green": gen}))
    assert list(out.columns) == ["sample_id", *green.METRIC.columns]
    assert out["green"].tolist() == pytest.approx(green_fixture["expected_scores"])
    assert (out["green_unparsed"] == 0).all() and (out["green_unparsed_reason"] == "").all()
    row = out.iloc[1]
    assert row["green_matched"] == 1 and row["green_significant"] == 5 and row["green_insignificant"] == 0
    assert [row[f"green_sig_{c}"] for c in "abcdef"] == [2, 1, 2, 0, 0, 0]
    assert row["green_analysis"].lstrip().startswith("The candidate report has several clinically significant")
    explained = green.METRIC.explain(row)
    assert explained.label == "GREEN" and explained.failure is None
    assert explained.summary == ("matched findings 1; clinically significant errors 5 (false finding 2, missing "
                                 "finding 1, wrong location 2); insignificant 0",)
    assert explained.details_title == "judge's analysis" and explained.details == row["green_analysis"]


def test_explain_unparsed_and_empty():
    from radrank.metrics import green

    failed = green.METRIC.explain({"green_analysis": "random words", "green_unparsed_reason": "no [Matched "
                                   "Findings] section", "green_matched": float("nan")})
    assert failed.failure == "not parsed (no [Matched Findings] section)" and failed.summary == ()
    assert failed.details == "random words"
    assert green.METRIC.explain({"green_analysis": float("nan"), "green_unparsed_reason": ""}) is None
    assert green.METRIC.explain({}) is None


def test_metric_on_tiny_model(green_dir, pairs, tmp_path, monkeypatch):
    """The whole metric through the registry on a tiny random GREEN-shaped model: random answers do not
    parse, so every pair gets NaN with a reason and the job still finishes; a rerun generates nothing and
    loads nothing (answers from the response cache, the model from the process's model cache)."""
    from radrank import metrics
    from radrank.runtime import generators

    settings = {"model": str(green_dir), "max_new_tokens": 6, "max_total_tokens": 2048, "batch_size": 4,
                "cache_dir": str(tmp_path / "cache")}
    out = metrics.score("green", pairs, settings)
    assert len(out) == len(pairs) and out["green"].isna().all()
    assert (out["green_unparsed"] == 1).all()
    assert out["green_unparsed_reason"].str.contains("first answer: no \\[Clinically Significant Errors\\]").all()
    assert out["green_analysis"].map(lambda s: isinstance(s, str)).all()
    generated = []
    real = generators.LocalGenerator.generate_ids
    monkeypatch.setattr(generators.LocalGenerator, "generate_ids",
                        lambda self, ids, **kw: generated.append(len(ids)) or real(self, ids, **kw))
    monkeypatch.setattr(generators, "load_causal_lm", _must_not_load)
    again = metrics.score("green", pairs, settings)
    assert generated == []
    assert again.equals(out)
    assert len(list((tmp_path / "cache").rglob("*.json"))) == 2 * (len(pairs) - 1)  # one duplicate pair
    leaves = {leaf.name: leaf for leaf in metrics.leaves("green")}
    stats = leaves["green_unparsed"].statistics(out)
    assert leaves["green_unparsed"].value(stats.sum(0)) == len(pairs)


def _must_not_load(*args, **kwargs):
    raise AssertionError("a model was loaded")


def test_missing_weights_fail_before_loading(pairs, monkeypatch):
    """No weights: the load-time check (weights + available) refuses them naming the key, and so does the job,
    at resolution, before any model or tokenizer is loaded."""
    from radrank import metrics
    from radrank.runtime import generators
    from radrank.errors import MissingWeightsError
    from radrank.metrics import green
    from radrank.runtime import available

    monkeypatch.setattr(generators, "load_causal_lm", _must_not_load)
    monkeypatch.setattr(green, "load_tokenizer", _must_not_load)
    for settings, why in (({}, "not in the Hugging Face cache"), ({"model": "/nonexistent/green"}, "no such local"),
                          ({"backend": "vllm"}, "not in the Hugging Face cache")):
        s = green.METRIC.settings(settings)
        (ref,) = green.METRIC.weights(s)
        assert ref.key == "metric_settings.green.model" and why in available(ref)
        runtime = Runtime()
        with pytest.raises(MissingWeightsError, match=r"metric_settings\.green\.model"):
            metrics.score("green", pairs, s, runtime=runtime)
        assert runtime.resolved == [ref]


def test_leaf_is_mean_of_parsed():
    import pandas as pd

    from radrank import metrics

    leaf = metrics.leaves("green")[0]
    df = pd.DataFrame({"green": [0.5, np.nan, 0.25]})
    assert leaf.value(leaf.statistics(df).sum(0)) == pytest.approx(0.375)
    assert math.isnan(leaf.value(leaf.statistics(df.iloc[[1]]).sum(0)))
