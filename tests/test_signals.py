"""A run stops on SIGTERM, SIGINT (Ctrl-C) or SIGHUP within seconds, whatever a job is doing (radrank.workers
.stop_on_signals, radrank.console.run_snakemake): real Snakemake runs whose job blocks (a read that never returns,
a long sleep), in a worker and in Snakemake's own thread (RADRANK_WORKERS=0), signalled directly and through the
envs.py wrapper. Each stop leaves no process, no output of the stopped job (nor its partial file), no job
started after the signal, no stale lock; the status is non-zero and the last line says the run was stopped.

The time bound in the tests only guards against a hang: Snakemake's own SIGTERM handling waits for the running
jobs, which here never end."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from radrank import jobs, workers

pytestmark = [pytest.mark.workflow,  # real Snakemake runs
              pytest.mark.skipif(not os.path.isdir("/proc"), reason="finds a run's processes in /proc")]

REPO = Path(__file__).resolve().parents[1]
HANG_GUARD_S = 20  # far above the few seconds a stop takes; only so that a regression fails instead of hanging


@dataclass(frozen=True)
class Block(jobs.Job):
    """A job that never ends by itself: it writes part of its output, opens an atomic write (radrank.io's
    hidden .part file), records its pid, then blocks in a read of a FIFO nobody writes (``read``), in a sleep
    (``sleep``), or returns (``none``)."""

    action: str = "sleep"

    def run(self, input, output):
        from radrank import io

        if self.action == "none":
            Path(output.out).write_text("complete\n")
            Path(output.pid).write_text(str(os.getpid()))
            return
        Path(output.out).write_text("partial")  # what a killed job leaves, unless removed
        with io.atomic_path(Path(output.out)) as part:
            part.write_text("partial")
            Path(output.pid).write_text(str(os.getpid()))
            if self.action == "read":
                fifo = Path(output.out).parent / "never-written.fifo"
                if not fifo.exists():
                    os.mkfifo(fifo)
                fifo.read_bytes()  # blocks in open(): no writer ever comes
            time.sleep(600)


SNAKEFILE = """
import sys
sys.path[:0] = [{tests!r}, {src!r}]
from radrank import workers
from test_signals import Block


onstart:
    workers.stop_on_signals(workflow)


rule all:
    input: "out/block.txt", "out/other.txt"


rule block:
    output: out="out/block.txt", pid="out/block.pid"
    log: "logs/block.log"
    params: job={{"action": config.get("action", "sleep")}}
    priority: 10
    run:
        workers.run_in_process(Block, rule, params, input, output, log, config, workflow)


rule other:
    output: out="out/other.txt", pid="out/other.pid"
    log: "logs/other.log"
    params: job={{"action": "none"}}
    run:
        workers.run_in_process(Block, rule, params, input, output, log, config, workflow)
"""

# Starts the command with the stop signals at their defaults, as a shell at a terminal does (a test runner
# started in the background may ignore SIGINT, and an ignored signal stays ignored across exec).
LAUNCH = ("import os, signal, sys\n"
          "for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP): signal.signal(s, signal.SIG_DFL)\n"
          "os.execv(sys.argv[1], sys.argv[1:])")

WRAPPER = ("import sys; sys.path.insert(0, {src!r}); from radrank import console; "
           "sys.exit(console.run_snakemake([sys.executable, '-m', 'snakemake', *sys.argv[1:]]))")


def workdir(tmp_path: Path) -> Path:
    wd = tmp_path / "wd"
    wd.mkdir()
    (wd / "Snakefile").write_text(SNAKEFILE.format(tests=str(Path(__file__).parent), src=str(REPO / "src")))
    return wd


def start(wd: Path, mode: str, *, wrapper=False, action="sleep", extra=()):
    env = {**os.environ, "RADRANK_STOP_GRACE_S": "1", "PYTHONUNBUFFERED": "1"}
    env.pop(workers.ENV, None)
    if mode == "in_process":
        env[workers.ENV] = "0"
    args = ["--cores", "1", "--force-use-threads", "--config", f"action={action}", *extra]
    cmd = ([sys.executable, "-c", WRAPPER.format(src=str(REPO / "src")), *args] if wrapper
           else [sys.executable, "-m", "snakemake", *args])
    return subprocess.Popen([sys.executable, "-c", LAUNCH, *cmd], cwd=wd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)


def wait_for_file(path: Path, proc, timeout=60.0) -> None:
    deadline = time.monotonic() + timeout
    while not (path.exists() and path.read_text()):
        if proc.poll() is not None:
            raise AssertionError(f"the run ended before its job started:\n{proc.stdout.read()}")
        if time.monotonic() > deadline:
            raise AssertionError(f"{path} never appeared")
        time.sleep(0.05)


def processes_in(wd: Path) -> list[int]:
    """The processes whose working directory is ``wd`` (the run's, and whatever it started)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.readlink(f"/proc/{entry}/cwd") == str(wd):
                    state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
                    if state != "Z":
                        found.append(int(entry))
            except OSError:
                pass
    return found


def stop(proc, wd: Path, signum: int, *, group=False):
    """Signal the run (its process, or its whole process group as a terminal's Ctrl-C does), wait for it to
    end; (exit status, output, seconds taken)."""
    started = time.monotonic()
    if group:
        os.killpg(proc.pid, signum)
    else:
        proc.send_signal(signum)
    try:
        out, _ = proc.communicate(timeout=HANG_GUARD_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        for pid in processes_in(wd):
            os.kill(pid, signal.SIGKILL)
        out, _ = proc.communicate()
        raise AssertionError(f"still running {HANG_GUARD_S} s after the signal:\n{out[-3000:]}")
    return proc.returncode, out, time.monotonic() - started


def assert_stopped(wd: Path, code: int, out: str, signum: int, pid: int):
    name = signal.Signals(signum).name
    assert code != 0, out
    assert out.rstrip().splitlines()[-1].startswith(f"radrank: the run was stopped by {name}"), out[-3000:]
    deadline = time.monotonic() + 5
    while processes_in(wd) and time.monotonic() < deadline:  # a zombie being reaped
        time.sleep(0.05)
    assert not processes_in(wd), out[-3000:]
    try:
        os.kill(pid, 0)
        raise AssertionError(f"the job's process {pid} is still alive")
    except ProcessLookupError:
        pass
    out_dir = wd / "out"
    assert not (out_dir / "block.txt").exists()  # neither the partial output nor a renamed .part
    assert not list(out_dir.glob(".block.txt.*.part"))
    assert not (out_dir / "other.txt").exists()  # no job started after the signal
    assert (wd / "logs/block.log").read_text().rstrip().endswith(f"rule block stopped: the run was stopped by {name}")
    assert not list((wd / ".snakemake/locks").glob("*")), "a stale lock"


@pytest.mark.parametrize("signame, mode, action, group", [
    ("SIGTERM", "workers", "sleep", False),
    ("SIGTERM", "in_process", "read", False),
    ("SIGINT", "workers", "read", False),  # kill -INT to Snakemake alone
    ("SIGINT", "in_process", "sleep", True),  # Ctrl-C: the whole process group
])
def test_snakemake_stops_on_a_signal_whatever_its_job_is_doing(tmp_path, signame, mode, action, group):
    signum = getattr(signal, signame)
    wd = workdir(tmp_path)
    proc = start(wd, mode, action=action)
    wait_for_file(wd / "out/block.pid", proc)
    job_pid = int((wd / "out/block.pid").read_text())
    assert (job_pid == proc.pid) == (mode == "in_process")  # in Snakemake's own process, or in a worker
    code, out, _ = stop(proc, wd, signum, group=group)
    assert_stopped(wd, code, out, signum, job_pid)
    assert f"radrank: stopping on {signame}" in out
    if mode == "in_process":  # the thread cannot be ended: the process exits without it, after the grace
        assert code == 128 + signum and "block still running 1 s later" in out
        # the lock is released: the same command runs again, and the job now completes
        again = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", "--force-use-threads",
                                "--config", "action=none"],
                               cwd=wd, capture_output=True, text=True, timeout=120,
                               env={**os.environ, workers.ENV: "0"})
        assert again.returncode == 0, again.stderr[-3000:]
        assert (wd / "out/block.txt").read_text() == "complete\n"
    else:
        assert code == 1  # Snakemake's own exit: the killed job failed and Snakemake removed its outputs
        assert "rule block stopped: the run was stopped by" in out


@pytest.mark.parametrize("signame, mode, group", [
    ("SIGTERM", "workers", False),  # e.g. `timeout`, or kill, sent to the wrapper
    ("SIGINT", "in_process", True),  # Ctrl-C at the terminal: the wrapper's process group
])
def test_the_wrapper_forwards_the_signal_and_leaves_no_process(tmp_path, signame, mode, group):
    """The wrapper runs Snakemake in a process group of its own: the signal reaches Snakemake once, through
    the wrapper, and the wrapper exits with 128 + the signal once nothing of the run is left."""
    signum = getattr(signal, signame)
    wd = workdir(tmp_path)
    proc = start(wd, mode, wrapper=True)
    wait_for_file(wd / "out/block.pid", proc)
    job_pid = int((wd / "out/block.pid").read_text())
    snakemake_pids = [p for p in processes_in(wd) if p != proc.pid]
    assert snakemake_pids and all(os.getpgid(p) != os.getpgid(proc.pid) for p in snakemake_pids)
    code, out, _ = stop(proc, wd, signum, group=group)
    assert code == 128 + signum, out[-3000:]
    assert_stopped(wd, code, out, signum, job_pid)
    assert out.count(f"radrank: the run was stopped by {signame}") == 1, out[-3000:]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_killed_wrapper_takes_the_run_with_it(tmp_path):
    """SIGKILL leaves the wrapper no time to forward anything: Snakemake gets SIGTERM as its parent dies
    (SIGHUP's path is the same as SIGTERM's) and stops as if it had been sent it."""
    wd = workdir(tmp_path)
    proc = start(wd, "workers", wrapper=True)
    wait_for_file(wd / "out/block.pid", proc)
    job_pid = int((wd / "out/block.pid").read_text())
    proc.kill()
    proc.communicate()
    deadline = time.monotonic() + HANG_GUARD_S
    while processes_in(wd) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = processes_in(wd)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert not left, f"{left} outlived the wrapper"
    with pytest.raises(ProcessLookupError):
        os.kill(job_pid, 0)
    assert not (wd / "out/block.txt").exists() and not list((wd / "out").glob(".block.txt.*.part"))
    assert not (wd / "out/other.txt").exists()
    assert not list((wd / ".snakemake/locks").glob("*"))


def test_the_workflow_installs_the_stop(tmp_path):
    """The repository's Snakefile stops on a signal too: its onstart installs radrank.workers.stop_on_signals
    (a rule appended to a copy of the workflow blocks; the example's config, nothing else of it runs)."""
    from _workflow import make_workdir

    wd = make_workdir(tmp_path / "wf")
    with (wd / "Snakefile").open("a") as f:
        f.write(textwrap.dedent(f"""

            sys.path.insert(0, {str(Path(__file__).parent)!r})
            from test_signals import Block


            rule radrank_test_block:
                output: out="out/block.txt", pid="out/block.pid"
                log: "logs/block.log"
                params: job={{"action": "read"}}
                run:
                    workers.run_in_process(Block, rule, params, input, output, log, config, workflow)
            """))
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop(workers.ENV, None)
    proc = subprocess.Popen([sys.executable, "-c", LAUNCH, sys.executable, "-m", "snakemake", "--cores", "1",
                             "radrank_test_block"], cwd=wd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    wait_for_file(wd / "out/block.pid", proc, timeout=120)
    job_pid = int((wd / "out/block.pid").read_text())
    code, out, _ = stop(proc, wd, signal.SIGTERM)
    assert code == 1 and "radrank: stopping on SIGTERM" in out, out[-3000:]
    assert out.rstrip().splitlines()[-1].startswith("radrank: the run was stopped by SIGTERM")
    assert not processes_in(wd) and not (wd / "out/block.txt").exists()
    with pytest.raises(ProcessLookupError):
        os.kill(job_pid, 0)


def test_a_cluster_run_takes_snakemakes_cancel_path():
    """The main process of a cluster run (SLURM executor: no job of its own) turns SIGTERM into Ctrl-C, which
    Snakemake answers by cancelling the cluster's jobs (scancel), instead of waiting for them to finish."""
    code = ("import os, signal, sys, time; sys.path.insert(0, {src!r}); from types import SimpleNamespace\n"
            "from radrank import workers\n"
            "workers.stop_on_signals(SimpleNamespace(local_exec=False, remote_exec=False))\n"
            "assert signal.getsignal(signal.SIGINT) is signal.default_int_handler\n"
            "try:\n"
            "    os.kill(os.getpid(), signal.SIGTERM); time.sleep(10)\n"
            "except KeyboardInterrupt:\n"
            "    print('KeyboardInterrupt')\n").format(src=str(REPO / "src"))
    proc = subprocess.run([sys.executable, "-c", LAUNCH, sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "KeyboardInterrupt"
    assert "radrank: stopping on SIGTERM: cancelling the cluster's jobs" in proc.stderr
