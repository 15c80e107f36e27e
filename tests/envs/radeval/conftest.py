"""Tests of the radeval environment (radeval 2.2.1 on transformers 5, numpy < 2; openai for the API metrics).

Run from the repository root with that environment's python:
``python -m pytest tests/envs/radeval``. Nothing is downloaded: the hub is off, the Hugging Face
cache is an empty temporary folder (../hf_sandbox.py), the models are tiny random ones built here
(tiny_radeval.py), stanza's pipeline is a recorded stand-in (tiny_radeval.FakeStanza), and the API
metrics talk to a fake OpenAI-compatible server on 127.0.0.1 (../fake_openai.py, judges.py).
Shared setup (hub off, one torch thread): ../conftest.py.
"""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import hf_sandbox

HERE = Path(__file__).resolve().parent
hf_sandbox.isolate(HERE.parents[2] / "src", HERE)

import pytest  # noqa: E402


@pytest.fixture(scope="session")
def tiny(tmp_path_factory):
    """The tiny stand-ins of every radeval model, by role (tiny_radeval.build)."""
    import tiny_radeval

    return tiny_radeval.build(tmp_path_factory.mktemp("radeval-tiny"))


# --- stanza -----------------------------------------------------------------------------------------------


@pytest.fixture
def fresh_temporal_module():
    """f1temporal imported afresh by the test (its module-level pipeline is built at import)."""
    from radrank.metrics.radeval_extras import TEMPORAL_MODULE

    sys.modules.pop(TEMPORAL_MODULE, None)
    yield TEMPORAL_MODULE
    sys.modules.pop(TEMPORAL_MODULE, None)


@pytest.fixture
def fake_stanza(tmp_path, monkeypatch, fresh_temporal_module):
    """A stanza resources directory (its layout only) and ``stanza.Pipeline`` replaced by tiny_radeval.FakeStanza."""
    import stanza
    from tiny_radeval import FakeStanza

    d = tmp_path / "stanza_resources"
    (d / "en").mkdir(parents=True)
    (d / "resources.json").write_text("{}")
    monkeypatch.setattr(stanza, "Pipeline", FakeStanza)
    FakeStanza.built.clear()
    FakeStanza.calls.clear()
    return d


# --- the network ------------------------------------------------------------------------------------------


@pytest.fixture
def connections(monkeypatch):
    """Every outgoing connection attempted during the test, refused (loopback ones go through: the fake
    OpenAI server). Asserting the list is empty checks that nothing reached for the network — an assertion
    on the mechanism, where the code under test may catch the refusal."""
    attempts = []
    real = socket.socket.connect

    def connect(self, address):
        host = address[0] if isinstance(address, tuple) else address
        if host in ("127.0.0.1", "::1", "localhost"):
            return real(self, address)
        attempts.append(address)
        raise OSError(f"test: no network ({address})")

    monkeypatch.setattr(socket.socket, "connect", connect)
    return attempts
