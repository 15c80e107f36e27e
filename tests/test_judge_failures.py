"""Judge-failure accounting: the kinds of failed answers, their counts per model, and the ranks under each failure
policy — from a scripted judge with forced failures through the judge loop, the statistics and the leaderboard."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from _judges import Scripted

from radrank import metrics
from radrank.engine import ParseError, judge, judgement_frame
from radrank.judge_cache import ResponseCache
from radrank.judge_failures import FAILURE_KINDS, failure_kind
from radrank.runtime.generators import Generation
from radrank.leaderboard import build_leaderboard
from radrank.stats import bootstrap
from radrank.stats.failures import failure_accounting, judges_of


@pytest.mark.parametrize("reason, text, kind", [
    ("", "anything", ""),
    ("no sections", "The reports agree.", "unparsed"),
    ("no sections (answer cut at the token limit after 64 tokens)", "[Explanation]: the", "truncated"),
    ("no sections", "I'm sorry, but I can't help with comparing these reports.", "refusal"),
    ("no sections", "As an AI language model I cannot give medical opinions", "refusal"),
    ("no sections (the endpoint refused: finish_reason content_filter)", "", "refusal"),
    ("no sections", "   ", "empty"),
    ("empty_response", None, "empty"),
    ("request failed (HTTP 503: busy)", "", "error"),
    ("api_error: APIConnectionError: boom", None, "error"),
    # a retried pair is classed by its last answer
    ("first answer: request failed (HTTP 503); retry: no sections", "Sorry, I won't.", "refusal"),
    ("first answer: no sections (answer cut at the token limit after 8 tokens); retry: no sections", "x", "unparsed"),
    ("unparsed: ValidationError: 1 error", None, "unparsed"),
    ("invalid_evaluation: KeyError: 'id'", '{"a": 1}', "unparsed"),
])
def test_failure_kinds(reason, text, kind):
    assert failure_kind(reason, text) == kind


def parse(text):
    if not text.startswith("SCORE "):
        raise ParseError("no score line")
    return float(text.split()[1])


SCRIPT = {  # prompt -> (first answer, second answer); the failure kind the pair should get; its attempts
    "ok": ({"text": "SCORE 0.9"}, None, "", 1),
    "fixed": ({"text": "let me think"}, {"text": "SCORE 0.5"}, "", 2),
    "cut": ({"text": "SCORE", "finished": False, "new_tokens": 64}, {"text": "SCORE", "finished": False,
                                                                      "new_tokens": 128}, "truncated", 2),
    "refuses": ({"text": "I'm sorry, I cannot evaluate this."}, {"text": "I cannot do that."}, "refusal", 2),
    "flagged": ({"text": "", "refused": "finish_reason content_filter"},
                {"text": "", "refused": "finish_reason content_filter"}, "refusal", 2),
    "silent": ({"text": ""}, {"text": "  "}, "empty", 2),
    "down": ({"text": "", "finished": False, "error": "request failed (HTTP 503)"},
             {"text": "", "finished": False, "error": "request failed (HTTP 503)"}, "error", 2),
    "rambles": ({"text": "The findings match."}, {"text": "Both mention effusion."}, "unparsed", 2),
}


def test_the_judge_loop_records_each_pairs_failure_kind_and_attempts(tmp_path):
    generator = Scripted(lambda prompt, params: Generation(**SCRIPT[prompt][params["attempt"]]))
    prompts = list(SCRIPT)
    judgements = judge(generator, prompts, parse, cache=ResponseCache(tmp_path / "cache"))
    pairs = pd.DataFrame({"sample_id": prompts})
    frame = judgement_frame("toy", pairs, judgements, lambda v: {"toy": v}, ("toy",))
    assert frame["toy_failure"].tolist() == [SCRIPT[p][2] for p in prompts]
    assert frame["toy_attempts"].tolist() == [SCRIPT[p][3] for p in prompts]
    assert frame.loc[frame["toy_failure"] == "", "toy"].tolist() == [0.9, 0.5]
    assert frame.loc[frame["toy_failure"] != "", "toy"].isna().all()
    # answered again from the response cache (the refusal flag kept), the kinds are the same; the endpoint's
    # errors were not cached and are asked again
    again = judge(generator, prompts, parse, cache=ResponseCache(tmp_path / "cache"))
    replay = judgement_frame("toy", pairs, again, lambda v: {"toy": v}, ("toy",))
    assert replay["toy_failure"].tolist() == frame["toy_failure"].tolist()
    assert [j.from_cache for j in again][prompts.index("flagged")] == 2


def test_an_endpoints_refusal_is_a_refusal(monkeypatch):
    """An OpenAI-compatible endpoint's content filter and refusal message reach the pair as kind "refusal"."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from radrank.runtime.generators import OpenAIGenerator

    answers = {"a": {"finish_reason": "content_filter", "message": {"role": "assistant", "content": ""}},
               "b": {"finish_reason": "stop", "message": {"role": "assistant", "content": None,
                                                          "refusal": "I can't assist with that."}},
               "c": {"finish_reason": "stop", "message": {"role": "assistant", "content": "SCORE 1"}}}

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            data = json.dumps({"choices": [answers[body["messages"][0]["content"]]],
                               "usage": {"completion_tokens": 3}}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    monkeypatch.setenv("RADRANK_TEST_KEY", "sk-test-0123456789abcdef")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        gen = OpenAIGenerator(model="judge", api_base=f"http://127.0.0.1:{server.server_address[1]}/v1",
                              api_key_env="RADRANK_TEST_KEY", max_retries=0)
        requests = [[{"role": "user", "content": k}] for k in answers]
        judgements = judge(gen, requests, parse)
    finally:
        server.shutdown()
        server.server_close()
    frame = judgement_frame("toy", pd.DataFrame({"sample_id": list(answers)}), judgements,
                            lambda v: {"toy": v}, ("toy",))
    assert frame["toy_failure"].tolist() == ["refusal", "refusal", ""]
    assert "content_filter" in judgements[0].reason and "I can't assist" in judgements[1].reason


# --- counts and failure policies ------------------------------------------------------------------------------

GREEN = metrics.get("green")


def green_scores(values, kinds, attempts=None) -> pd.DataFrame:
    """A model's GREEN per-sample scores: ``values`` where ``kinds`` is "", NaN where it names a failure."""
    n = len(values)
    frame = pd.DataFrame({"sample_id": [f"s{i}" for i in range(n)]})
    for column in GREEN.columns:
        frame[column] = 0.0
    frame["green"] = [np.nan if k else v for v, k in zip(values, kinds)]
    frame["green_unparsed"] = [1.0 if k else 0.0 for k in kinds]
    frame["green_unparsed_reason"] = ["x" if k else "" for k in kinds]
    frame["green_analysis"] = ""
    frame["green_failure"] = list(kinds)
    frame["green_attempts"] = np.array(attempts if attempts is not None else [2 if k else 1 for k in kinds])
    return frame


def gamer_and_honest(n=40):
    """An honest model (GREEN 0.6 on every case) and a worse one that scores 0.9 on its easy half but whose
    answers make the judge fail on every hard case (where an honest judge would give it 0.1): with failures
    excluded it ranks first; scored worst, it ranks last."""
    kinds = ["unparsed", "refusal", "truncated", "empty"] * (n // 8)
    return {"honest": green_scores([0.6] * n, [""] * n, [1] * (n - 3) + [2] * 3),
            "gamer": green_scores([0.9] * (n // 2) + [0.1] * (n // 2), [""] * (n // 2) + kinds),
            "steady": green_scores([0.5] * n, [""] * n)}


def test_counts_and_policy_ranks_equal_an_independent_recount():
    scores = gamer_and_honest()
    table = failure_accounting(scores, judges_of(["bleu2", "green"]), ranked=["gamer", "honest", "steady"])
    by = table.set_index("model")
    assert set(table["metric"]) == {"green"} and len(table) == 3
    gamer = scores["gamer"]
    for kind in FAILURE_KINDS:
        assert by.loc["gamer", kind] == sum(k == kind for k in gamer["green_failure"])
    assert by.loc["gamer", "failed"] == 20 and by.loc["gamer", "failed_share"] == 0.5
    assert by.loc["gamer", "retried"] == 20 and by.loc["honest", "retried"] == 3 and by.loc["honest", "failed"] == 0
    # the policies' means, recomputed: excluded = the scored half; worst fills 0, best fills 1
    assert by.loc["gamer", "value_excluded"] == pytest.approx(0.9)
    assert by.loc["gamer", "value_worst"] == pytest.approx((0.9 * 20 + 0.0 * 20) / 40)
    assert by.loc["gamer", "value_best"] == pytest.approx((0.9 * 20 + 1.0 * 20) / 40)
    assert by.loc["gamer", ["rank_excluded", "rank_worst", "rank_best"]].tolist() == [1, 3, 1]
    assert by.loc["honest", ["rank_excluded", "rank_worst", "rank_best"]].tolist() == [2, 1, 2]
    assert by.loc["steady", ["rank_excluded", "rank_worst", "rank_best"]].tolist() == [3, 2, 3]
    # every ranked model whose rank a policy moves is flagged (the honest ones move because the gamer does)
    assert by["policy_sensitive"].to_dict() == {"gamer": True, "honest": True, "steady": True}
    # an unranked model is counted, not ranked
    unranked = failure_accounting(scores, [GREEN], ranked=["honest", "steady"]).set_index("model")
    assert unranked.loc["gamer", "failed"] == 20 and pd.isna(unranked.loc["gamer", "rank_worst"])
    assert not unranked.loc["gamer", "policy_sensitive"]
    assert unranked.loc["honest", ["rank_excluded", "rank_worst", "rank_best"]].tolist() == [1, 1, 1]


def test_no_failures_no_flag_and_excluded_is_the_leaderboards_estimate():
    rng = np.random.default_rng(0)
    scores = {m: green_scores(list(rng.uniform(0, 1, 30)), [""] * 30) for m in ("a", "b", "c")}
    scores["b"] = green_scores(list(rng.uniform(0, 1, 30)), [""] * 29 + ["unparsed"])
    table = failure_accounting(scores, [GREEN], ranked=list(scores)).set_index("model")
    result = bootstrap(scores, metrics.leaves("green"), n_boot=50, seed=0)
    est = result.summary[result.summary["metric"] == "green"].set_index("model")["estimate"]
    for m in scores:  # excluded is what the leaf's estimate does: the mean over the scored pairs
        assert table.loc[m, "value_excluded"] == pytest.approx(est[m], abs=1e-12)
    assert table.loc["a", "failed"] == 0 and table.loc["b", "unparsed"] == 1


def test_the_leaderboard_shows_counts_and_flags_a_ranking_a_failure_policy_flips():
    scores = gamer_and_honest()
    result = bootstrap(scores, metrics.leaves("green"), n_boot=50, seed=0)
    failures = failure_accounting(scores, [GREEN], ranked=list(scores))
    board = build_leaderboard(result.summary, {}, None, rank_by="green", fallback_rank_by="green",
                              failures=failures).set_index("model")
    # ranked by GREEN with failures excluded the worse model is first: the board says so and why
    assert board.loc["gamer", "Rank"] == 1
    assert board.loc["gamer", "GREEN failed"] == 20 and board.loc["gamer", "GREEN failed share"] == 0.5
    assert board.loc["gamer", "GREEN refusals"] == 5 and board.loc["gamer", "GREEN retried"] == 20
    assert board.loc["gamer", "GREEN rank, failures worst"] == 3
    assert "GREEN rank 1 with failures excluded, 3 scored worst" in board.loc["gamer", "Failure policy"]
    assert "depends on how failed GREEN answers are scored" in board.loc["gamer", "Flag"]
    # ranked by another leaf, the judge's flip is listed but is not the table's rank
    lexical = {m: f.assign(bleu2=np.where(f.index % 2 == 0, 0.3, 0.2)) for m, f in scores.items()}
    for f in lexical.values():
        f["bleu2_p2"] = f["bleu2"]  # not read: the BLEU leaf below is a mean of one column
    from radrank.metrics.base import mean_leaf

    result = bootstrap(lexical, [mean_leaf("bleu2", "BLEU"), *metrics.leaves("green")], n_boot=50, seed=0)
    board = build_leaderboard(result.summary, {}, None, rank_by="bleu2", failures=failures).set_index("model")
    assert board.loc["gamer", "Failure policy"].startswith("GREEN rank 1")
    assert "GREEN" not in str(board.loc["gamer"].get("Flag") or "")


def test_the_page_shows_the_failures_in_one_cell(tmp_path):
    from radrank.report.sections import _failure_cell, _metric_columns, judge_labels

    scores = gamer_and_honest()
    result = bootstrap(scores, metrics.leaves("green"), n_boot=50, seed=0)
    board = build_leaderboard(result.summary, {}, None, rank_by="green", fallback_rank_by="green",
                              failures=failure_accounting(scores, [GREEN], ranked=list(scores)))
    assert judge_labels(board) == ["GREEN"]
    assert not [c for c in _metric_columns(board) if "failure" in c or c.startswith("GREEN ")]
    gamer = board[board["model"] == "gamer"].iloc[0]
    cell = _failure_cell(gamer, ["GREEN"])
    assert cell.md.startswith("GREEN 20 of 40 failed (50%): unparsed 5, refusals 5, truncated 5, empty 5; 20 retried")
    assert "rank 1 (failures excluded), 3 (scored worst), 1 (scored best)" in cell.md
    assert "a failure policy changes this rank" in cell.html()


def test_scored_as_worst_the_model_that_makes_the_judge_fail_loses():
    """config leaderboard.judge_failures: worst puts the failed pairs into the statistics at the judge's worst
    value: the worse model's trick buys nothing, and the counts and policy ranks are those of the default."""
    from radrank.stats.failures import score_failures

    scores = gamer_and_honest()
    worst = {m: score_failures(f, [GREEN], "worst") for m, f in scores.items()}
    assert worst["gamer"]["green"].isna().sum() == 0 and scores["gamer"]["green"].isna().sum() == 20  # a copy
    assert worst["gamer"]["green_matched"].equals(scores["gamer"]["green_matched"])  # only the leaf's column
    result = bootstrap(worst, metrics.leaves("green"), n_boot=200, seed=0)
    failures = failure_accounting(scores, [GREEN], ranked=list(scores))
    board = build_leaderboard(result.summary, {}, None, rank_by="green", fallback_rank_by="green",
                              failures=failures).set_index("model")
    assert board["Rank"].to_dict() == {"honest": 1, "steady": 2, "gamer": 3}
    assert board.loc["gamer", "GREEN"] == pytest.approx(0.45, abs=1e-3)  # (20 × 0.9 + 20 × 0) / 40
    assert board.loc["gamer", "GREEN failed"] == 20  # still counted and shown
    with pytest.raises(ValueError, match="worst or best"):
        score_failures(scores["gamer"], [GREEN], "excluded")


def test_the_config_reaches_the_statistics_job(tmp_path, monkeypatch):
    import yaml
    from _workflow import make_workdir

    from radrank.workflow import Plan, read_config

    workdir = make_workdir(tmp_path / "wd")
    monkeypatch.chdir(workdir)
    extra = workdir / "judge_failures.yaml"
    extra.write_text(yaml.safe_dump({"leaderboard": {"judge_failures": "worst"}}))
    plan = Plan.from_config(read_config(["config/config.yaml", str(extra)]))
    dataset, split = plan.groups()[0]
    assert plan.bootstrap_job(dataset, split).judge_failures == "worst"
    assert Plan.from_config(read_config(["config/config.yaml"])).bootstrap_job(dataset, split).judge_failures == \
        "excluded"
    extra.write_text(yaml.safe_dump({"leaderboard": {"judge_failures": "best"}}))
    with pytest.raises(Exception, match="judge_failures"):
        read_config(["config/config.yaml", str(extra)])
