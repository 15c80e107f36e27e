"""The cyclic garbage collector's thresholds in radrank's long-lived processes: Snakemake's own (the Snakefile
calls :func:`tune` as it is read) and the jobs' workers (:mod:`radrank.workers`).

CPython walks its youngest generation of container objects every 700 net allocations of them, the middle one every
10th of those walks and every object every 10th of those (when a quarter of them is new). Snakemake's process
builds a DAG of hundreds of jobs and keeps their objects; a worker runs job after job, each building rows, tuples
and dicts by the hundred thousand. Measured with ``perf`` on this host, a new submission to 101 models × 10,000
cases (19.9 CPU-s, ``--cores 1``): the collector took 0.53 CPU-s of Snakemake's process (14 % of it) and 0.48 of
the worker's (4 %), for next to no garbage.

:data:`THRESHOLDS` walks the youngest generation every 50,000 allocations and the others as often as before
relative to it: measured the same way, 0.30 and 0.15 CPU-s. A worker scoring the lexical panel over 500,000 pairs
spends 7-9 % less CPU (``benchmarks/collector.py``). A cycle is collected as before, only later: between two walks
at most 50,000 new containers wait. A worker also collects everything once after each job (:func:`after_job`), so
that what a job leaves in a cycle is not carried into the next: a walk of that job's survivors only (the preloaded
modules are frozen, never walked), 1-2 ms after a scoring or bootstrap job and 18 ms after the report's.
"""

from __future__ import annotations

import gc

THRESHOLDS = (50_000, 10, 10)


def tune() -> None:
    """Set this process's collector to :data:`THRESHOLDS`."""
    gc.set_threshold(*THRESHOLDS)


def after_job() -> None:
    """A worker's collection of everything its last job left (see the module docstring)."""
    gc.collect()
