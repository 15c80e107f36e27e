"""The scheduler's wake-up timers are cancelled when the run ends (radrank.scheduler_timers), with Snakemake's own
scheduler code: a timer it starts is cancelled (its thread ends, its action never runs), any other timer is not."""

from __future__ import annotations

import threading
from types import SimpleNamespace

from snakemake.scheduling.job_scheduler import JobScheduler

from radrank import scheduler_timers


def test_the_schedulers_waiting_timer_is_cancelled_and_no_other():
    woken = threading.Semaphore(0)
    scheduler = SimpleNamespace(_open_jobs=woken)
    before = set(threading.enumerate())
    JobScheduler._schedule_reevalutation(scheduler, 600)  # as its loop does, with a timespan no test waits for
    [timer] = [t for t in threading.enumerate() if t not in before]
    assert isinstance(timer, threading.Timer) and not timer.daemon  # what the interpreter's exit would join
    fired = threading.Event()
    other = threading.Timer(600, fired.set)
    other.start()
    try:
        assert scheduler_timers.cancel_scheduler_timers() == 1
        timer.join(10)
        assert not timer.is_alive()
        assert not woken.acquire(blocking=False)  # cancelled: its action never ran
        assert other.is_alive() and not other.finished.is_set()
    finally:
        other.cancel()
        other.join(10)
    assert not fired.is_set()
    assert scheduler_timers.cancel_scheduler_timers() == 0
