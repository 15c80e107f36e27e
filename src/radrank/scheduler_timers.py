"""A local run ends when its last job does, not up to a second later.

Snakemake's scheduler is rate-limited by default (``--max-jobs-per-timespan 100/1s``), and at every pass of its loop
it starts a ``threading.Timer`` that wakes it one timespan later (``JobScheduler._schedule_reevalutation`` in
snakemake/scheduling/job_scheduler.py). The timers are not daemon threads, so the interpreter's exit joins the last
one still waiting: every run with jobs ended up to a second after its work (a 50-model run spent 1.2 s of its 16.6 s
wall in ``threading._shutdown``, on either number of cores). The workflow's ``onsuccess`` and ``onerror``, which
Snakemake calls after the scheduler's last pass, cancel those timers: a cancelled timer's thread ends at once, and
its action — waking a scheduler that has finished — is not needed. Only the scheduler's own timers are cancelled.
"""

from __future__ import annotations

import threading

SCHEDULER_TIMER = "JobScheduler._schedule_reevalutation."  # the qualified name of the timers' action starts so


def cancel_scheduler_timers() -> int:
    """Cancel the scheduler's timers still waiting; how many there were."""
    cancelled = 0
    for thread in threading.enumerate():
        action = getattr(thread, "function", None)
        if isinstance(thread, threading.Timer) and getattr(action, "__qualname__", "").startswith(SCHEDULER_TIMER):
            thread.cancel()
            cancelled += 1
    return cancelled
