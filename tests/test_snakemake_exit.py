"""Snakemake's process ending without its interpreter's teardown (radrank.snakemake_exit): the run's exit status,
its atexit handlers, its threads and every file it wrote are as at a normal exit, and the teardown (an object's
``__del__`` when its module is cleared) is what is skipped. Any other ``sys.exit`` raises ``SystemExit`` as usual."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"

# A job that succeeds or fails (FAIL=1); as the Snakefile is read: an atexit handler, a file written and never
# closed and an object whose __del__ runs only when the interpreter tears its module down; as the run ends, a
# thread that is no daemon and writes half a second later.
SNAKEFILE = textwrap.dedent(f"""
    import atexit, os, sys, threading, time
    sys.path.insert(0, {str(SRC)!r})
    from radrank import snakemake_exit

    if os.environ.get("QUICK") == "1":
        snakemake_exit.install()

    atexit.register(lambda: open("atexit.txt", "w").write("ran"))
    UNCLOSED = open("unclosed.txt", "w")
    UNCLOSED.write("every byte")

    def late():
        time.sleep(0.5)
        open("thread.txt", "w").write("joined")

    # started as the run ends: it is still sleeping when Snakemake exits
    onsuccess: threading.Thread(target=late).start()
    onerror: threading.Thread(target=late).start()

    sys.path.insert(0, os.getcwd())
    import teardown_probe  # noqa: F401

    rule all:
        input: "out.txt"

    rule job:
        output: "out.txt"
        run:
            if os.environ.get("FAIL") == "1":
                raise RuntimeError("the job fails")
            open(output[0], "w").write("done")
""")


# a module whose object is freed, and writes, only when the interpreter clears its modules at the end
PROBE = textwrap.dedent("""
    import os

    class Teardown:
        def __init__(self):
            self.path = os.path.abspath("teardown.txt")
            self.open = open  # by then the module's names, builtins' included, are gone

        def __del__(self):
            with self.open(self.path, "w") as f:
                f.write("torn down")

    PROBE = Teardown()
""")


def _run(tmp_path: Path, quick: bool, fail: bool) -> tuple[int, dict, str]:
    work = tmp_path / f"quick{int(quick)}-fail{int(fail)}"
    work.mkdir()
    (work / "Snakefile").write_text(SNAKEFILE)
    (work / "teardown_probe.py").write_text(PROBE)
    env = {**os.environ, "QUICK": "1" if quick else "0", "FAIL": "1" if fail else "0"}
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", "-s", "Snakefile"], cwd=work, env=env,
                          capture_output=True, text=True, timeout=300)
    files = {p.name: p.read_text() for p in sorted(work.glob("*.txt"))}
    return proc.returncode, files, proc.stdout + proc.stderr


@pytest.mark.parametrize("fail", [False, True])
def test_the_run_ends_as_at_a_normal_exit_less_the_teardown(tmp_path, fail):
    normal_code, normal, _ = _run(tmp_path, quick=False, fail=fail)
    code, files, out = _run(tmp_path, quick=True, fail=fail)
    assert normal_code == (1 if fail else 0)
    assert code == normal_code, out
    # the control: a normal exit tears the Snakefile's module down, so the test can tell the two apart
    assert normal.pop("teardown.txt") == "torn down"
    assert "teardown.txt" not in files, out
    assert files == normal, out
    assert files["atexit.txt"] == "ran" and files["unclosed.txt"] == "every byte" and files["thread.txt"] == "joined"
    assert ("out.txt" in files) is not fail
    # Snakemake's last lines (written by its logging handlers) came out
    assert ("Complete log" in out) or ("complete log" in out.lower()), out


def test_any_other_exit_raises_systemexit(tmp_path, monkeypatch):
    from snakemake import cli

    from radrank import snakemake_exit

    monkeypatch.setattr(sys, "exit", sys.exit)  # restored after the test
    assert snakemake_exit.install() and snakemake_exit.install()  # idempotent
    assert getattr(sys.exit, snakemake_exit._MARK)
    with pytest.raises(SystemExit) as raised:
        sys.exit(3)
    assert raised.value.code == 3
    # Snakemake's command-line entry called from Python code, not as the program: its exit is a SystemExit
    (tmp_path / "Snakefile").write_text("rule all:\n    output: 'x.txt'\n    run:\n        open(output[0], 'w')\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as raised:
        cli.main(["--cores", "1", "-s", "Snakefile", "--dry-run", "--quiet"])
    assert raised.value.code == 0


@pytest.mark.parametrize("status, code", [(None, 0), (0, 0), (1, 1), (3, 3), (256 + 2, 2), ("a message", 1)])
def test_exit_status_is_the_interpreters(status, code):
    from radrank import snakemake_exit

    proc = subprocess.run([sys.executable, "-c", f"import sys; sys.exit({status!r})"], capture_output=True, text=True)
    assert proc.returncode == code
    assert snakemake_exit.exit_status(status) == code


# A rule script as scripts/score.py is: its job (here one of its own) run by radrank.jobs.run_script, which then
# ends the process; the job fails when FAIL=1 (a JobFailed: status 1 after its line is logged).
SCRIPT = textwrap.dedent(f"""
    import atexit, os, sys
    sys.path.insert(0, {str(SRC)!r})
    sys.path.insert(0, os.getcwd())
    import teardown_probe  # noqa: F401
    from radrank import jobs

    atexit.register(lambda: open("atexit.txt", "w").write("ran"))
    UNCLOSED = open("unclosed.txt", "w")
    UNCLOSED.write("every byte")

    class Job:
        @classmethod
        def from_params(cls, params, config):
            return cls()

        def run(self, input, output):
            if os.environ.get("FAIL") == "1":
                raise RuntimeError("the job fails")
            open(output[0], "w").write("done")

    jobs.run_script(snakemake, Job)
""")

SCRIPT_SNAKEFILE = textwrap.dedent("""
    rule all:
        input: "out.txt"

    rule job:
        output: "out.txt"
        log: "job.log"
        params: job={}
        script: "job.py"
""")


@pytest.mark.parametrize("fail", [False, True])
def test_a_rule_script_ends_as_at_a_normal_exit_less_the_teardown(tmp_path, fail):
    work = tmp_path / "work"
    work.mkdir()
    (work / "Snakefile").write_text(SCRIPT_SNAKEFILE)
    (work / "job.py").write_text(SCRIPT)
    (work / "teardown_probe.py").write_text(PROBE)
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", "-s", "Snakefile"], cwd=work,
                          env={**os.environ, "FAIL": "1" if fail else "0"}, capture_output=True, text=True,
                          timeout=300)
    files = {p.name: p.read_text() for p in sorted(work.glob("*.txt"))}
    assert proc.returncode == (1 if fail else 0), proc.stdout + proc.stderr
    assert files.get("atexit.txt") == "ran" and files.get("unclosed.txt") == "every byte", files
    assert "teardown.txt" not in files  # the script's process was not torn down
    assert ("out.txt" in files) is not fail
    log = (work / "job.log").read_text()
    assert ("the job fails" in log) is fail and ("done in" in log) is not fail, log
