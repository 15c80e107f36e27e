"""Jobs that share a process (the core environment's run: rules, one thread each): each job's log file gets
that job's records only, and a failure is raised with its one line instead of exiting the process."""

import logging
import threading

import pytest

from radrank import jobs
from radrank.errors import InputError

log = logging.getLogger("radrank.test")


def _chatty(*, name, barrier, lines):
    for i in range(lines):
        if i == 1:
            barrier.wait()  # every job is logging at the same time
        log.info("%s line %d", name, i)


def test_concurrent_jobs_log_to_their_own_files(tmp_path):
    """Eight jobs of different lengths, five times over: jobs end (and drop their handlers) while the
    others are still logging, which is when a line used to be lost."""
    root_handlers = logging.getLogger().handlers[:]
    for rep in range(5):
        lines = {f"j{rep}{k}": 20 + 30 * k for k in range(8)}
        barrier = threading.Barrier(len(lines))
        errors = []

        def job(name):
            try:
                jobs.run_logged(lambda: _chatty(name=name, barrier=barrier, lines=lines[name]), rule=f"rule_{name}",
                                log_path=tmp_path / f"{name}.log")
            except BaseException as e:  # noqa: BLE001 (reported by the assertion below)
                errors.append(e)

        threads = [threading.Thread(target=job, args=(name,)) for name in lines]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        for name, n in lines.items():
            text = (tmp_path / f"{name}.log").read_text()
            assert text.count(f"INFO radrank.test: {name} line") == n
            assert text.count(" line ") == n  # no other job's line
        assert logging.getLogger().handlers == root_handlers  # nothing left behind in the shared process


def _bad_input():
    raise InputError("subs/m1.json", "row 3: field 'report' is empty")


def _bug():
    raise ValueError("unexpected")


def test_failure_is_raised_with_its_line_and_logged(tmp_path):
    with pytest.raises(jobs.JobFailed) as failed:
        jobs.run_logged(_bad_input, rule="ingest", log_path=tmp_path / "ingest.log")
    line = str(failed.value)
    assert "subs/m1.json" in line and "row 3" in line and "\n" not in line
    assert f"ERROR radrank: {line}" in (tmp_path / "ingest.log").read_text()

    with pytest.raises(jobs.JobFailed, match=r"rule bootstrap failed: ValueError: unexpected \(traceback in "):
        jobs.run_logged(_bug, rule="bootstrap", log_path=tmp_path / "bootstrap.log")
    text = (tmp_path / "bootstrap.log").read_text()
    assert "rule bootstrap failed" in text and "Traceback" in text and "ValueError: unexpected" in text


def _logged_cpu(tmp_path, name) -> float:
    """A job whose work runs on a thread of its own (as pyarrow decodes on its pool) while the job's thread
    waits; the CPU seconds its log line gives."""
    import re
    import time

    def burn():
        start = time.thread_time()
        while time.thread_time() - start < 0.3:
            pass

    def work():
        helper = threading.Thread(target=burn)
        helper.start()
        helper.join()

    jobs.run_logged(work, rule=name, log_path=tmp_path / f"{name}.log")
    line = (tmp_path / f"{name}.log").read_text()
    return float(re.search(r"done in [\d.]+ s, ([\d.]+) CPU-s", line).group(1))


def test_a_job_alone_in_its_process_counts_every_thread_of_it(tmp_path, monkeypatch):
    """In a pool worker (one job at a time) the job's CPU is its process's, its libraries' threads included; a
    job sharing its process with others counts its own thread's."""
    monkeypatch.setattr(jobs, "ALONE_IN_PROCESS", True)
    assert _logged_cpu(tmp_path, "alone") >= 0.29
    monkeypatch.setattr(jobs, "ALONE_IN_PROCESS", False)
    assert _logged_cpu(tmp_path, "shared") < 0.2


_POOL_PROBE = """
import json, sys
import pyarrow as pa
from radrank import jobs
before = pa.default_memory_pool().backend_name
seen = []
jobs.run_logged(lambda: seen.append(pa.array([1.0] * 10).to_pylist() and pa.default_memory_pool().backend_name),
                rule="probe")
print(json.dumps({"before": before, "in_job": seen[0]}))
"""


@pytest.mark.parametrize("setting, expected", [(None, "jemalloc"), ("system", "system"), ("mimalloc", "mimalloc")])
def test_a_job_allocates_arrow_memory_with_jemalloc_unless_told_otherwise(setting, expected):
    """pyarrow's mimalloc default costs a pack-reading job seconds of kernel time where transparent huge pages are
    granted on request (benchmarks/arrow_pool.py); a job switches to jemalloc, and ARROW_DEFAULT_MEMORY_POOL,
    where someone set it, wins. Each case in a fresh interpreter: the choice is once per process."""
    import json
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    if setting:
        env["ARROW_DEFAULT_MEMORY_POOL"] = setting
    out = subprocess.run([sys.executable, "-c", _POOL_PROBE], env=env, capture_output=True, text=True, check=True)
    got = json.loads(out.stdout)
    assert got["before"] == (setting or "mimalloc")  # the process started on pyarrow's own default
    assert got["in_job"] == expected
