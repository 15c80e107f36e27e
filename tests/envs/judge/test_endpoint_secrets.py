"""Credentials in a judge's endpoint URL (issue 20, item 5), in the judge environment: a whole scoring job of the
rubric judge against a local endpoint whose URL carries a user, a password and a token, and the OpenAI client's
own request line (httpx2 logs ``HTTP Request: POST <url>`` at INFO). The request uses the credentials; the job
log, the console, the score file, its provenance, the caches and the rule's params never hold them."""

from __future__ import annotations

import base64
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from radrank import io, jobs, metrics

USER, PASSWORD, TOKEN = "alice-user", "pw-Secret-9f2c", "tok-7d1e5a"
KEY = "sk-endpoint-secrets-0123456789"
SECRETS = (USER, PASSWORD, TOKEN, KEY)


class _Endpoint:
    """Chat completions on 127.0.0.1 (any path): every flag 0; records each request's path and headers."""

    def __init__(self):
        seen = self.requests = []

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                from radrank.metrics import mrscore_rubric as mr

                json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                seen.append({"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()}})
                text = json.dumps({k: 0 for k in mr.KEYS} | {"explanation": "fine"})
                data = json.dumps({"id": "x", "object": "chat.completion", "created": 0, "model": "judge-model",
                                   "choices": [{"index": 0, "finish_reason": "stop",
                                                "message": {"role": "assistant", "content": text}}],
                                   "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def url(self, path="/v1", query="") -> str:
        return f"http://{USER}:{PASSWORD}@127.0.0.1:{self.server.server_address[1]}{path}{query}"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


@pytest.fixture
def endpoint(monkeypatch):
    monkeypatch.setenv("RADRANK_TEST_SECRETS_KEY", KEY)
    with _Endpoint() as e:
        yield e


def _clean(data: bytes | str, where):
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    found = [s for s in SECRETS if s in text]
    assert not found, f"{found} in {where}"


def test_a_scoring_job_uses_the_credentials_and_writes_none(endpoint, pairs, tmp_path, capfd):
    pairs_path = tmp_path / "pairs.parquet"
    io.write_parquet(pairs, pairs_path, {"dataset": "d", "split": "findings", "model": "m", "n_pairs": len(pairs)})
    api_base = endpoint.url(query=f"?token={TOKEN}&api-version=2")
    settings = {"backend": "openai", "model": "judge-model", "api_base": api_base,
                "api_key_env": "RADRANK_TEST_SECRETS_KEY", "api_max_retries": 0,
                "cache_dir": str(tmp_path / "judge-cache")}
    config = {"metric_settings": {"mrscore_rubric": settings}, "score_cache": {"dir": str(tmp_path / "scores")}}
    identity = metrics.get("mrscore_rubric").identity(metrics.configured("mrscore_rubric", config))
    params = {"metric": "mrscore_rubric", "identity": identity, "dataset": "d", "split": "findings",
              "models": ("m",)}
    _clean(json.dumps(params), "the rule params")
    job = jobs.ScoreGroup.from_params(params, config)
    out = tmp_path / "scores.parquet"
    log_path = tmp_path / "job.log"
    with jobs.job_log(log_path):
        job.run(jobs.Files(pairs=[pairs_path]), jobs.Files(scores=[out]))
    scores = io.read_parquet(out)
    assert (scores["mrscore_rubric"] == 100.0).all()
    # the requests used them: the token in the query, user and password as HTTP Basic authentication
    assert endpoint.requests and all(r["path"] == f"/v1/chat/completions?token={TOKEN}&api-version=2"
                                     for r in endpoint.requests)
    basic = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    assert {r["headers"]["authorization"] for r in endpoint.requests} == {basic}
    prov = io.read_provenance(out)
    assert prov["settings"]["api_base"] == f"http://127.0.0.1:{endpoint.server.server_address[1]}/v1"
    files = [out, log_path, *tmp_path.joinpath("judge-cache").rglob("*"), *tmp_path.joinpath("scores").rglob("*")]
    for f in files:
        if f.is_file():
            _clean(f.read_bytes(), f)
    captured = capfd.readouterr()
    _clean(captured.out + captured.err, "the console")


def test_the_openai_clients_request_line_is_masked(endpoint, tmp_path, capfd):
    """The OpenAI SDK's HTTP client logs each request's URL at INFO; in a job log it must be masked."""
    from openai import OpenAI

    base_url = endpoint.url()
    metrics.configured("mrscore_rubric", {"metric_settings": {"mrscore_rubric": {"api_base": base_url}}})
    log_path = tmp_path / "job.log"
    with jobs.job_log(log_path):
        client = OpenAI(api_key=KEY, base_url=base_url, max_retries=0, timeout=30)
        client.chat.completions.create(model="judge-model", messages=[{"role": "user", "content": "hi"}])
    assert endpoint.requests[-1]["headers"]["authorization"].startswith("Basic ")  # the client used them
    text = log_path.read_text()
    port = endpoint.server.server_address[1]
    assert f"HTTP Request: POST http://***@127.0.0.1:{port}/v1/chat/completions" in text
    _clean(text, "the job log")
    _clean(capfd.readouterr().err, "the console")
