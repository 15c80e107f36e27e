"""Provenance: no host paths, no credentials; output files readable like any other tool's."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from radrank import envs, io, provenance

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("url,scrubbed", [
    ("https://user:sk-secret@api.example.org/v1?key=sk-secret#frag", "https://api.example.org/v1"),
    ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1"),
    ("https://token@host.example/openai/deployments/x/chat?api-key=abc", "https://host.example/openai/deployments/x/chat"),
    ("http://[::1]:9/v1?x=1", "http://[::1]:9/v1"),
])
def test_scrub_url(url, scrubbed):
    assert provenance.scrub_url(url) == scrubbed


def test_record_scrubs_every_url_and_keeps_other_text():
    prov = provenance.record("scores", settings={"base_url": "https://u:pw@e.example/v1?k=pw", "model": "m",
                                                 "prompts_dir": "/data/prompts"},
                             models=[{"id": "judge", "base_url": "https://e.example/v1?sig=pw"}])
    blob = json.dumps(prov)
    assert "pw" not in blob and "u:" not in blob
    assert prov["settings"] == {"base_url": "https://e.example/v1", "model": "m", "prompts_dir": "/data/prompts"}
    assert prov["models"] == [{"id": "judge", "base_url": "https://e.example/v1"}]


def test_score_job_provenance_has_no_credentials(tmp_path):
    from radrank import jobs

    pairs = pd.DataFrame({"sample_id": ["a"], "study_id": [0], "reference": ["no effusion ."],
                          "hypothesis": ["no effusion ."]})
    io.write_parquet(pairs, tmp_path / "pairs.parquet", provenance.record("pairs"))
    out = tmp_path / "bleu2.parquet"
    jobs.ScoreGroup.of("bleu2", ["m"]).run(jobs.Files(pairs=[tmp_path / "pairs.parquet"]), jobs.Files(scores=[out]))
    env = io.read_provenance(out)["environment"]
    assert "interpreter" not in env
    assert set(env) == {"env", "lock_key", "python", "packages"}


def test_environment_names_the_lock_key_not_the_interpreter(monkeypatch):
    env = provenance.environment()
    assert sys.executable not in json.dumps(env)
    stamp = Path(sys.prefix) / provenance.STAMP
    if stamp.exists():  # running in a radrank venv: its build key
        assert env["lock_key"] == json.loads(stamp.read_text())["key"]
    assert provenance.STAMP == envs.STAMP


def test_lock_key_of_a_conda_env_is_the_env_file_key(monkeypatch, tmp_path):
    monkeypatch.setattr(sys, "prefix", str(tmp_path))  # no build stamp: a conda env
    assert provenance.lock_key("core") == envs.read_spec("core").key(None)
    assert provenance.lock_key("no-such-family") is None
    monkeypatch.delenv("RADRANK_ENV", raising=False)
    assert provenance.lock_key(None) is None


def test_lock_key_is_the_same_for_two_venv_locations(tmp_path):
    """Two hosts (two venv folders) with the same pins record the same environment."""
    code = "import json, sys; sys.path.insert(0, 'src'); from radrank import provenance; " \
           "print(json.dumps(provenance.environment()))"
    seen = []
    for name in ("a", "b"):
        prefix = tmp_path / name
        prefix.mkdir()
        (prefix / envs.STAMP).write_text(json.dumps({"key": "0123456789abcdef"}))
        env = {**os.environ, "RADRANK_ENV": "core"}
        out = subprocess.run([sys.executable, "-c", f"import sys; sys.prefix = {str(prefix)!r}; " + code],
                             cwd=REPO, env=env, capture_output=True, text=True, check=True).stdout
        seen.append(json.loads(out))
    assert seen[0] == seen[1] and seen[0]["lock_key"] == "0123456789abcdef"


@pytest.mark.parametrize("umask", [0o022, 0o002, 0o077])
def test_outputs_respect_the_umask(tmp_path, umask):
    old = os.umask(umask)
    try:
        df = pd.DataFrame({"a": [1]})
        io.write_parquet(df, tmp_path / "x.parquet", {"stage": "t"})
        io.write_csv(df, tmp_path / "x.csv")
        io.write_text("hello", tmp_path / "x.md")
        plain = tmp_path / "plain"
        plain.write_text("x")  # what open() gives a new file under this umask
    finally:
        os.umask(old)
    want = stat.S_IMODE(plain.stat().st_mode)
    assert want == 0o666 & ~umask
    for name in ("x.parquet", "x.csv", "x.md"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == want, name


def test_overwriting_keeps_umask_mode(tmp_path):
    old = os.umask(0o022)
    try:
        io.write_text("one", tmp_path / "r.md")
        io.write_text("two", tmp_path / "r.md")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "r.md").stat().st_mode) == 0o644
    assert not list(tmp_path.glob(".r.md.*"))
