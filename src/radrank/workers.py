"""Worker processes for the core environment's in-process jobs, so that a local run uses every core.

Snakemake runs a ``run:`` job (:func:`radrank.jobs.run_in_process`) in a thread of its own process
(force-use-threads in the local profiles): no interpreter start-up and no import per job, but every job
shares one GIL, and ``--cores 2`` gave at most 0.6 CPU-s of work per wall-second. Here the thread hands
its job to a worker process and waits for it:

* One *fork server* per Snakemake run, started as the Snakefile is read (:func:`prestart`; else at the first
  job). It imports :data:`PRELOAD` (numpy, pandas, pyarrow and radrank's job modules) once. As the Snakefile is
  read, Snakemake's process runs one thread, and has imported most of them (Snakemake's executor plugins import
  pandas; the Plan, radrank's job modules): there the server is a fork of it (:func:`_fork_server`), which
  imports only the rest, and never returns into Snakemake's frames; a fresh interpreter imported everything
  again, half a CPU-second in every run. It gets what a fresh server gets from its environment: one BLAS thread
  (set through OpenBLAS's ``set_num_threads``), glibc's thresholds (``mallopt``) and numpy without huge pages
  (:data:`ALLOCATOR_ENV`), each unless the environment sets it. Elsewhere — a second thread running (a fork
  keeps only the forking thread, and a lock another thread held stays held), a BLAS other than OpenBLAS, or a
  server started again later, from a job's thread — it is a fresh interpreter (not a re-run of Snakemake's
  ``__main__`` as multiprocessing's forkserver would do in each worker), its imports overlapping Snakemake's
  start and DAG. Either way its only other threads are numpy's BLAS pool and pyarrow's allocator, which are
  fork-aware (pthread_atfork).
* A worker is forked from it, in milliseconds, when a job finds no worker idle, and then serves job after
  job; so there are as many workers as jobs Snakemake runs at once, at most its ``--cores``.
* A job travels as plain data (:class:`_Task`): its job class (by name), its params dict, the rule's input
  and output as :class:`radrank.jobs.Files` (:func:`files`), its log path, the config, and the Snakemake
  process's module path, working directory, environment and root log level, so that it sees what a thread
  would. It runs under :func:`radrank.jobs.run_logged` as in Snakemake's process (:func:`run_job`): its log
  file gets its own records, and a failure is raised in the Snakemake thread as
  :class:`radrank.jobs.JobFailed` with the same line.
* The server starts with glibc's allocator told to keep freed memory for reuse (:data:`ALLOCATOR_ENV`:
  blocks up to 256 MB come from the heap, not from a fresh ``mmap`` each, and up to 256 MB of free heap is
  kept), and its workers inherit that: a job that allocates, frees and allocates again its arrays (a lexical
  metric's chunks, the report's tables), and the next job in the same worker, no longer pay a page fault per
  4 KB page each time. On this host those faults were a quarter of the CPU of a new submission to 100 models
  × 10,000 cases (4-5 s of system time); with these settings it cost 1.6 s less (of 19.5), and
  the full run 6 % less. The price: an idle worker may hold up to 256 MB freed by its last job. NumPy is told
  not to ask for transparent huge pages for its large arrays (``NUMPY_MADVISE_HUGEPAGE=0``; read once, as numpy
  is imported): each first touch of a 2 MB page was cleared by the kernel whole, and on this host a new
  submission to 101 models × 10,000 cases spent 8 % less CPU without them (18.3 → 16.8 CPU-s, three runs each,
  its system time 4.0 → 2.7 s), and the lexical panel over 500,000 pairs the same user time with 1.9 s less
  system time. A variable already set in the environment is left as it is.
* The server and its workers walk their garbage collector's youngest generation every 50,000 allocations of
  container objects, not every 700, and a worker collects once after each job (:mod:`radrank.garbage_collector`).
* A worker that dies during a job (killed: out of memory; crashed) fails that job with a line naming the
  signal, also written to the job's log; the next job gets a new worker.
* No worker outlives Snakemake: an idle one sees its connection close, a busy one sees a pipe that only
  Snakemake holds close (a watchdog thread), and when Snakemake exits the pool is shut down (the server
  waits for its workers, Snakemake for the server). A worker killed mid-job leaves no partial file: its
  outputs are written to hidden ``.part`` files renamed into place at the end (:func:`radrank.io.atomic_path`),
  and those it leaves are removed.
* A run stops on SIGTERM, SIGINT (Ctrl-C) or SIGHUP within seconds, whatever a job is doing
  (:func:`stop_on_signals`, the workflow's ``onstart``; Snakemake's own SIGTERM waits for the running jobs,
  and a job stuck in a read never ends): no new job starts, the busy workers are killed and every process
  a job started is sent SIGTERM, so that their jobs fail, their outputs are removed (by the pool too, should
  Snakemake not get to it) and Snakemake exits non-zero; a job in one of Snakemake's own threads
  (``RADRANK_WORKERS=0``) cannot be killed, so after :data:`STOP_GRACE_S` seconds its outputs are removed and
  the process exits (status 128 + the signal) with Snakemake's lock released. Each stop says so in one line,
  the run's last. The main process of a cluster run has no job of its own: there a stop signal is Ctrl-C, on
  which Snakemake cancels the cluster's jobs. (A cluster's job step runs without hooks, so without this: the
  cluster kills it, and its outputs, written to ``.part`` files first, never look complete.)

Switch: ``RADRANK_WORKERS=0`` runs every job in Snakemake's process, as before; ``RADRANK_WORKERS=N`` caps
the pool at N workers (unset: one per job running at once). A Snakemake that runs one job per process
needs no pool and runs it there: a cluster's job step (``--mode remote``: the SLURM executor's) and
Snakemake's subprocess mode.
"""

from __future__ import annotations

import json
import logging
import os
import pickle
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import NamedTuple

from radrank import garbage_collector, jobs
from radrank.errors import ConfigError

ENV = "RADRANK_WORKERS"

# Imported once by the fork server, so that no worker imports them again: the libraries and the modules the
# in-process jobs import when they run (radrank.jobs imports them lazily, to keep Snakemake's start fast), and
# every metric's module (:func:`_serve`). Not matplotlib: only the report job draws.
PRELOAD = ("numpy", "pandas", "pyarrow.parquet", "radrank.jobs", "radrank.io", "radrank.provenance",
           "radrank.ingest", "radrank.runtime", "radrank.shards", "radrank.metrics.base", "rouge_score.tokenize",
           "radrank.stats", "radrank.summaries", "radrank.leaderboard", "radrank.sheets", "radrank.report",
           "radrank.metaeval.agreement", "radrank.metaeval.items")
# Memory settings for the server and its workers (see the module docstring): glibc's heap kept for reuse, no
# transparent huge pages for numpy's arrays. A variable already set in the environment wins.
ALLOCATOR_ENV = {"MALLOC_MMAP_THRESHOLD_": str(256 << 20), "MALLOC_TRIM_THRESHOLD_": str(256 << 20),
                 "NUMPY_MADVISE_HUGEPAGE": "0"}

# The BLAS libraries' thread counts, 1 in the server unless set: one BLAS thread per worker
BLAS_ENV = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")

_SHUTDOWN_WAIT_S = 30  # how long Snakemake's exit waits for the server and its workers to end

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
STOP_GRACE_ENV = "RADRANK_STOP_GRACE_S"
# After a stop signal: how long the jobs that cannot be killed (in Snakemake's threads) get before the process
# exits without them; Snakemake's own shutdown, once every job has ended, gets _STOP_LIMIT_S in all.
STOP_GRACE_S = 5.0
_STOP_LIMIT_S = 30.0


# --- the job, as plain data -------------------------------------------------------------------------


def files(named) -> jobs.Files:
    """A rule's ``input`` or ``output`` (Snakemake's named lists of paths, or a dict) as plain data: each name's
    path, or its list of paths."""
    out = jobs.Files((name, [str(p) for p in value] if isinstance(value, (list, tuple)) else str(value))
                     for name, value in named.items())
    if not isinstance(named, dict):
        covered = sum(len(v) if isinstance(v, list) else 1 for v in out.values())
        if covered != len(named):
            raise RuntimeError(f"{len(named) - covered} of the files {list(map(str, named))} have no name: "
                               "a job's input and output files are named")
    return out


def run_job(job_type, rule, params, input, output, log_path, config) -> None:
    """One job, in this process: built from its params and run under :func:`radrank.jobs.run_logged`."""
    jobs.run_logged(lambda: job_type.from_params(params, config).run(input, output), rule=rule, log_path=log_path)


@dataclass(frozen=True)
class _Task:
    job_type: type
    rule: str
    params: dict
    input: jobs.Files
    output: jobs.Files
    log_path: str | None
    config: dict
    cwd: str
    environ: dict
    root_level: int

    def run(self) -> None:
        """In a worker: in the Snakemake process's state, as a thread of it would run it."""
        if os.getcwd() != self.cwd:
            os.chdir(self.cwd)
        if os.environ != self.environ:
            os.environ.clear()
            os.environ.update(self.environ)
        logging.getLogger().setLevel(self.root_level)
        run_job(self.job_type, self.rule, self.params, self.input, self.output, self.log_path, self.config)


# --- the Snakemake side -------------------------------------------------------------------------------


class _WorkerDied(Exception):
    """The worker running a job ended before replying."""


class _Stopped(Exception):
    """The run was stopped by a signal (:meth:`Pool.stop`): no job starts."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


@dataclass
class _Worker:
    pid: int
    conn: Connection

    def run(self, task: bytes) -> str | None:
        """The job's failure line, or None when it succeeded."""
        try:
            self.conn.send_bytes(task)
            return self.conn.recv()
        except (EOFError, OSError) as e:
            raise _WorkerDied(self.pid) from e


class Pool:
    """Long-lived worker processes for this process's jobs (see the module docstring).

    ``max_workers``: at most this many (None: one per job running at once); ``preload``: the modules the
    fork server imports before its first worker.
    """

    def __init__(self, max_workers: int | None = None, preload=PRELOAD):
        self.max_workers = max_workers
        self.preload = tuple(preload)
        self._free = threading.Condition()  # guards _idle, _busy, _started, _closed and _stopped; notified when
        self._idle: list[_Worker] = []      # a worker frees
        self._busy: dict[int, _Worker] = {}  # by pid: the workers running a job
        self._started = 0  # workers alive or being started
        self._closed = False
        self._stopped: int | None = None  # the signal that stopped the run (:meth:`stop`): no job runs any more
        self._server_lock = threading.Lock()  # one request to the server at a time
        self._server = None
        self._control = None
        self._alive = None  # (read, write): the write end is this process's alone (see _exit_with_snakemake)
        self._forked = 0  # workers forked so far

    def run(self, job_type, rule, params, input, output, log_path, config) -> None:
        """Run the job in a worker and wait for it; a failure is raised as :class:`radrank.jobs.JobFailed`."""
        task = pickle.dumps(_Task(job_type, rule, dict(params), files(input), files(output),
                                  None if log_path is None else str(log_path), config, os.getcwd(),
                                  dict(os.environ), logging.getLogger().level), protocol=pickle.HIGHEST_PROTOCOL)
        # this process's module path travels first: the server may have started before the Snakefile put the job's
        # module on it, and the task is unpickled (its job type imported) with it
        task = pickle.dumps((list(sys.path), task), protocol=pickle.HIGHEST_PROTOCOL)
        try:
            worker = self._checkout()
        except _Stopped as e:
            line = _stopped_line(rule, e.signum)
            _log_failure(line, log_path)
            raise jobs.JobFailed(line) from None
        try:
            failure = worker.run(task)
        except _WorkerDied:
            self._discard(worker)
            paths = _paths(output)
            _remove_partials(paths)  # what the job was writing when it died (never renamed into place)
            stopped = self._stopped if self._stopped is not None else _STOPPED
            code = self._exit_code(worker.pid) if stopped is None else None
            if code == -signal.SIGINT:  # Ctrl-C reached the process group: the workers end before the stop starts
                stopped = signal.SIGINT
            if stopped is not None:
                _remove_outputs(paths)  # as Snakemake does for a failed job, even if it cannot any more
                line = _stopped_line(rule, stopped)
            else:
                line = f"rule {rule} failed: the worker process running it (pid {worker.pid}) {_how_it_ended(code)}"
            _log_failure(line, log_path)
            raise jobs.JobFailed(line) from None
        self._checkin(worker)
        if failure is not None:
            raise jobs.JobFailed(failure)

    @property
    def server_pid(self) -> int | None:
        """The fork server's pid (None before the first job): the workers are its children."""
        return None if self._server is None else self._server.pid

    def stop(self, signum: int) -> list[int]:
        """The run was stopped by signal ``signum``: kill the busy workers (SIGKILL; their jobs fail with the
        line :func:`_stopped_line`), and refuse every job from now on. The pids of the workers killed."""
        with self._free:
            self._stopped = signum
            busy = list(self._busy)
            self._free.notify_all()  # jobs waiting for a worker: refused
        for pid in busy:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return busy

    def spared(self) -> set[int]:
        """The processes that end with Snakemake by themselves: the server and the idle workers."""
        with self._free:
            pids = {w.pid for w in self._idle}
        server = self._server
        return pids | ({server.pid} if server is not None else set())

    def close(self) -> None:
        """End the workers and the server (idle workers at once, busy ones when this process's pipe closes)."""
        with self._free:
            self._closed = True
            idle, self._idle = self._idle, []
            self._free.notify_all()
        for worker in idle:
            worker.conn.close()
        with self._server_lock:
            if self._server is not None:
                self._control.close()
                if not self._forked:  # started ahead (prestart) and never used: its imports are not waited for
                    self._server.kill()
                try:
                    self._server.wait(_SHUTDOWN_WAIT_S)
                except subprocess.TimeoutExpired:
                    pass  # a worker still busy: it ends when the pipe below closes
                for fd in self._alive:
                    os.close(fd)
                self._server = self._control = self._alive = None

    def start(self, fork: "_ForkPlan | None" = None) -> None:
        """Start the fork server now (not at the first job), so that it imports while this process goes on.
        ``fork``: as a fork of this process, with what :func:`_fork_ready` found it may be (:func:`prestart`)."""
        with self._server_lock:
            if self._server is None and not self._closed:
                self._start_server(fork)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _checkout(self) -> _Worker:
        """An idle worker or a new one, marked busy; :class:`_Stopped` once the run is stopped."""
        with self._free:
            while True:
                if self._stopped is not None:
                    raise _Stopped(self._stopped)
                if self._closed:
                    raise RuntimeError("the worker pool is closed")
                if self._idle:
                    worker = self._idle.pop()
                    self._busy[worker.pid] = worker
                    return worker
                if self.max_workers is None or self._started < self.max_workers:
                    self._started += 1
                    break
                self._free.wait()
        try:
            worker = self._fork_worker()
        except BaseException:
            with self._free:
                self._started -= 1
                self._free.notify()
            raise
        with self._free:
            if self._stopped is None:
                self._busy[worker.pid] = worker
                return worker
        self._discard(worker)  # stopped while it was forked: it sees its connection close and ends
        raise _Stopped(self._stopped)

    def _checkin(self, worker: _Worker) -> None:
        with self._free:
            self._busy.pop(worker.pid, None)
            if self._closed or self._stopped is not None:
                worker.conn.close()  # it ends (the server reaps it when it ends itself)
            else:
                self._idle.append(worker)
            self._free.notify()

    def _discard(self, worker: _Worker) -> None:
        worker.conn.close()
        with self._free:
            self._busy.pop(worker.pid, None)
            self._started -= 1
            self._free.notify()

    def _fork_worker(self) -> _Worker:
        ours, theirs = socket.socketpair()
        try:
            with self._server_lock:
                for _ in range(2):  # a server that has died is started again, once
                    if self._server is None or self._server.poll() is not None:
                        self._start_server()
                    try:
                        socket.send_fds(self._control, [b"fork"], [theirs.fileno()])
                        reply = self._control.recv(64)
                    except OSError:
                        reply = b""
                    if reply:
                        self._forked += 1
                        break
                    self._server.kill()
                    self._server.wait()
                else:
                    raise RuntimeError("the worker server could not start a worker (its error, if any, is on "
                                       "stderr)")
        finally:
            theirs.close()
        return _Worker(int(reply), Connection(ours.detach()))

    def _start_server(self, fork: "_ForkPlan | None" = None) -> None:
        """(With the server lock.) The pipe outlives a server that died: its busy workers carry on. ``fork``: a
        fork of this process (what it imported is not imported again; :func:`_fork_ready`), else a fresh
        interpreter."""
        if self._control is not None:
            self._control.close()
        if self._alive is None:
            self._alive = os.pipe()
        control, server_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        code = ("import json, sys; sys.path[:] = json.loads(sys.argv[1]); from radrank import workers; "
                "workers._serve(*map(int, sys.argv[2:4]), json.loads(sys.argv[4]))")
        alive_r = self._alive[0]
        if fork is not None:
            try:
                self._server = _ForkedServer(_fork_server(server_end, alive_r, (control, self._alive[1]),
                                                          self.preload, fork))
            finally:
                server_end.close()
            self._control = control
            return
        try:
            # numpy's BLAS starts its threads when imported (in the server): one per worker, as a job has one
            # core, not one per core in every worker spinning beside the others
            blas = {v: os.environ.get(v, "1") for v in BLAS_ENV}
            self._server = subprocess.Popen(
                [sys.executable, "-c", code, json.dumps(sys.path), str(server_end.fileno()), str(alive_r),
                 json.dumps(self.preload)],
                pass_fds=(server_end.fileno(), alive_r), stdin=subprocess.DEVNULL,
                env={**ALLOCATOR_ENV, **os.environ, **blas})
        finally:
            server_end.close()
        self._control = control

    def _exit_code(self, pid: int) -> int | None:
        """A dead worker's exit code (negative: the signal), as its parent (the server) saw it; None if unknown."""
        with self._server_lock:
            if self._server is None:
                return None
            try:
                self._control.send(f"status {pid}".encode())
                reply = self._control.recv(64)
            except OSError:
                return None
        return int(reply) if reply and reply != b"?" else None


def _how_it_ended(code: int | None) -> str:
    if code is None:
        return "ended before finishing it"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        cause = {signal.SIGKILL: " (out of memory?)", signal.SIGSEGV: " (a crash)", signal.SIGINT: " (Ctrl-C)"}
        return f"was killed by {name}{cause.get(-code, '')}"
    return f"exited with status {code} before finishing it"


def _log_failure(line: str, log_path, stderr: bool = True) -> None:
    """The job's log ends with its failure line, as :func:`radrank.jobs.run_logged` ends it."""
    record = logging.LogRecord(jobs.log.name, logging.ERROR, __file__, 0, line, None, None)
    handlers = [logging.StreamHandler(sys.stderr)] if stderr else []
    if log_path:
        handlers.append(logging.FileHandler(log_path, mode="a"))
    for handler in handlers:
        handler.setFormatter(logging.Formatter(jobs.FORMAT))
        handler.handle(record)
        handler.close()


_POOL: Pool | None = None
_POOL_LOCK = threading.Lock()


def _max_workers() -> int | None:
    value = os.environ.get(ENV, "").strip()
    if value in ("", "auto"):
        return None
    if not value.isdigit():
        raise ConfigError(f"{ENV}={value!r}: a number of worker processes (0: run the jobs in Snakemake's "
                          "process; unset: one worker per job running at once)")
    return int(value)


def pool_for(workflow) -> Pool | None:
    """The pool this process's in-process jobs run in; None: run them in this process (``RADRANK_WORKERS=0``,
    or ``workflow``, the Snakemake workflow running the job, runs one job per process)."""
    global _POOL
    max_workers = _max_workers()
    if max_workers == 0 or getattr(workflow, "remote_exec", False) or getattr(workflow, "subprocess_exec", False):
        return None
    with _POOL_LOCK:
        if _POOL is None:
            import atexit

            _POOL = Pool(max_workers)
            atexit.register(_POOL.close)  # after Snakemake's job threads have ended: every worker idle
            if _STOPPED is not None:
                _POOL.stop(_STOPPED)
        return _POOL


def prestart(workflow) -> None:
    """Called as the Snakefile is read: start this run's fork server now, as a fork of this process where
    :func:`_fork_ready` allows it (milliseconds), else as a fresh interpreter whose imports (about a second) overlap
    Snakemake's parse and DAG build instead of delaying the first job. Only where the run's jobs would go to this
    process's pool; a fresh one only with a second CPU (on one its imports would only slow the DAG). A run that then
    has no job for the pool (a dry run, nothing to do) ends the server unused at exit without waiting for it; a
    cluster's main process, once it knows (:func:`stop_on_signals`)."""
    fork = _fork_ready()  # a fork costs milliseconds: worth it on one CPU too
    if fork is None and len(os.sched_getaffinity(0)) < 2:
        return
    pool = pool_for(workflow)
    if pool is not None:
        pool.start(fork)


def run_in_process(job_type, rule, params, input, output, log, config, workflow) -> None:
    """A core-family ``run:`` rule's body: its job (a :class:`radrank.jobs.Job` type, built from ``params.job``)
    in a worker of this Snakemake run's pool, or in this process itself where Snakemake runs one job per process
    (a cluster's job step) and with ``RADRANK_WORKERS=0``."""
    run(job_type, rule, params.job, input, output, log[0] if log else None, config, workflow=workflow)


def run(job_type, rule, params, input, output, log_path, config, *, workflow=None) -> None:
    """A job in a worker of this process's pool, or here (see :func:`run_in_process`)."""
    if _STOPPED is not None:  # a job Snakemake started as the signal came
        line = _stopped_line(rule, _STOPPED)
        _log_failure(line, log_path)
        raise jobs.JobFailed(line)
    pool = pool_for(workflow)
    if pool is not None:
        pool.run(job_type, rule, params, input, output, log_path, config)
        return
    me = threading.get_ident()
    with _RUNNING_LOCK:
        if _STOPPED is not None:
            line = _stopped_line(rule, _STOPPED)
            _log_failure(line, log_path)
            raise jobs.JobFailed(line)
        _RUNNING[me] = (rule, _paths(output), None if log_path is None else str(log_path))
    try:
        run_job(job_type, rule, params, input, output, log_path, config)
    finally:
        with _RUNNING_LOCK:
            _RUNNING.pop(me, None)


# --- stopping on a signal ---------------------------------------------------------------------------------

_STOPPED: int | None = None  # the signal that stopped this run
_RUNNING: dict[int, tuple] = {}  # the jobs running in this process's threads: thread -> (rule, outputs, log)
_RUNNING_LOCK = threading.Lock()


def stop_on_signals(workflow) -> None:
    """The workflow's ``onstart``: from now on SIGTERM, SIGINT and SIGHUP stop the run within seconds (see the
    module docstring) instead of Snakemake's graceful stop, which waits for the running jobs however long they
    take. Called in Snakemake's main thread once its scheduler is set up (it installs its own SIGTERM handler);
    a signal this process ignores (``nohup``, a background job's SIGINT) stays ignored."""
    global _POOL
    if threading.current_thread() is not threading.main_thread():
        return
    if not getattr(workflow, "local_exec", True) and not getattr(workflow, "remote_exec", False):
        # the jobs run on a cluster (the SLURM executor): no job runs here, so the server prestart started has
        # nothing to do. Snakemake's own Ctrl-C path cancels the jobs (scancel) and exits; SIGTERM and SIGHUP take
        # that path too, instead of waiting for the cluster's jobs to finish
        with _POOL_LOCK:
            if _POOL is not None:
                _POOL.close()
                _POOL = None
        for signum in (signal.SIGTERM, signal.SIGHUP):
            if signal.getsignal(signum) not in (signal.SIG_IGN, None):
                signal.signal(signum, _interrupt)
        return
    for signum in STOP_SIGNALS:
        if signal.getsignal(signum) not in (signal.SIG_IGN, None):
            signal.signal(signum, lambda signum, frame: _on_signal(workflow, signum))


def _interrupt(signum, frame):
    """(A cluster run's main process.) A stop signal is Ctrl-C: Snakemake cancels the cluster's jobs."""
    signal.signal(signum, signal.SIG_DFL)  # a second one ends the process at once
    _say(f"radrank: stopping on {_signal_name(signum)}: cancelling the cluster's jobs")
    raise KeyboardInterrupt


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def _stopped_line(rule: str, signum: int) -> str:
    return f"rule {rule} stopped: the run was stopped by {_signal_name(signum)}"


def _stopped_final(signum: int, detail: str = "") -> str:
    return (f"radrank: the run was stopped by {_signal_name(signum)}{detail}; the interrupted jobs' outputs were "
            "removed; rerun the command to go on")


def _say(line: str) -> None:
    """A line on stderr, written at once (also from a signal handler: no buffered stream's lock)."""
    try:
        os.write(2, (line + "\n").encode(errors="replace"))
    except OSError:
        pass


def _on_signal(workflow, signum: int) -> None:
    """(Main thread, a signal handler.) The first stop signal starts the stop; later ones change nothing."""
    global _STOPPED
    if _STOPPED is not None:  # (no lock: a handler must not wait for one its own thread may hold)
        return
    _STOPPED = signum
    _say(f"radrank: stopping on {_signal_name(signum)}: the running jobs are ended and their outputs removed; "
         "no new job starts")
    import atexit

    atexit.register(_say, _stopped_final(signum))  # the run's last line, after Snakemake's own
    threading.Thread(target=_stop, args=(workflow, signum), name="radrank-stop", daemon=True).start()


def _stop(workflow, signum: int) -> None:
    """End the running jobs so that Snakemake fails them (removing their outputs) and exits; if some cannot be
    ended (jobs in Snakemake's threads), exit without them after the grace (:func:`_exit_now`)."""
    started = time.monotonic()
    grace = _stop_grace()
    scheduler = getattr(workflow, "scheduler", None)
    if scheduler is not None and hasattr(scheduler, "exit_gracefully"):
        scheduler.exit_gracefully()  # no new job; Snakemake ends once the running ones have
    tree = _descendants(os.getpid())  # before the workers die: what a worker's job started is in it
    pool = _POOL
    spared = set()
    if pool is not None:
        pool.stop(signum)
        spared = pool.spared()
    _kill(set(tree) - spared, signal.SIGTERM)  # shell and script jobs, with what they started
    while True:
        time.sleep(0.05)
        waited = time.monotonic() - started
        with _RUNNING_LOCK:
            stuck = bool(_RUNNING)
        if (waited > grace and (stuck or set(_descendants(os.getpid())) - spared)) or waited > _STOP_LIMIT_S:
            break
    _exit_now(workflow, signum, grace)


def _stop_grace() -> float:
    try:
        return float(os.environ.get(STOP_GRACE_ENV, STOP_GRACE_S))
    except ValueError:
        return STOP_GRACE_S


def _exit_now(workflow, signum: int, grace: float) -> None:
    """The jobs still running after the grace: their outputs removed (their logs say so), every process
    left killed, Snakemake's lock released, then this process exits."""
    with _RUNNING_LOCK:
        stuck = list(_RUNNING.values())
    for rule, outputs, log_path in stuck:
        _remove_outputs(outputs)
        _log_failure(_stopped_line(rule, signum), log_path, stderr=False)
    _kill(_descendants(os.getpid()), signal.SIGKILL)
    persistence = getattr(workflow, "persistence", None)
    if getattr(persistence, "_lockfile", None) and not getattr(workflow, "remote_exec", False):
        try:  # only the locks this process wrote (a cluster's job step takes none: the main process's stay)
            persistence.unlock()
        except Exception:  # noqa: BLE001 (a lock already gone: nothing to do)
            pass
    rules = ", ".join(sorted({rule for rule, _, _ in stuck})) or "Snakemake's shutdown"
    _say(_stopped_final(signum, f" ({rules} still running {grace:g} s later: ended with the process)"))
    os._exit(128 + signum)


def _descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (Linux: /proc), parents before children; [] where there is no /proc."""
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields and fields[0] != b"Z":
            children.setdefault(int(fields[1]), []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), ()):
            found.append(child)
            todo.append(child)
    return found


def _kill(pids, signum: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, signum)
        except (ProcessLookupError, PermissionError):
            pass


def _paths(named) -> list[str]:
    """Every path of a rule's output (Snakemake's named list, or a dict of paths or lists of paths)."""
    values = named.values() if isinstance(named, dict) else named
    out = []
    for value in values:
        out.extend(map(str, value) if isinstance(value, (list, tuple)) else [str(value)])
    return out


def _remove_partials(paths) -> None:
    """The hidden ``.<name>.*.part`` files :func:`radrank.io.atomic_path` writes beside each output."""
    import glob

    for path in paths:
        head, name = os.path.split(path)
        for part in glob.glob(os.path.join(glob.escape(head or "."), f".{glob.escape(name)}.*.part")):
            try:
                os.unlink(part)
            except OSError:
                pass


def _remove_outputs(paths) -> None:
    """A stopped job's outputs (files or folders) and its partial files: nothing of it looks complete."""
    import shutil

    _remove_partials(paths)
    for path in paths:
        try:
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            elif os.path.lexists(path):
                os.unlink(path)
        except OSError:
            pass


# --- the server and the workers (their own processes) ---------------------------------------------------


def _serve(control_fd: int, alive_fd: int, preload) -> None:
    """The fork server: imports ``preload``, then forks a worker for each request until Snakemake closes the
    control socket; then waits for its workers and ends the process. Also answers how a worker ended (it is their
    parent)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C: the workers stop; this ends with Snakemake
    for fd in (control_fd, alive_fd):
        os.set_inheritable(fd, False)  # passed to this process; not to what a job starts
    _preload([*preload, *_metric_modules()])
    garbage_collector.tune()  # its workers inherit it
    control = socket.socket(fileno=control_fd)
    children = set()
    while True:
        try:
            message, fds, _, _ = socket.recv_fds(control, 64, 1)
        except OSError:
            break
        if not message:
            break
        if message == b"fork":
            os.set_inheritable(fds[0], False)
            pid = os.fork()
            if pid == 0:
                control.close()
                _work(fds[0], alive_fd)  # never returns
            os.close(fds[0])
            children.add(pid)
            reply = str(pid)
        else:  # b"status <pid>"
            pid = int(message.split()[1])
            code = _reap(pid) if pid in children else None
            children.discard(pid)
            reply = "?" if code is None else str(code)
        control.send(reply.encode())
    for pid in children:
        _reap(pid, timeout=None)
    # ended without the interpreter's teardown of what it imported (a third of a CPU-second, which Snakemake's exit
    # would wait for): nothing of this process's is left to write
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


class _ForkedServer:
    """The fork server when it is a fork of this process (:func:`_fork_server`): a child of this process, ended and
    waited for as a :class:`subprocess.Popen` is (``pid``, ``returncode``, :meth:`poll`, :meth:`wait`,
    :meth:`kill`)."""

    def __init__(self, pid: int):
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self._reaped(os.waitpid(self.pid, os.WNOHANG))
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        delay = 0.001
        while self.poll() is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(f"fork server {self.pid}", timeout)
            time.sleep(delay)
            delay = min(delay * 2, 0.05)
        return self.returncode

    def kill(self) -> None:
        if self.returncode is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def _reaped(self, status: tuple) -> None:
        pid, code = status
        if pid == self.pid:
            self.returncode = os.waitstatus_to_exitcode(code)


def _blas_thread_setter():
    """OpenBLAS's ``set_num_threads`` of the BLAS this process's numpy has loaded, or None (another BLAS, or none
    found): the threads a fork of this process starts for BLAS are then set there."""
    import ctypes
    import re

    try:
        with open("/proc/self/maps") as maps:
            libraries = sorted(set(re.findall(r"(/\S*openblas\S*\.so\S*)", maps.read())))
    except OSError:
        return None
    for path in libraries:
        library = ctypes.CDLL(path)
        for name in ("scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads", "openblas_set_num_threads",
                     "openblas_set_num_threads64_"):
            setter = getattr(library, name, None)
            if setter is not None:
                return setter
    return None


class _ForkPlan(NamedTuple):
    """What a fork server forked from this process sets (:func:`_fork_ready`)."""

    blas_threads: int  # ``OPENBLAS_NUM_THREADS``, else 1, as a fresh server gets them
    set_blas_threads: object  # OpenBLAS's set_num_threads of the numpy loaded here (None: numpy not loaded yet)


def _fork_ready() -> _ForkPlan | None:
    """How a fork server forked from this process sets its BLAS threads, or None where this process may not be
    forked: a thread besides this one, the main one, runs (a fork keeps only the forking thread: a lock another one
    held stays held); or numpy is loaded with a BLAS whose threads cannot be set here (a fresh interpreter reads them
    from the environment)."""
    if not hasattr(os, "fork") or threading.current_thread() is not threading.main_thread() \
            or threading.active_count() != 1:
        return None
    value = os.environ.get("OPENBLAS_NUM_THREADS", "1").strip()
    threads = int(value) if value.isdigit() and int(value) > 0 else 1
    setter = _blas_thread_setter() if "numpy" in sys.modules else None
    if "numpy" in sys.modules and setter is None:
        return None
    return _ForkPlan(threads, setter)


def _fork_server(server_end, alive_r: int, parents: tuple, preload, plan: _ForkPlan) -> int:
    """Fork this process (Snakemake's, as it reads the Snakefile: one thread) into the fork server: what it has
    imported (pandas, numpy, Snakemake, radrank's plan) the server has at no cost; a fresh interpreter imported them
    again (half a CPU-second in every run). ``parents``: this process's ends of the server's socket and of the
    pipe that must be its alone (closed in the server). The server's pid."""
    sys.stdout.flush()  # what this process has buffered is written once, here, not again at the server's exit
    sys.stderr.flush()
    pid = os.fork()
    if pid:
        return pid
    # the server: never returns into the caller's frames (Snakemake's, reading the Snakefile)
    code = 1
    try:
        for end in parents:
            os.close(end) if isinstance(end, int) else end.close()
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
        for signum in (signal.SIGTERM, signal.SIGHUP):  # as a fresh interpreter has them
            signal.signal(signum, signal.SIG_DFL)
        _as_fresh_server(plan)
        _serve(server_end.detach(), alive_r, list(preload))  # ends the process
    except BaseException:  # noqa: BLE001 (the server could not start: the line is on stderr, a job starts another)
        import traceback

        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _as_fresh_server(plan: _ForkPlan) -> None:
    """In a fork server forked from Snakemake's process: the memory settings and BLAS threads a fresh one gets from
    its environment (:data:`ALLOCATOR_ENV`; one BLAS thread per worker), where that environment does not set them
    (then this process was started with them); and that environment, for what it imports itself."""
    import ctypes

    unset = {name for name in (*ALLOCATOR_ENV, *BLAS_ENV) if name not in os.environ}
    os.environ.update({name: value for name, value in {**ALLOCATOR_ENV, **dict.fromkeys(BLAS_ENV, "1")}.items()
                       if name in unset})
    if plan.set_blas_threads is not None:  # numpy loaded before the fork: its BLAS read the environment then
        plan.set_blas_threads(plan.blas_threads)
    mallopt = getattr(ctypes.CDLL(None), "mallopt", None)
    for name, option in (("MALLOC_MMAP_THRESHOLD_", -3), ("MALLOC_TRIM_THRESHOLD_", -1)):  # M_MMAP_, M_TRIM_
        if mallopt is not None and name in unset:
            mallopt(option, int(ALLOCATOR_ENV[name]))
    if "NUMPY_MADVISE_HUGEPAGE" in unset and "numpy" in sys.modules:
        import numpy as np

        core = getattr(np, "_core", None) or np.core
        core.multiarray._set_madvise_hugepage(ALLOCATOR_ENV["NUMPY_MADVISE_HUGEPAGE"] == "1")


def _metric_modules() -> list:
    from radrank import metrics

    return [metrics.REGISTRY.location(name)[0] for name in metrics.names()]


def _preload(modules) -> None:
    """Import ``modules``, then freeze what they made: the workers' garbage collector never walks (nor copies,
    touching them) these objects."""
    import gc
    import importlib

    for name in modules:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 (a job that needs it fails with the error, in its log)
            pass
    gc.freeze()


def _reap(pid: int, timeout: float | None = 5.0) -> int | None:
    """The exit code of child ``pid`` once it has ended (None: still running after ``timeout`` seconds)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        try:
            done, status = os.waitpid(pid, 0 if deadline is None else os.WNOHANG)
        except ChildProcessError:
            return None
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            return None
        time.sleep(0.01)


def _work(conn_fd: int, alive_fd: int) -> None:
    """A worker (forked from the server): runs the jobs it is sent, one at a time, until Snakemake closes the
    connection or dies."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # Ctrl-C stops it at once
    threading.Thread(target=_exit_with_snakemake, args=(alive_fd,), daemon=True).start()
    jobs.FORK_SAFE = True  # its jobs may fork (the watchdog above holds no lock)
    jobs.ALONE_IN_PROCESS = True  # one job at a time
    conn = Connection(conn_fd)
    code = 0
    try:
        while True:
            try:
                message = conn.recv_bytes()
            except (EOFError, OSError):
                break
            try:
                path, task = pickle.loads(message)
                if sys.path != path:
                    sys.path[:] = path
                pickle.loads(task).run()
                reply = None
            except jobs.JobFailed as e:
                reply = str(e)
            except BaseException as e:  # noqa: BLE001 (a job that could not be read, or exited: its line)
                reply = f"the job could not run in a worker: {type(e).__name__}: {e}"
            conn.send(reply)
            garbage_collector.after_job()
    except BaseException:  # noqa: BLE001 (the connection broke: nothing to tell; the line is on stderr)
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _exit_with_snakemake(alive_fd: int) -> None:
    """A worker's watchdog: the pipe's write end is Snakemake's alone, so it reads end-of-file when Snakemake
    has ended, however it ended; the worker ends with it, busy or not."""
    while os.read(alive_fd, 1):
        pass
    os._exit(1)
