"""radrank's API metrics (mammo_green, radfact_ct) against radeval's own classes, with a fake
OpenAI-compatible server on 127.0.0.1 (../fake_openai.py) playing the judge.

The server answers by simple rules on the reports' sentences, so every expected number is known
here; the package's own entry points (``MammoGREEN.__call__``, ``RadFactCT.forward``, pointed at
the same server through OPENAI_BASE_URL) give the same per-sample values. The API key is read
from an environment variable and must appear nowhere: not in scores, provenance, logs or the
console.
"""

from __future__ import annotations

import json
import logging
import math
import re
import time

import pytest

pd = pytest.importorskip("pandas")
pytest.importorskip("radeval")
pytest.importorskip("openai")
yaml = pytest.importorskip("yaml")

from fake_openai import FakeOpenAI, user_text  # noqa: E402

from radrank import metrics  # noqa: E402
from radrank.errors import ConfigError, MissingWeightsError  # noqa: E402
from radrank.metrics import radeval_api  # noqa: E402

KEY = "sk-radrank-test-0b1c2d3e4f5a6b7c8d9e"
KEY_ENV = "RADRANK_TEST_JUDGE_KEY"


def sentences(text: str) -> list[str]:
    return [s.strip().rstrip(".").lower() for s in re.split(r"\.\s+|\.$", text.strip()) if s.strip().rstrip(".")]


def _pairs(refs, hyps):
    return pd.DataFrame({"sample_id": [f"s{i}" for i in range(len(refs))], "reference": refs, "hypothesis": hyps})


@pytest.fixture
def env_key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def _assert_no_key(out, caplog, capsys, *paths):
    captured = capsys.readouterr()
    assert KEY not in out.to_json()
    assert KEY not in json.dumps(out.attrs, default=str)
    assert KEY not in caplog.text
    assert KEY not in captured.out + captured.err
    for p in paths:
        assert KEY not in p.read_bytes().decode("latin-1")


def _write_pairs(tmp_path, pairs):
    from radrank import io

    path = tmp_path / "pairs.parquet"
    io.write_parquet(pairs, path, {"stage": "pairs", "dataset": "t", "split": "findings", "model": "m"})
    return path


# --- mammo_green ------------------------------------------------------------------------------------------------

MAMMO_REFS = ["Scattered fibroglandular density. Benign calcification in the left breast. BI-RADS 2.",
              "Heterogeneously dense breasts. Mass in the right upper outer quadrant. BI-RADS 4.",
              "FENCE. Almost entirely fatty breasts. BI-RADS 1.",
              "Scattered fibroglandular density. Benign calcification in the left breast. BI-RADS 2.",
              "BADSCHEMA", "REJECT"]
MAMMO_HYPS = ["Scattered fibroglandular density. BI-RADS 1.",
              "Heterogeneously dense breasts. Mass in the right upper outer quadrant. BI-RADS 4.",
              "FENCE. Almost entirely fatty breasts. Stable since prior. BI-RADS 1.",
              "Scattered fibroglandular density. BI-RADS 1.",  # repeats pair 0
              "x", "y"]


def mammo_counts(ref: str, hyp: str) -> dict:
    r, h = set(sentences(ref)), set(sentences(hyp))
    return {"matched_findings": len(r & h),
            "significant_errors": {"false_finding": len(h - r), "missing_finding": len(r - h),
                                   "mischaracterization": 0, "wrong_location_laterality": 0,
                                   "incorrect_birads": 0, "incorrect_breast_density": 0},
                                   "insignificant_errors": 1}


def mammo_responder(body):
    m = re.match(r"REFERENCE_REPORT:\n(.*)\n\nGENERATED_REPORT:\n(.*)\Z", user_text(body), re.DOTALL)
    ref, hyp = m.group(1), m.group(2)
    if ref == "REJECT":
        return (400, "request rejected by the test server")
    counts = mammo_counts(ref, hyp)
    if ref == "BADSCHEMA":
        del counts["significant_errors"]["incorrect_birads"]
    text = json.dumps(counts, indent=1)
    if ref.startswith("FENCE"):
        return "Here you go:\n```json\n" + text[:-1] + ",\n}\n```"  # fenced, with a trailing comma
    return text


def test_mammo_green_fake_server(env_key, tmp_path, caplog, capsys):
    from radrank import io, jobs

    pairs = _pairs(MAMMO_REFS, MAMMO_HYPS)
    out_path = tmp_path / "scores.parquet"
    with FakeOpenAI(mammo_responder) as server, caplog.at_level(logging.DEBUG):
        settings = {"base_url": server.base_url, "api_key_env": KEY_ENV, "model": "judge-test", "concurrency": 2,
                    "max_retries": 0}
        out = metrics.score("mammo_green", pairs, settings)
        n_requests = len(server.requests)
        jobs.score(metric="mammo_green", pairs_path=_write_pairs(tmp_path, pairs), required={}, settings=settings,
                   out=out_path)
    for i in range(4):
        c = mammo_counts(MAMMO_REFS[i], MAMMO_HYPS[i])
        errors = sum(c["significant_errors"].values())
        assert out["mammo_green"].iloc[i] == pytest.approx(c["matched_findings"] / (c["matched_findings"] + errors))
        assert out["mammo_green_false_finding"].iloc[i] == c["significant_errors"]["false_finding"]
        assert out["mammo_green_reason"].iloc[i] == ""
    assert out["mammo_green"].iloc[1] == 1.0 and out["mammo_green"].iloc[0] == pytest.approx(1 / 4)
    assert out["mammo_green_reason"].iloc[4].startswith("unparsed: ValueError")
    assert out["mammo_green_reason"].iloc[5].startswith("api_error: BadRequestError")
    assert out[list(radeval_api.MAMMO_NUMBERS)].iloc[4:].isna().all().all()
    # Pairs 0 and 3 are the same: judged once; the bad ones three times each (the package's tries).
    assert n_requests == 3 + 3 + 3
    body = server.requests[0]["body"]
    assert server.requests[0]["headers"]["authorization"] == f"Bearer {KEY}"
    assert body["model"] == "judge-test" and body["temperature"] == 0.0 and body["max_completion_tokens"] == 8192
    assert body["messages"][0]["role"] == "system"
    written = pd.read_parquet(out_path)
    assert written["mammo_green"].iloc[:4].tolist() == out["mammo_green"].iloc[:4].tolist()
    _assert_no_key(out, caplog, capsys, out_path)
    assert KEY not in json.dumps(io.read_provenance(out_path))


def test_mammo_green_equals_package_call(env_key, monkeypatch):
    mod = radeval_api._load_file_module("radeval.metrics.green_score.mammo_green")
    refs, hyps = MAMMO_REFS[:4], MAMMO_HYPS[:4]
    with FakeOpenAI(mammo_responder) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)  # the package's classes take no base URL
        package = mod.MammoGREEN(model_name="judge-test", provider="openai", openai_api_key=KEY)
        mean, std, scores, _ = package(refs, hyps)
        monkeypatch.delenv("OPENAI_BASE_URL")
        out = metrics.score("mammo_green", _pairs(refs, hyps), {"base_url": server.base_url, "api_key_env": KEY_ENV})
    assert out["mammo_green"].tolist() == pytest.approx(scores, abs=1e-15)
    assert out["mammo_green"].mean() == pytest.approx(mean)


def test_mammo_green_module_loaded_without_green_stack():
    import multiprocessing
    import sys

    radeval_api._load_file_module("radeval.metrics.green_score.mammo_green")
    assert "radeval.metrics.green_score.green" not in sys.modules  # GREEN's torch / datasets stack
    assert multiprocessing.get_start_method(allow_none=True) != "spawn"


# --- radfact_ct ---------------------------------------------------------------------------------------------------

RADFACT_REFS = ["Small right pleural effusion. Mild emphysema. No pneumothorax.",
                "Hepatic steatosis. Simple renal cyst.",
                "",
                "REJECT",
                "Small right pleural effusion. Mild emphysema. No pneumothorax."]
RADFACT_HYPS = ["Small right pleural effusion. Coronary calcification.",
                "Hepatic steatosis. Simple renal cyst.",
                "",
                "Anything.",
                "Small right pleural effusion. Coronary calcification."]  # repeats pair 0


@pytest.fixture
def prompts_dir(tmp_path):
    """Prompt files of RadFact-CT's layout, with placeholder texts written here."""
    d = tmp_path / "radfact_prompts"
    d.mkdir()
    (d / "report_to_phrases_system.txt").write_text("TEST PHRASES SYSTEM: split the report into findings.")
    (d / "report_to_phrases_examples.json").write_text(json.dumps([{
        "findings_text": "Example finding one. Example finding two.",
        "parsed_report": {"sentence_list": [{"orig": "Example finding one.", "new": ["example finding one"]},
                                            {"orig": "Example finding two.", "new": ["example finding two"]}]}}]))
    (d / "negative_filtering_system.txt").write_text("TEST NEGATIVE SYSTEM: drop negative findings.")
    (d / "negative_filtering_examples.json").write_text(json.dumps([{
        "input": ["no example", "an example"], "output": {"phrases": ["an example"]}}]))
    (d / "nli_system.txt").write_text("TEST NLI SYSTEM: is the hypothesis entailed by the reference?")
    (d / "nli_examples.json").write_text(json.dumps([{
        "input": {"phrases_A": ["example a"], "phrases_B": ["example a", "example b"]},
        "output": {"phrases_A_evidenced": [{"phrase": "example a", "status": "entailment", "evidence": ["example a"]}],
                   "phrases_B_evidenced": [{"phrase": "example a", "status": "entailment", "evidence": ["example a"]},
                                           {"phrase": "example b", "status": "neutral", "evidence": []}]}}]))
    return d


def radfact_responder(body):
    system = body["messages"][0]["content"]
    text = user_text(body)
    if system.startswith("TEST PHRASES SYSTEM"):
        if text == "REJECT":
            return (400, "request rejected by the test server")
        return json.dumps({"sentence_list": [{"orig": s, "new": [s]} for s in sentences(text)]})
    if system.startswith("TEST NEGATIVE SYSTEM"):
        return json.dumps({"phrases": [p for p in json.loads(text) if not p.startswith("no ")]})
    if system.startswith("TEST NLI SYSTEM"):
        q = yaml.safe_load(text)
        ok = q["hypothesis"] in q["reference"]
        return yaml.dump({"phrase": q["hypothesis"], "status": "entailment" if ok else "not_entailment",
                          "evidence": [q["hypothesis"]] if ok else []}, sort_keys=False)
    return (400, "unexpected prompt")


def radfact_expected(ref, hyp, filter_negatives=False):
    r, h = sentences(ref), sentences(hyp)
    if filter_negatives:
        r, h = [x for x in r if not x.startswith("no ")], [x for x in h if not x.startswith("no ")]
    if not r and not h:
        return math.nan, math.nan
    p = sum(x in r for x in h) / len(h) if h else math.nan
    rc = sum(x in h for x in r) / len(r) if r else math.nan
    return p, rc


@pytest.mark.parametrize("filter_negatives", [False, True])
def test_radfact_ct_fake_server(env_key, prompts_dir, tmp_path, caplog, capsys, filter_negatives):
    from radrank import jobs

    pairs = _pairs(RADFACT_REFS, RADFACT_HYPS)
    out_path = tmp_path / "scores.parquet"
    with FakeOpenAI(radfact_responder) as server, caplog.at_level(logging.DEBUG):
        settings = {"base_url": server.base_url, "api_key_env": KEY_ENV, "prompts_dir": str(prompts_dir),
                    "filter_negatives": filter_negatives, "max_retries": 0}
        out = metrics.score("radfact_ct", pairs, settings)
        jobs.score(metric="radfact_ct", pairs_path=_write_pairs(tmp_path, pairs), required={}, settings=settings,
                   out=out_path)
    for i in (0, 1, 4):
        p, r = radfact_expected(RADFACT_REFS[i], RADFACT_HYPS[i], filter_negatives)
        assert out["radfact_ct_precision"].iloc[i] == pytest.approx(p)
        assert out["radfact_ct_recall"].iloc[i] == pytest.approx(r)
        assert out["radfact_ct_f1"].iloc[i] == pytest.approx(2 * p * r / (p + r))
        assert out["radfact_ct_reason"].iloc[i] == ""
    assert out["radfact_ct_precision"].iloc[0] == 0.5
    assert out["radfact_ct_recall"].iloc[0] == pytest.approx(1 / 2 if filter_negatives else 1 / 3)
    assert out["radfact_ct_reason"].iloc[2] == "no_phrases" and math.isnan(out["radfact_ct_f1"].iloc[2])
    assert out["radfact_ct_reason"].iloc[3].startswith("api_error: BadRequestError")
    leaves = {leaf.name: leaf for leaf in radeval_api.RADFACT_CT.leaves}
    values = {n: float(leaf.value(leaf.statistics(out).sum(axis=0))) for n, leaf in leaves.items()}
    ps = [radfact_expected(RADFACT_REFS[i], RADFACT_HYPS[i], filter_negatives)[0] for i in (0, 1, 4)]
    rs = [radfact_expected(RADFACT_REFS[i], RADFACT_HYPS[i], filter_negatives)[1] for i in (0, 1, 4)]
    mp, mr = sum(ps) / 3, sum(rs) / 3
    assert values["radfact_ct_precision"] == pytest.approx(mp)
    assert values["radfact_ct_recall"] == pytest.approx(mr)
    assert values["radfact_ct_f1"] == pytest.approx(2 * mp * mr / (mp + mr))
    assert all(r["headers"]["authorization"] == f"Bearer {KEY}" for r in server.requests)
    _assert_no_key(out, caplog, capsys, out_path)


def test_radfact_ct_equals_package_forward(env_key, prompts_dir, monkeypatch):
    mod = radeval_api._import("radeval.metrics.radfact_ct.radfact_ct")
    refs, hyps = [RADFACT_REFS[i] for i in (0, 1, 2)], [RADFACT_HYPS[i] for i in (0, 1, 2)]
    monkeypatch.setattr(mod, "_PROMPTS_DIR", prompts_dir)
    with FakeOpenAI(radfact_responder) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)  # forward_async builds its own client
        aggregate, per_sample = mod.RadFactCT(model_name="judge-test", openai_api_key=KEY, max_concurrent=4)(hyps, refs)
        monkeypatch.delenv("OPENAI_BASE_URL")
        out = metrics.score("radfact_ct", _pairs(refs, hyps), {"base_url": server.base_url, "api_key_env": KEY_ENV,
                                                               "prompts_dir": str(prompts_dir)})
    for col, key in (("radfact_ct_precision", "logical_precision"), ("radfact_ct_recall", "logical_recall"),
                     ("radfact_ct_f1", "logical_f1")):
        assert out[col].tolist() == pytest.approx([s[key] for s in per_sample], nan_ok=True)
    leaves = {leaf.name: leaf for leaf in radeval_api.RADFACT_CT.leaves}
    for name, key in (("radfact_ct_precision", "logical_precision"), ("radfact_ct_recall", "logical_recall"),
                      ("radfact_ct_f1", "logical_f1")):
        value = float(leaves[name].value(leaves[name].statistics(out).sum(axis=0)))
        assert round(value * 100, 2) == aggregate[key]  # RadEval prints percentages


def test_radfact_ct_without_prompts_fails_with_key(env_key, tmp_path):
    mod = radeval_api._import("radeval.metrics.radfact_ct.radfact_ct")
    if (mod._PROMPTS_DIR / "nli_system.txt").exists():
        pytest.skip("this radeval ships RadFact-CT's prompts")
    start = time.perf_counter()
    with pytest.raises(MissingWeightsError, match="metric_settings.radfact_ct.prompts_dir"):
        metrics.score("radfact_ct", _pairs(["a"], ["b"]), {"api_key_env": KEY_ENV, "base_url": "http://127.0.0.1:9/v1"})
    with pytest.raises(MissingWeightsError, match="nli_system.txt"):
        metrics.score("radfact_ct", _pairs(["a"], ["b"]), {"api_key_env": KEY_ENV, "prompts_dir": str(tmp_path),
                                                           "base_url": "http://127.0.0.1:9/v1"})
    assert time.perf_counter() - start < 5


@pytest.mark.parametrize("name", ["mammo_green", "radfact_ct"])
def test_missing_key_is_a_config_error(monkeypatch, name):
    monkeypatch.delenv(KEY_ENV, raising=False)
    with pytest.raises(ConfigError, match=KEY_ENV):
        metrics.score(name, _pairs(["a"], ["b"]), {"api_key_env": KEY_ENV, "base_url": "http://127.0.0.1:9/v1"})


@pytest.mark.parametrize("name", ["mammo_green", "radfact_ct"])
def test_dead_endpoint_fails_the_job_without_the_key(env_key, prompts_dir, name, caplog):
    def refuse(body):
        return (401, f"invalid api key {KEY[:6]}...")

    with FakeOpenAI(refuse) as server, caplog.at_level(logging.DEBUG):
        settings = {"base_url": server.base_url, "api_key_env": KEY_ENV, "max_retries": 0}
        if name == "radfact_ct":
            settings["prompts_dir"] = str(prompts_dir)
        with pytest.raises(RuntimeError, match="all 2 API requests failed") as err:
            metrics.score(name, _pairs(["Mass. BI-RADS 4.", "Cyst."], ["Mass.", "Cyst."]), settings)
    assert "AuthenticationError" in str(err.value) and KEY not in str(err.value) and KEY not in caplog.text
