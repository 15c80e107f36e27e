"""radrank's API metrics (mammo_green, radfact_ct) against radeval's own classes, with a fake
OpenAI-compatible server on 127.0.0.1 (../fake_openai.py) playing the judge (judges.py).

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

import pandas as pd
import pytest
from _strict import reference
from fake_openai import FakeOpenAI
from judges import KEY, KEY_ENV, mammo_counts, mammo_responder, radfact_expected, radfact_responder, write_prompts

from radrank import metrics
from radrank.errors import ConfigError, MissingWeightsError
from radrank.metrics import radeval_api
from radrank.runtime import Runtime


@pytest.fixture(autouse=True)
def reference_packages():
    """The package whose classes these metrics run, and the client and parser its judges need."""
    return reference("radeval"), reference("openai"), reference("yaml")


def _pairs(refs, hyps):
    return pd.DataFrame({"sample_id": [f"s{i}" for i in range(len(refs))], "reference": refs, "hypothesis": hyps})


@pytest.fixture
def env_key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


@pytest.fixture
def prompts_dir(tmp_path):
    return write_prompts(tmp_path / "radfact_prompts")


def _assert_no_key(out, caplog, capsys, *paths):
    captured = capsys.readouterr()
    assert KEY not in out.to_json()
    assert KEY not in json.dumps(out.attrs, default=str)
    assert KEY not in caplog.text
    assert KEY not in captured.out + captured.err
    for p in paths:
        assert KEY not in p.read_bytes().decode("latin-1")


def test_declarations():
    for metric in (radeval_api.MAMMO_GREEN, radeval_api.RADFACT_CT):
        s = metric.settings()
        assert metric.gpus(s) == 0 and metric.family == "radeval"
        # The judge, its endpoint and sampling are the identity; where the key lives and how requests run are not.
        assert {"model", "base_url", "temperature"} <= set(s.identity())
        assert not {"api_key_env", "concurrency", "request_timeout", "max_retries"} & set(s.identity())
    assert radeval_api.MAMMO_GREEN.weights(radeval_api.MAMMO_GREEN.settings()) == ()


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


def test_mammo_green_fake_server(env_key, caplog, capsys):
    pairs = _pairs(MAMMO_REFS, MAMMO_HYPS)
    with FakeOpenAI(mammo_responder) as server, caplog.at_level(logging.DEBUG):
        settings = {"base_url": server.base_url, "api_key_env": KEY_ENV, "model": "judge-test", "concurrency": 2,
                    "max_retries": 0}
        out = metrics.score("mammo_green", pairs, settings)
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
    assert len(server.requests) == 3 + 3 + 3
    body = server.requests[0]["body"]
    assert server.requests[0]["headers"]["authorization"] == f"Bearer {KEY}"
    assert body["model"] == "judge-test" and body["temperature"] == 0.0 and body["max_completion_tokens"] == 8192
    assert body["messages"][0]["role"] == "system"
    _assert_no_key(out, caplog, capsys)


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


@pytest.mark.parametrize("filter_negatives", [False, True])
def test_radfact_ct_fake_server(env_key, prompts_dir, caplog, capsys, filter_negatives):
    pairs = _pairs(RADFACT_REFS, RADFACT_HYPS)
    with FakeOpenAI(radfact_responder) as server, caplog.at_level(logging.DEBUG):
        settings = {"base_url": server.base_url, "api_key_env": KEY_ENV, "prompts_dir": str(prompts_dir),
                    "filter_negatives": filter_negatives, "max_retries": 0}
        out = metrics.score("radfact_ct", pairs, settings)
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
    prompts = out.attrs["models"]["prompts_sha256"]
    assert set(prompts) == set(radeval_api.RADFACT_PROMPT_FILES)
    _assert_no_key(out, caplog, capsys)


def test_radfact_ct_one_side_without_phrases_says_why(env_key, prompts_dir):
    """The package's precision (or recall) of a report without phrases is NaN (its F1 0): the reason says so."""
    with FakeOpenAI(radfact_responder) as server:
        out = metrics.score("radfact_ct", _pairs(["Hepatic steatosis.", ""], ["", "Hepatic steatosis."]),
                            {"base_url": server.base_url, "api_key_env": KEY_ENV, "prompts_dir": str(prompts_dir)})
    assert out["radfact_ct_reason"].tolist() == ["no_hypothesis_phrases", "no_reference_phrases"]
    assert math.isnan(out["radfact_ct_precision"].iloc[0]) and out["radfact_ct_recall"].iloc[0] == 0.0
    assert math.isnan(out["radfact_ct_recall"].iloc[1]) and out["radfact_ct_precision"].iloc[1] == 0.0
    assert out["radfact_ct_f1"].tolist() == [0.0, 0.0]


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


def test_radfact_ct_prompts_dir_null_is_the_package_folder_found_in_the_job(env_key, prompts_dir, monkeypatch):
    """Declared with no path (the package's folder is known only in the job's environment), resolved in the job
    under the same key."""
    from radrank.runtime import available

    mod = radeval_api._import("radeval.metrics.radfact_ct.radfact_ct")
    monkeypatch.setattr(mod, "_PROMPTS_DIR", prompts_dir)
    metric = radeval_api.RADFACT_CT
    (declared,) = metric.weights(metric.settings())
    assert declared.ref is None and available(declared) is None  # the load-time check leaves it to the job
    runtime = Runtime()
    with FakeOpenAI(radfact_responder) as server:
        out = metrics.score("radfact_ct", _pairs(RADFACT_REFS[:1], RADFACT_HYPS[:1]),
                            {"base_url": server.base_url, "api_key_env": KEY_ENV}, runtime=runtime)
    assert [(r.key, r.ref) for r in runtime.resolved] == [(declared.key, str(prompts_dir))]
    assert out["radfact_ct_precision"].iloc[0] == 0.5


def test_radfact_ct_without_prompts_fails_with_key_before_any_request(env_key, tmp_path):
    mod = radeval_api._import("radeval.metrics.radfact_ct.radfact_ct")
    if (mod._PROMPTS_DIR / "nli_system.txt").exists():
        pytest.skip("this radeval ships RadFact-CT's prompts")
    with FakeOpenAI(radfact_responder) as server:
        settings = {"api_key_env": KEY_ENV, "base_url": server.base_url}
        with pytest.raises(MissingWeightsError, match="metric_settings.radfact_ct.prompts_dir"):
            metrics.score("radfact_ct", _pairs(["a"], ["b"]), settings)
        with pytest.raises(MissingWeightsError, match=r"lacks report_to_phrases_system\.txt.*nli_system\.txt"):
            metrics.score("radfact_ct", _pairs(["a"], ["b"]), {**settings, "prompts_dir": str(tmp_path)})
    assert server.requests == []
    # A configured folder is checked when the workflow loads, without the package (paths only).
    from radrank.runtime import available

    metric = radeval_api.RADFACT_CT
    (ref,) = metric.weights(metric.settings({"prompts_dir": str(tmp_path), "filter_negatives": True}))
    assert "negative_filtering_system.txt" in available(ref)


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


# --- a scoring job ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["mammo_green", "radfact_ct"])
def test_job_files_hold_no_key(env_key, prompts_dir, tmp_path, caplog, capsys, name):
    """A scoring job (jobs.ScoreGroup: scores parquet + provenance) on the fake server: the same numbers, and the key
    nowhere."""
    from radrank import io, jobs

    refs, hyps, responder = ((MAMMO_REFS[:4], MAMMO_HYPS[:4], mammo_responder) if name == "mammo_green" else
                             ([RADFACT_REFS[i] for i in (0, 1, 4)], [RADFACT_HYPS[i] for i in (0, 1, 4)],
                              radfact_responder))
    pairs = _pairs(refs, hyps)
    pairs_path, out_path = tmp_path / "pairs.parquet", tmp_path / "scores.parquet"
    io.write_parquet(pairs, pairs_path, {"stage": "pairs", "dataset": "t", "split": "findings", "model": "m"})
    with FakeOpenAI(responder) as server, caplog.at_level(logging.DEBUG):
        settings = {"base_url": server.base_url, "api_key_env": KEY_ENV, "max_retries": 0}
        if name == "radfact_ct":
            settings["prompts_dir"] = str(prompts_dir)
        out = metrics.score(name, pairs, settings)
        jobs.ScoreGroup.of(name, ["m"], settings).run(jobs.Files(pairs=[pairs_path]), jobs.Files(scores=[out_path]))
    written = pd.read_parquet(out_path)
    column = metrics.get(name).leaves[0].column
    assert written[column].tolist() == pytest.approx(out[column].tolist(), nan_ok=True)
    _assert_no_key(out, caplog, capsys, out_path)
    assert KEY not in json.dumps(io.read_provenance(out_path))
