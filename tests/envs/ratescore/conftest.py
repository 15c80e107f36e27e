"""Tests of the ratescore environment (ratescore 0.6.0, medspacy, transformers 5, numpy < 2).

Run from the repository root with that environment's python:
``python -m pytest tests/envs/ratescore``. Nothing is downloaded: the hub is off and the
models are tiny random ones built here (tiny_ratescore.py).
Shared setup (hub off, one torch thread): ../conftest.py.
"""
