"""The core environment's in-process jobs in worker processes (radrank.workers): each job's log gets its own
records, a failure is raised with the line it has in Snakemake's process, a worker that dies fails its job
and the pool goes on, no worker outlives its Snakemake, outputs are byte-identical to the in-process path,
and RADRANK_WORKERS=0 or a one-job-per-process Snakemake keeps the jobs in the process."""

from __future__ import annotations

import gc
import logging
import os
import re
import signal
import subprocess
import sys
import threading
import time
import weakref
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import pytest

from synthetic import stats_outputs, write_workflow_outputs

from radrank import garbage_collector, jobs, workers
from radrank.errors import ConfigError, InputError
from radrank.report.reuse import is_bookkeeping

log = logging.getLogger("radrank.test")

LIGHT = ("radrank.jobs",)  # a quick server for the tests of the pool's mechanics


@dataclass(frozen=True)
class Probe(jobs.Job):
    """A job doing what a test needs: ``action`` is log, input_error, bug, kill, segv, sleep, allocator, collector,
    cycle or part. Its output
    ``pid`` gets the worker's pid (first, so that a test can find a job that never ends)."""

    action: str
    name: str = ""
    lines: int = 0
    marker: str = ""  # cycle: the file written when its cycle is collected
    together: int = 1  # log: start logging once this many jobs have (their marker files in input.rendezvous)

    def run(self, input, output):
        Path(output.pid).write_text(str(os.getpid()))
        if self.action == "log" and self.together > 1:
            Path(input.rendezvous, self.name).touch()
            deadline = time.monotonic() + 60
            while len(os.listdir(input.rendezvous)) < self.together:
                if time.monotonic() > deadline:
                    raise RuntimeError("the other jobs never ran at the same time")
                time.sleep(0.01)
        if self.action == "log":
            for i in range(self.lines):
                log.info("%s line %d", self.name, i)
        elif self.action == "input_error":
            raise InputError("subs/m1.json", "row 3: field 'report' is empty")
        elif self.action == "bug":
            raise ValueError("unexpected")
        elif self.action in ("kill", "segv"):
            os.kill(os.getpid(), signal.SIGKILL if self.action == "kill" else signal.SIGSEGV)
        elif self.action == "sleep":
            time.sleep(600)
        elif self.action == "allocator":  # what the worker's process started with (a job's os.environ is Snakemake's)
            started = dict(v.split("=", 1) for v in Path("/proc/self/environ").read_bytes().decode().split("\0")
                           if "=" in v)
            for name in sorted(workers.ALLOCATOR_ENV):
                log.info("%s=%s", name, started.get(name))
            from numpy._core.multiarray import _get_madvise_hugepage

            log.info("numpy asks for huge pages: %s", _get_madvise_hugepage())
            log.info("100 MB from the heap: %s", _large_malloc_from_heap())
            log.info("BLAS threads: %s", _blas_threads())
        elif self.action == "collector":
            log.info("thresholds %s", gc.get_threshold())
        elif self.action == "cycle":  # left behind in a reference cycle, which only the collector frees
            left = {"rows": list(range(1000))}
            left["self"] = left
            holder = Cycle()
            holder.left = left
            left["holder"] = holder
            weakref.finalize(holder, Path(self.marker).touch).atexit = False
        elif self.action == "part":  # in the middle of an atomic write of its output (radrank.io's .part file)
            from radrank import io

            with io.atomic_path(Path(output.pid)) as part:
                part.write_text("half")
                Path(str(output.pid) + ".writing").touch()
                time.sleep(600)


class Cycle:
    """An object a job can leave in a reference cycle (a finalizer needs an object that takes weak references)."""


def _large_malloc_from_heap() -> bool:
    """Whether glibc serves a 100 MB malloc from its heap (its mmap threshold raised: ALLOCATOR_ENV) rather than
    from a fresh mmap (its default: above 32 MB at most): mallinfo2's bytes in mmapped blocks, before and after."""
    import ctypes

    class MallInfo2(ctypes.Structure):
        _fields_ = [(name, ctypes.c_size_t) for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                          "fsmblks", "uordblks", "fordblks", "keepcost")]

    libc = ctypes.CDLL(None)
    libc.mallinfo2.restype = MallInfo2
    libc.malloc.restype = ctypes.c_void_p
    libc.free.argtypes = [ctypes.c_void_p]
    before = libc.mallinfo2().hblkhd
    address = libc.malloc(100 << 20)
    try:
        return libc.mallinfo2().hblkhd - before < (100 << 20)
    finally:
        libc.free(address)


def _blas_threads() -> int | None:
    """The threads numpy's OpenBLAS would use in this process (None: no OpenBLAS found)."""
    import ctypes

    for path in sorted(set(re.findall(r"(/\S*openblas\S*\.so\S*)", Path("/proc/self/maps").read_text()))):
        library = ctypes.CDLL(path)
        for name in ("scipy_openblas_get_num_threads64_", "openblas_get_num_threads"):
            if hasattr(library, name):
                return getattr(library, name)()
    return None


def probe(pool, tmp_path, action, rule="probe", **fields):
    """Run a Probe job in ``pool`` (None: in this process); its log path and pid file."""
    name = fields.get("name") or action
    log_path, pid = tmp_path / f"{name}.log", tmp_path / f"{name}.pid"
    files = (jobs.Files(rendezvous=str(tmp_path / "rendezvous")), jobs.Files(pid=str(pid)))
    params = Probe(action=action, **fields).params()
    if pool is None:
        workers.run_job(Probe, rule, params, *files, str(log_path), {})
    else:
        pool.run(Probe, rule, params, *files, str(log_path), {})
    return log_path, pid


def failure(pool, tmp_path, action, **kwargs) -> str:
    with pytest.raises(jobs.JobFailed) as failed:
        probe(pool, tmp_path, action, **kwargs)
    return str(failed.value)


def gone(pid: int) -> bool:
    """The process has ended (a zombie has too)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def wait_for(condition, timeout=20.0):
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.fixture(scope="module")
def pool():
    with workers.Pool(preload=LIGHT) as p:
        yield p


def test_concurrent_jobs_log_to_their_own_files(tmp_path):
    """Eight jobs from eight threads on three workers: three run at once (they wait for each other), the
    others reuse the workers; each log file holds its job's records only, as in Snakemake's process."""
    (tmp_path / "rendezvous").mkdir()
    lines = {f"j{k}": 20 + 30 * k for k in range(8)}
    errors = []

    def job(pool, name):
        try:
            probe(pool, tmp_path, "log", name=name, lines=lines[name], together=3)
        except BaseException as e:  # noqa: BLE001 (reported by the assertion below)
            errors.append(e)

    with workers.Pool(max_workers=3, preload=LIGHT) as pool:
        threads = [threading.Thread(target=job, args=(pool, name)) for name in lines]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not errors
    pids = {name: int((tmp_path / f"{name}.pid").read_text()) for name in lines}
    assert len(set(pids.values())) == 3 and os.getpid() not in pids.values()
    for name, n in lines.items():
        text = (tmp_path / f"{name}.log").read_text()
        assert text.count(f"INFO radrank.test: {name} line") == n
        assert text.count(" line ") == n  # no other job's line
    in_process = tmp_path / "here"
    in_process.mkdir()
    probe(None, in_process, "log", name="j3", lines=lines["j3"])
    here, there = ((d / "j3.log").read_bytes() for d in (in_process, tmp_path))
    assert _without_timings(here) == _without_timings(there)


def test_failure_is_raised_with_the_line_it_has_in_process(pool, tmp_path):
    here, there = tmp_path / "here", tmp_path / "there"
    for d in (here, there):
        d.mkdir()
    for action, rule in (("input_error", "ingest"), ("bug", "bootstrap")):
        line = failure(pool, there, action, rule=rule)
        assert line == failure(None, here, action, rule=rule).replace(str(here), str(there))
        text = (there / f"{action}.log").read_text()
        if action == "input_error":
            assert "subs/m1.json" in line and "row 3" in line and "\n" not in line
            assert text == f"ERROR radrank: {line}\n"
        else:
            assert line == f"rule bootstrap failed: ValueError: unexpected (traceback in {there / 'bug.log'})"
            assert "rule bootstrap failed" in text and "Traceback" in text and "ValueError: unexpected" in text


def test_a_killed_or_crashed_worker_fails_its_job_and_the_pool_goes_on(tmp_path):
    with workers.Pool(max_workers=1, preload=LIGHT) as pool:
        _, pid = probe(pool, tmp_path, "log", name="before")
        seen = {int(pid.read_text())}
        for action, signame, cause in (("kill", "SIGKILL", "out of memory?"), ("segv", "SIGSEGV", "a crash")):
            line = failure(pool, tmp_path, action, rule="score")
            dead = int((tmp_path / f"{action}.pid").read_text())
            assert line == f"rule score failed: the worker process running it (pid {dead}) was killed by " \
                           f"{signame} ({cause})"
            assert (tmp_path / f"{action}.log").read_text().endswith(f"ERROR radrank: {line}\n")
            assert gone(dead)
            seen.add(dead)
            _, pid = probe(pool, tmp_path, "log", name=f"after_{action}")  # at most one worker: a new one
            seen.add(int(pid.read_text()))
        assert len(seen) == 3  # the first worker served the kill job; each death, one new worker


def test_workers_keep_freed_memory_for_reuse_unless_told_otherwise(tmp_path, monkeypatch):
    """The server starts with glibc's thresholds raised and numpy's huge pages off (workers.ALLOCATOR_ENV: each is
    read once, as a process starts or numpy is imported) and its workers have them; a value the environment sets
    already is kept."""
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "12345")
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    monkeypatch.delenv("NUMPY_MADVISE_HUGEPAGE", raising=False)
    with workers.Pool(max_workers=1, preload=LIGHT) as pool:
        log_path, _ = probe(pool, tmp_path, "allocator")
    text = log_path.read_text()
    assert f"MALLOC_MMAP_THRESHOLD_={256 << 20}" in text
    assert "MALLOC_TRIM_THRESHOLD_=12345" in text
    assert "NUMPY_MADVISE_HUGEPAGE=0" in text
    assert "numpy asks for huge pages: False" in text
    assert "100 MB from the heap: True" in text
    assert "BLAS threads: 1" in text


_PRESTART = """
import os, sys, threading
sys.path[:0] = {paths!r}
from pathlib import Path
from types import SimpleNamespace
import numpy  # as Snakemake's process has it (pandas imports it) before the Snakefile is read
from radrank import workers
import test_workers
if {second_thread}:
    threading.Thread(target=threading.Event().wait, daemon=True).start()
print("buffered before prestart")  # not flushed: standard output is a pipe
os.sched_getaffinity = lambda pid: {{0, 1}}
workers.prestart(SimpleNamespace(remote_exec=False, subprocess_exec=False))
pool = workers._POOL
print("prestart returned in", os.getpid(), type(pool._server).__name__, flush=True)
test_workers.probe(pool, Path({tmp!r}), "allocator")
same = Path(f"/proc/{{pool.server_pid}}/cmdline").read_bytes() == Path("/proc/self/cmdline").read_bytes()
print("ran in", Path({tmp!r}, "allocator.pid").read_text(), "server", pool.server_pid, same, flush=True)
"""


@pytest.mark.parametrize("second_thread", [False, True])
def test_prestart_forks_the_process_reading_the_snakefile_when_one_thread_runs_in_it(tmp_path, second_thread):
    """Snakemake's process, reading the Snakefile, runs one thread: prestart forks it into the server (what it has
    imported is not imported again), which never returns into the caller's frames, and its workers have what a
    fresh server gets from its environment (one BLAS thread, glibc's raised thresholds, numpy without huge pages).
    With a second thread running the process is not forked (a lock that thread held would stay held in the fork):
    the server is a fresh interpreter, with the same settings."""
    env = {k: v for k, v in os.environ.items()
           if k not in (*workers.ALLOCATOR_ENV, *workers.BLAS_ENV, workers.ENV, "PYTHONUNBUFFERED")}
    code = _PRESTART.format(paths=[str(Path(__file__).parent), str(Path(workers.__file__).parents[1])],
                            second_thread=second_thread, tmp=str(tmp_path))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines.count("buffered before prestart") == 1, lines  # written by this process, not again by the server
    lines.remove("buffered before prestart")
    assert len([line for line in lines if line.startswith("prestart returned")]) == 1, lines  # not in the server
    _, _, _, pid, server_type = lines[0].split()
    assert server_type == ("Popen" if second_thread else "_ForkedServer")
    _, _, worker, _, server, forked = lines[1].split()
    assert len({pid, server, worker}) == 3  # the job ran in a worker of the server, not in this process
    assert forked == str(not second_thread)  # a fork runs this process's command line; a fresh server its own
    text = (tmp_path / "allocator.log").read_text()
    assert "numpy asks for huge pages: False" in text
    assert "100 MB from the heap: True" in text
    assert "BLAS threads: 1" in text


def test_workers_walk_the_collectors_young_generation_less_often_and_collect_after_each_job(tmp_path):
    """The server sets radrank.garbage_collector's thresholds, and its workers have them; what a job leaves in a
    reference cycle is collected once it ends (before the worker's next job), not some 50,000 allocations later."""
    marker = tmp_path / "collected"
    with workers.Pool(max_workers=1, preload=LIGHT) as pool:
        log_path, first = probe(pool, tmp_path, "collector")
        _, second = probe(pool, tmp_path, "cycle", marker=str(marker))
        probe(pool, tmp_path, "collector", name="next")
        assert first.read_text() == second.read_text()  # the same worker ran both
        assert marker.exists()  # while the pool still runs: not at the worker's exit
    assert f"thresholds {garbage_collector.THRESHOLDS}" in log_path.read_text()


def test_a_server_started_ahead_and_never_used_is_killed_not_waited_for(tmp_path, monkeypatch):
    """prestart starts the server as the Snakefile is read; a run that then has no job for it (a dry run, nothing to
    do) does not wait at exit for its imports to finish: the server is killed."""
    (tmp_path / "slow_import_probe.py").write_text("import time\ntime.sleep(120)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    pool = workers.Pool(preload=("slow_import_probe",))
    pool.start()
    server = pool._server
    pool.close()
    assert server.returncode == -signal.SIGKILL


def test_a_clusters_main_process_ends_the_server_prestart_started():
    """The main process of a cluster run reads the Snakefile as a local run does, so prestart starts a server there
    too; once Snakemake knows the jobs go to the cluster (onstart: stop_on_signals), the server is ended."""
    code = ("import os, signal, sys; sys.path.insert(0, {src!r}); from types import SimpleNamespace\n"
            "from radrank import workers\n"
            "os.sched_getaffinity = lambda pid: {{0, 1}}  # prestart wants a second CPU\n"
            "workers.prestart(SimpleNamespace(remote_exec=False, subprocess_exec=False))\n"
            "server = workers._POOL._server\n"
            "assert server.poll() is None\n"
            "workers.stop_on_signals(SimpleNamespace(local_exec=False, remote_exec=False))\n"
            "assert workers._POOL is None\n"
            "print(server.wait(30))\n").format(src=str(Path(workers.__file__).parents[1]))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "RADRANK_WORKERS": ""})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() in (str(-signal.SIGKILL), "0")  # killed, or its imports were done and it ended


def test_ctrl_c_stops_a_busy_worker_and_spares_the_server(tmp_path):
    """Ctrl-C signals the whole process group: the workers stop at once (the job fails with the stop's line,
    as it does once Snakemake's own handler has started the stop); the server ignores it and forks the next
    job's worker."""
    with workers.Pool(preload=LIGHT) as pool:
        failed = []
        thread = threading.Thread(target=lambda: failed.append(failure(pool, tmp_path, "sleep")))
        thread.start()
        pid_file = tmp_path / "sleep.pid"
        assert wait_for(lambda: pid_file.exists() and pid_file.read_text())
        busy = int(pid_file.read_text())
        os.kill(pool.server_pid, signal.SIGINT)
        os.kill(busy, signal.SIGINT)
        thread.join(20)
        assert failed == ["rule probe stopped: the run was stopped by SIGINT"]
        _, pid = probe(pool, tmp_path, "log", name="next")
        assert int(pid.read_text()) not in (busy, os.getpid())


def test_a_stop_kills_the_busy_workers_removes_partial_files_and_refuses_jobs(tmp_path):
    """What a stop signal does to the pool (radrank.workers.stop_on_signals): a job half-way through writing its
    output fails at once with the stop's line (also in its log), its outputs and the hidden .part file it was
    writing are gone, and no job runs after it."""
    with workers.Pool(preload=LIGHT) as pool:
        failed = []
        thread = threading.Thread(target=lambda: failed.append(failure(pool, tmp_path, "part")))
        thread.start()
        assert wait_for(lambda: Path(f"{tmp_path / 'part.pid'}.writing").exists())
        busy = int((tmp_path / "part.pid").read_text())
        assert len(list(tmp_path.glob(".part.pid.*.part"))) == 1
        assert pool.stop(signal.SIGTERM) == [busy]
        thread.join(20)
        line = "rule probe stopped: the run was stopped by SIGTERM"
        assert failed == [line]
        assert not list(tmp_path.glob(".part.pid.*.part")) and not (tmp_path / "part.pid").exists()
        assert (tmp_path / "part.log").read_text().endswith(f"ERROR radrank: {line}\n")
        assert wait_for(lambda: gone(busy))
        assert failure(pool, tmp_path, "log", name="after") == line  # refused: it never ran
        assert not (tmp_path / "after.pid").exists()
        assert pool.server_pid in pool.spared()


PARENT = """
import sys, threading
sys.path[:0] = {paths!r}
from radrank import jobs, workers
from test_workers import Probe

pool = workers.pool_for(None)  # this process's pool, as Snakemake's jobs get it
pool.run(Probe, "probe", Probe(action="log").params(), jobs.Files(), jobs.Files(pid={idle_pid!r}), None, {{}})
if {busy}:
    threading.Thread(target=pool.run, args=(Probe, "probe", Probe(action="sleep").params(), jobs.Files(),
                     jobs.Files(pid={busy_pid!r}), None, {{}}), daemon=True).start()
print(pool.server_pid, flush=True)
sys.stdin.readline()
"""


@pytest.mark.parametrize("how", ["killed", "exits"])
def test_no_worker_outlives_its_parent(tmp_path, how):
    """A parent standing in for Snakemake: killed with SIGKILL while one worker is idle and one busy, or exiting
    normally (after its job threads, so with idle workers: the pool's shutdown), its server and workers end
    within seconds."""
    idle_pid, busy_pid = tmp_path / "idle.pid", tmp_path / "busy.pid"
    code = PARENT.format(paths=[str(Path(__file__).parent), *sys.path], idle_pid=str(idle_pid), busy=how == "killed",
                         busy_pid=str(busy_pid))
    parent = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        pids = [int(parent.stdout.readline()), int(idle_pid.read_text())]
        if how == "killed":
            assert wait_for(lambda: busy_pid.exists() and busy_pid.read_text())
            pids.append(int(busy_pid.read_text()))
        assert not any(gone(pid) for pid in pids)
        if how == "killed":
            parent.kill()
        else:
            parent.stdin.write("\n")
            parent.stdin.flush()
        assert parent.wait(30) == (-signal.SIGKILL if how == "killed" else 0)
        assert wait_for(lambda: all(gone(pid) for pid in pids), timeout=10), [p for p in pids if not gone(p)]
    finally:
        parent.kill()
        parent.wait()


def _without_timings(data: bytes) -> bytes:
    """A log without its jobs' closing wall and CPU seconds (never the same twice); any other file as it is."""
    return re.sub(rb"(rule \w+ done in )[\d.]+ s, [\d.]+ CPU-s \([\d.]+", rb"\1", data)


def test_outputs_are_byte_identical_to_the_in_process_path(tmp_path):
    """The statistics and the report of a synthetic leaderboard, both ways, in a pool that preloads what
    Snakemake's pool does."""
    layout = write_workflow_outputs(tmp_path / "inputs", n_models=4, n_cases=40, splits=("findings",),
                                    metric_names=("bleu2", "bleu4", "rouge"), n_boot=100)
    group = layout[0]
    models = list(group["models"])
    metric_names = list(next(iter(group["models"].values()))["scores"])
    bootstrap = jobs.Bootstrap(dataset=group["dataset"], split=group["split"], models=tuple(models),
                               metrics=tuple(metric_names), n=100, seed=3, level=0.95)
    bootstrap_input = jobs.Files(scores=[group["models"][m]["scores"][n] for m in models for n in metric_names],
                                 pairs=[group["models"][m]["pairs"] for m in models],
                                 drops=[group["models"][m]["drops"] for m in models], cases=group["cases"],
                                 accounting=group["accounting"])
    report = jobs.Report.of_layout(layout, bootstrap={"n": 100, "seed": 3, "level": 0.95}, empty_hypothesis="score",
                                   cases=3)
    report_input = jobs.Files(**jobs.Report.inputs(layout))

    def outputs(root):
        stats = root / "stats"
        return (jobs.Files(**{k: str(v) for k, v in stats_outputs(stats).items()},
                           model_files=str(root / "summary")),
                jobs.Files(html=str(root / "report.html"), markdown=str(root / "report.md"),
                           figures=str(root / "figures")))

    results = {}
    with workers.Pool() as pool:
        for way, run in (("here", workers.run_job), ("worker", pool.run)):
            root = tmp_path / way
            (root / "stats").mkdir(parents=True)  # as Snakemake makes its outputs' folders
            bootstrap_output, report_output = outputs(root)
            run(jobs.Bootstrap, "bootstrap", bootstrap.params(), bootstrap_input, bootstrap_output,
                str(root / "bootstrap.log"), {})
            run(jobs.Report, "report", report.params(), report_input, report_output, str(root / "report.log"), {})
            # the report's reuse keys name its output folder, which differs here
            results[way] = {str(p.relative_to(root)): _without_timings(p.read_bytes())
                            for p in sorted(root.rglob("*")) if p.is_file() and not is_bookkeeping(p.relative_to(root))}
    assert len(results["here"]) > 10 and any(name.startswith("figures/") for name in results["here"])
    assert results["worker"] == results["here"]


def test_the_switch_and_one_job_per_process_keep_jobs_in_this_process(tmp_path, monkeypatch):
    monkeypatch.setenv(workers.ENV, "0")
    assert workers.pool_for(None) is None
    workers.run(Probe, "probe", Probe(action="log").params(), jobs.Files(), jobs.Files(pid=str(tmp_path / "pid")),
                None, {})
    assert int((tmp_path / "pid").read_text()) == os.getpid()
    monkeypatch.setenv(workers.ENV, "2")
    for mode in ("remote_exec", "subprocess_exec"):  # a cluster's job step; Snakemake's subprocess mode
        assert workers.pool_for(SimpleNamespace(**{mode: True})) is None
    local = SimpleNamespace(remote_exec=False, subprocess_exec=False)
    pool = workers.pool_for(local)
    assert isinstance(pool, workers.Pool) and pool.max_workers == 2 and workers.pool_for(None) is pool
    monkeypatch.setenv(workers.ENV, "many")
    with pytest.raises(ConfigError, match="RADRANK_WORKERS='many'"):
        workers.pool_for(local)


def _numbers_masked(text: str) -> str:
    return re.sub(r"\d+(\.\d+)?", "N", text)  # CPU times differ from run to run


@pytest.mark.workflow
def test_the_example_run_in_workers_equals_the_run_in_process(tmp_path, monkeypatch):
    """The example workflow, end to end, with the pool and with RADRANK_WORKERS=0: the same result files, byte
    for byte, and the same records in every job's log; no worker is left once Snakemake has exited."""
    from _workflow import make_workdir, result_files, snakemake

    runs = {}
    for way, setting in (("workers", None), ("in_process", "0")):
        if setting is None:
            monkeypatch.delenv(workers.ENV, raising=False)
        else:
            monkeypatch.setenv(workers.ENV, setting)
        runs[way] = make_workdir(tmp_path / way)
        snakemake(runs[way])
    assert result_files(runs["workers"]) == result_files(runs["in_process"])
    logs = {way: {str(p.relative_to(work)): _numbers_masked(p.read_text()) for p in (work / "logs").rglob("*.log")}
            for way, work in runs.items()}
    assert len(logs["workers"]) > 10 and logs["workers"] == logs["in_process"]
    left = [pid for pid in os.listdir("/proc") if pid.isdigit() and _cwd(pid) == str(runs["workers"])]
    assert not left


def _cwd(pid: str) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return None
