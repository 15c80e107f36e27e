"""The scheduler's wake-up timers: one waiting at a time, and none left when the run ends.

Snakemake's scheduler is rate-limited by default (``--max-jobs-per-timespan 100/1s``), and at every pass of its loop
it starts a ``threading.Timer`` that wakes it one timespan later (``JobScheduler._schedule_reevalutation`` in
snakemake/scheduling/job_scheduler.py). The timers are not daemon threads, so the interpreter's exit joins the last
one still waiting: every run with jobs ended up to a second after its work (a 50-model run spent 1.2 s of its 16.6 s
wall in ``threading._shutdown``, on either number of cores). The workflow's ``onsuccess`` and ``onerror``, which
Snakemake calls after the scheduler's last pass, cancel those timers: a cancelled timer's thread ends at once, and
its action — waking a scheduler that has finished — is not needed. Only the scheduler's own timers are cancelled.

The timers also pile up while the run goes on: each pass of the loop starts one, the passes the timers cause
included, so every job that finishes adds a chain of wake-ups that lasts until the run ends. After the 200 ingest
jobs of a 100-model leaderboard some 200 chains wake the loop every second, and each wake-up with jobs waiting for
a core selects among them again (a stat of every input of every ready job): Snakemake's process spent CPU in
proportion to the run's wall time (at 101 models × 2,000 cases 1.1-1.3 M stat calls, 9-15 of its CPU-s).
:func:`one_pending_reevaluation` keeps one timer waiting at a time: a pass that finds one waiting starts none. The
rate limit holds: the waiting timer wakes the loop within the timespan, as before, and every other wake-up (a job
finishing) makes its pass anyway.
"""

from __future__ import annotations

import threading

SCHEDULER_TIMER = "JobScheduler._schedule_reevalutation."  # the qualified name of the timers' action starts so
_MARK = "_radrank_scheduler_timer"  # on a timer started by one_pending_reevaluation's version
_PENDING = "_radrank_reevaluation_pending"  # on a scheduler whose timer is waiting
_LOCK = threading.Lock()


def _is_scheduler_timer(thread) -> bool:
    action = getattr(thread, "function", None)
    return isinstance(thread, threading.Timer) and (
        getattr(thread, _MARK, False) or getattr(action, "__qualname__", "").startswith(SCHEDULER_TIMER))


def cancel_scheduler_timers() -> int:
    """Cancel the scheduler's timers still waiting; how many there were."""
    cancelled = 0
    for thread in threading.enumerate():
        if _is_scheduler_timer(thread):
            thread.cancel()
            cancelled += 1
    return cancelled


def one_pending_reevaluation() -> bool:
    """Make ``JobScheduler._schedule_reevalutation`` start a timer only when none of the scheduler's is waiting
    (idempotent). False where this Snakemake has no such method: then nothing is changed."""
    from radrank.snakemake_checksums import patch

    def make(original):
        return _schedule_reevalutation  # in its place: Snakemake's is never called

    def _schedule_reevalutation(self, delay) -> None:
        with _LOCK:
            if getattr(self, _PENDING, False):
                return  # the waiting timer wakes the loop within the timespan
            setattr(self, _PENDING, True)

        def wake():
            with _LOCK:
                setattr(self, _PENDING, False)  # before the pass it causes, which may start the next one
            self._open_jobs.release()

        timer = threading.Timer(delay, wake)  # not a daemon thread, as Snakemake's own
        setattr(timer, _MARK, True)
        timer.start()

    return patch("snakemake.scheduling.job_scheduler", "JobScheduler", "_schedule_reevalutation", _MARK, make)
