"""GREEN: radeval's prompt, template and parser; upstream's score rule; the metric on a tiny model."""

from __future__ import annotations

import math
import sys
import time

import numpy as np
import pytest


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


def test_score_rule_is_upstreams(green_fixture):
    """Our score equals radeval's GREEN.compute_green on every completion, including edited ones."""
    from radrank.metrics import green

    up = green.upstream()
    edited = [c.replace("[Matched Findings]:\n0.", "[Matched Findings]:\n3. A; B; C") for c in
              green_fixture["completions"]]
    for c in green_fixture["completions"] + edited:
        assert green.parse(c)["score"] == pytest.approx(up.parser.compute_green(up.clean_responses(c)))


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
    """The metric's columns from answers that are GREEN's stored completions (through the engine loop)."""
    from radrank.metrics import green

    completions = green_fixture["completions"]
    # pair k's reference says "lungs" k times; the scripted judge answers it with stored completion k
    gen = scripted(lambda req, params: completions[req[0]["content"].count("lungs")])
    df = pairs.iloc[:5].assign(reference=[f"{'lungs ' * k}clear" for k in range(5)])
    out = green.score(df, {**green.SPEC.settings, "cache_dir": str(tmp_path)}, {}, generator=gen)
    assert list(out.columns) == ["sample_id", *green.SPEC.columns]
    assert out["green"].tolist() == pytest.approx(green_fixture["expected_scores"])
    assert (out["green_unparsed"] == 0).all() and (out["green_unparsed_reason"] == "").all()
    row = out.iloc[1]
    assert row["green_matched"] == 1 and row["green_significant"] == 5 and row["green_insignificant"] == 0
    assert [row[f"green_sig_{c}"] for c in "abcdef"] == [2, 1, 2, 0, 0, 0]
    assert row["green_analysis"].lstrip().startswith("The candidate report has several clinically significant")


def test_metric_on_tiny_model(green_dir, pairs, tmp_path):
    """The whole metric through the registry on a tiny random GREEN-shaped model: random answers do not
    parse, so every pair gets NaN with a reason and the job still finishes; a rerun is free."""
    from radrank import metrics

    settings = {"model": str(green_dir), "max_new_tokens": 6, "max_total_tokens": 2048, "batch_size": 4,
                "cache_dir": str(tmp_path / "cache")}
    out = metrics.score("green", pairs, settings)
    assert len(out) == len(pairs) and out["green"].isna().all()
    assert (out["green_unparsed"] == 1).all()
    assert out["green_unparsed_reason"].str.contains("first answer: no \\[Clinically Significant Errors\\]").all()
    assert out["green_analysis"].map(lambda s: isinstance(s, str)).all()
    start = time.perf_counter()
    again = metrics.score("green", pairs, settings)
    assert time.perf_counter() - start < 10
    assert again.equals(out)
    assert len(list((tmp_path / "cache").rglob("*.json"))) == 2 * (len(pairs) - 1)  # one duplicate pair
    leaves = {leaf.name: leaf for leaf in metrics.leaves("green")}
    stats = leaves["green_unparsed"].statistics(out)
    assert leaves["green_unparsed"].value(stats.sum(0)) == len(pairs)


def test_missing_weights_fail_fast(pairs):
    from radrank import metrics
    from radrank.errors import MissingWeightsError

    start = time.perf_counter()
    with pytest.raises(MissingWeightsError, match="metric_settings.green.model"):
        metrics.score("green", pairs, {})
    with pytest.raises(MissingWeightsError):
        metrics.score("green", pairs, {"model": "/nonexistent/green"})
    assert time.perf_counter() - start < 10


def test_leaf_is_mean_of_parsed():
    import pandas as pd

    from radrank import metrics

    leaf = metrics.leaves("green")[0]
    df = pd.DataFrame({"green": [0.5, np.nan, 0.25]})
    assert leaf.value(leaf.statistics(df).sum(0)) == pytest.approx(0.375)
    assert math.isnan(leaf.value(leaf.statistics(df.iloc[[1]]).sum(0)))
