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


def test_one_timer_waits_at_a_time_and_the_loop_is_still_woken_within_the_timespan(monkeypatch):
    """radrank.scheduler_timers.one_pending_reevaluation on Snakemake's own JobScheduler: of the passes that ask for a
    wake-up while one is waiting, none starts another timer (before, each did: a chain per finished job); the
    waiting one wakes the loop once, and then the next pass starts a timer again. The patched timers are the ones
    cancel_scheduler_timers ends."""
    monkeypatch.setattr(JobScheduler, "_schedule_reevalutation", JobScheduler._schedule_reevalutation)  # restored
    assert scheduler_timers.one_pending_reevaluation()
    assert scheduler_timers.one_pending_reevaluation()  # idempotent
    woken = threading.Semaphore(0)
    scheduler = SimpleNamespace(_open_jobs=woken)
    before = set(threading.enumerate())
    for _ in range(5):  # five passes of the loop while the first timer waits
        JobScheduler._schedule_reevalutation(scheduler, 0.2)
    started = [t for t in threading.enumerate() if t not in before]
    assert len(started) == 1 and isinstance(started[0], threading.Timer) and not started[0].daemon
    assert woken.acquire(timeout=10)  # the loop is woken within the timespan
    started[0].join(10)
    assert not woken.acquire(timeout=0.5)  # once
    JobScheduler._schedule_reevalutation(scheduler, 600)  # the pass it caused may start the next one
    [waiting] = [t for t in threading.enumerate() if t not in before and t.is_alive()]
    assert scheduler_timers.cancel_scheduler_timers() == 1
    waiting.join(10)
    assert not waiting.is_alive() and not woken.acquire(blocking=False)
