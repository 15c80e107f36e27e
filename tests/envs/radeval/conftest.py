"""Tests of the radeval environment (radeval 2.2.1 on transformers 5, numpy < 2; openai for the API metrics).

Run from the repository root with that environment's python:
``python -m pytest tests/envs/radeval``. Nothing is downloaded: the hub is off, the models are
tiny random ones built here (tiny_radeval.py), and the API metrics talk to a fake
OpenAI-compatible server on 127.0.0.1 (../fake_openai.py).
Shared setup (hub off, one torch thread): ../conftest.py.
"""
