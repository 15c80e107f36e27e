"""Running Snakemake: its command line, its console output shown as a run's few lines, stopping it on a signal.

:func:`run_snakemake` starts Snakemake in its own process group, forwards SIGTERM / SIGINT / SIGHUP to it (and kills
what is left once it has had :data:`STOP_WAIT_S` seconds), and feeds its stderr to a :class:`SnakemakeConsole`,
which shows a line per stage, the failures and a summary (:func:`output_mode`). Standard library only, and nothing
of :mod:`radrank.envs`: envs.py runs as a file before any environment exists, and its ``snakemake`` command
(:func:`run_arguments`, :data:`SNAKEMAKE_HELP`) runs Snakemake through this module."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

VERBOSE_VAR = "RADRANK_VERBOSE"  # =1: Snakemake's whole output (every job's block), as --verbose also gives
STOP_WAIT_S = 45  # after a stop signal: how long Snakemake gets (its own stop takes seconds) before it is killed
HEARTBEAT_S = 60  # a quiet run says which jobs are running when it has printed nothing for this long
# Runs that print what was asked for (a dry run, a listing, a graph, unlocking): their output goes through as is.
_INFO_ARGS = ("-n", "--dry-run", "--dryrun", "-S", "--summary", "-D", "--detailed-summary", "-l", "--list",
              "--list-rules", "--lt", "--list-target-rules", "--dag", "--rulegraph", "--filegraph", "--d3dag",
              "--report", "--unlock", "--cleanup-metadata", "--cm", "--list-changes", "--lc", "--list-code-changes",
              "--list-input-changes", "--list-params-changes", "--li", "--lp", "--list-untracked", "--lu",
              "--version", "-v", "--help", "-h", "--lint", "--print-compilation", "--containerize",
              "--export-cwl", "--archive", "--delete-all-output", "--delete-temp-output", "--generate-unit-tests",
              "--conda-create-envs-only", "--touch", "-t", "--debug-dag", "--quiet", "-q")
_STOP_SIGNAL_NAMES = ("SIGTERM", "SIGINT", "SIGHUP")


SNAKEMAKE_HELP = """\
usage: python3 src/radrank/envs.py snakemake [--envs LIST] [--torch VARIANT] [SNAKEMAKE ARGS ...]

Builds the core venv and the venvs the run needs (--envs: a comma list of families, 'all', or
'auto' = the families of the config's metrics, the default), makes `module load radrank/<family>`
work (MODULEPATH, BASH_ENV), and runs the core venv's snakemake with --sdm env-modules unless
the arguments choose a deployment method. Everything else goes to snakemake, e.g.
  python3 src/radrank/envs.py snakemake --cores 2
  python3 src/radrank/envs.py snakemake --workflow-profile profiles/slurm
A run prints a line per stage as it completes, then the report and leaderboards (or the failure and the log to
open); RADRANK_VERBOSE=1 (or --verbose) shows Snakemake's whole output; a dry run, a listing or
--quiet goes through as Snakemake prints it. SIGTERM / Ctrl-C stop the run within seconds."""


def run_arguments(argv: list[str]) -> tuple[dict | None, list[str]]:
    """``envs.py snakemake``'s own options (``--envs``, ``--torch``) and the arguments that go to Snakemake verbatim
    (everything else; all after ``--``); the options are None when help is asked before any Snakemake argument."""
    own, rest, args = {"--envs": None, "--torch": None}, list(argv), []
    while rest:
        arg = rest.pop(0)
        name, eq, value = arg.partition("=")
        if arg == "--":
            args += rest
            break
        if name in own:
            own[name] = value if eq else (rest.pop(0) if rest else "")
        elif arg in ("-h", "--help") and not args:
            return None, []
        else:
            args.append(arg)
    return own, args


def config_files(args: list[str]) -> list[str]:
    """The config files a Snakemake command line names (``--configfile(s) A B``, ``--configfile=A``), in order."""
    found, i = [], 0
    while i < len(args):
        name, eq, value = args[i].partition("=")
        i += 1
        if name in ("--configfile", "--configfiles"):
            if eq:
                found.append(value)
            else:
                while i < len(args) and not args[i].startswith("-"):
                    found.append(args[i])
                    i += 1
    return found


def with_deployment(args: list[str], method: str) -> list[str]:
    """The arguments with ``--sdm METHOD`` unless they choose a software deployment method themselves."""
    chosen = ("--sdm", "--software-deployment-method", "--use-conda", "--use-envmodules")
    if any(a.split("=", 1)[0] in chosen for a in args):
        return list(args)
    return [*args, "--sdm", method]  # last: --sdm takes several values, a target must not follow it


def output_mode(args: list[str], environ=None) -> str:
    """How a snakemake run's console output is shown: ``raw`` (a dry run, a listing... or the user's own
    --quiet: as Snakemake prints it), ``verbose`` (RADRANK_VERBOSE=1 or --verbose: Snakemake's whole output, then
    the summary) or ``quiet`` (the default: a line per stage as it completes, the failures, the summary)."""
    environ = os.environ if environ is None else environ
    for arg in args:
        if arg == "--":
            break
        name = arg.split("=", 1)[0]
        if name in _INFO_ARGS or re.fullmatch(r"-[A-Za-z]*n[A-Za-z]*", arg) and "=" not in arg:
            return "raw"
    if "--verbose" in args or environ.get(VERBOSE_VAR, "").strip().lower() not in ("", "0", "no", "false"):
        return "verbose"
    return "quiet"


def _child_setup(parent: int, prctl) -> None:
    """(In the child, before exec.) Its own process group, so that the wrapper alone decides how a signal
    reaches it (forwarded once) and can end what is left of it; and, on Linux, SIGTERM when the wrapper dies."""
    os.setpgid(0, 0)
    if prctl is not None:
        prctl(1, 15, 0, 0, 0)  # PR_SET_PDEATHSIG: SIGTERM
    if os.getppid() != parent:  # the wrapper died before that
        os.kill(os.getpid(), 15)


def _prctl():
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError, ImportError):  # not Linux
        return None


def run_snakemake(cmd: list[str], env: dict | None = None, mode: str | None = None, out=None) -> int:
    """Run snakemake (``cmd``) and return its exit status; its console output is shown in ``mode``
    (:func:`output_mode`). SIGTERM, SIGINT and SIGHUP are forwarded to it (the workflow then stops within
    seconds: radrank.workers.stop_on_signals) and the status is 128 + the signal; if it has not ended
    STOP_WAIT_S seconds later, it is killed with all it started. Nothing it started outlives the wrapper."""
    import queue
    import signal
    import threading

    mode = mode or output_mode(cmd[1:], env)
    out = out or sys.stderr
    console = SnakemakeConsole(out, mode)
    stop = {"signal": None, "at": None, "killed": False, "proc": None}

    def forward(signum, frame):
        if stop["signal"] is None:
            stop["signal"], stop["at"] = signum, time.monotonic()
            console.stopping(signum)
        if stop["proc"] is not None:
            try:
                os.kill(stop["proc"].pid, signum)  # every time: a second Ctrl-C changes nothing there
            except OSError:
                pass

    previous = {}
    if threading.current_thread() is threading.main_thread():
        for name in _STOP_SIGNAL_NAMES:
            signum = getattr(signal, name)
            if signal.getsignal(signum) is not signal.SIG_IGN:  # nohup's SIGHUP, a background job's SIGINT
                previous[signum] = signal.signal(signum, forward)
    proc = stop["proc"] = subprocess.Popen(
        cmd, env=env, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE,
        preexec_fn=lambda parent=os.getpid(), prctl=_prctl(): _child_setup(parent, prctl))
    if stop["signal"] is not None:  # it came while snakemake was being started
        os.kill(proc.pid, stop["signal"])
    lines = queue.Queue()

    def read():
        for raw in iter(proc.stderr.readline, b""):
            lines.put(raw.decode("utf-8", "replace").rstrip("\r\n"))
        lines.put(None)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        eof, code, exited_at = False, None, None
        while not (eof and code is not None):
            try:
                line = lines.get(timeout=0.5)
            except queue.Empty:
                console.tick()
            else:
                if line is None:
                    eof = True
                else:
                    console.feed(line)
            now = time.monotonic()
            code = proc.poll() if code is None else code
            if code is not None and not eof:
                # what it started still holds the pipe: a moment to end, then it is killed
                exited_at = exited_at or now
                if now - exited_at > 2:
                    _kill_group(proc.pid)
                    reader.join(2)
                    eof = True
            elif code is None and stop["at"] is not None and not stop["killed"] and now - stop["at"] > STOP_WAIT_S:
                stop["killed"] = True
                _kill_group(proc.pid)
        _kill_group(proc.pid)  # whatever it left in its process group (normally nothing)
        while True:  # lines read after the loop ended
            try:
                line = lines.get_nowait()
            except queue.Empty:
                break
            if line is not None:
                console.feed(line)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, signal.SIG_DFL if handler is None else handler)
    if stop["signal"] is not None:
        console.finish(code, stopped=stop["signal"], killed=stop["killed"])
        return 128 + stop["signal"]
    console.finish(code)
    return code


def _kill_group(pgid: int) -> None:
    import signal

    try:
        os.killpg(pgid, signal.SIGKILL)
    except OSError:  # none left
        pass


_TIMESTAMP = re.compile(r"\[\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4}\]$")
_JOB_HEAD = re.compile(r"(?:local)?(?:rule|checkpoint) (\w+):$")
_PROGRESS = re.compile(r"(\d+) of (\d+) steps \(.*\) done$")
_FINISHED = re.compile(r"Finished jobid: (\d+) \(Rule: (\w+)\)$")
_NOISE = re.compile(
    r"(Using (?:workflow specific )?profiles? |Assuming unrestricted shared filesystem|Building DAG of jobs"
    r"|Using shell: |Provided cores: |Rules claiming more threads|Provided resources: |Provided remote nodes: "
    r"|Select jobs to execute|Execute \d+ jobs"
    r"|Shell command: |Shutting down, this might take some time|Will exit after finishing currently running jobs"
    r"|Exiting because a job execution failed|Terminating processes on user request|Elapsed time: "
    r"|Conda environments: ignored|Singularity containers: ignored|Group jobs: inactive|host: "
    r"|Waiting (?:at most \d+ seconds )?for (?:missing files|more resources|running jobs)"
    r"|Job \d+ has been submitted with SLURM jobid |Submitted array job with Snakemake IDs |SLURM run ID: "
    r"|Activating environment modules: |Config file \S+ is extended by additional config"
    r"|(?:INFO|DEBUG) [\w.-]+: )")
# a progress bar (tqdm: "Loading weights: 100%|████| 21/21 [00:00<00:00, ...]"), however many redraws a line holds
_PROGRESS_BAR = re.compile(r"^[\s\r]*(?:[^\r|]*\d+%\|[^|]*\|[^\r]*\[[^\]]*\][\s\r]*)+$")
# a library's deprecation notice (its source line follows, indented): not the user's to act on; RADRANK_VERBOSE=1
_LIBRARY_WARNING = re.compile(r"\S*site-packages/\S+:\d+: (?:FutureWarning|DeprecationWarning): ")
_GLUED = re.compile(r"(?<=\S)(?=(?:INFO|DEBUG|WARNING|ERROR) radrank[\w.]*: )")
# what a finished run points to: the report, the leaderboards, a trained MRScore model's card (mrscore_train)
_RESULTS = re.compile(r"(?:^|/)results/(?:report/report\.(?:html|md)|leaderboard/[^/]+\.csv"
                      r"|mrscore/[^/]+/model/MODEL_CARD\.md)$")
_STOPPED_LINE = re.compile(r"stopped: the run was stopped by SIG\w+$")


def _stage(rule: str) -> str:
    """The stage a rule belongs to: score_bleu2_demo_cxr_findings -> score, metaeval_pairs -> metaeval."""
    first = rule.split("_", 1)[0]
    return "generate" if rule == "merge_generated" else first


class SnakemakeConsole:
    """Snakemake's stderr, line by line, shown as a run's few lines (see :func:`output_mode`); what it learns
    (the plan, the progress, the run's files, its failures, its log) makes the summary :meth:`finish` prints."""

    def __init__(self, out, mode: str = "quiet"):
        self.out, self.mode = out, mode
        self.started = time.monotonic()
        self.last_print = self.started
        self.state, self.rule = None, None
        self.total, self.done = None, 0
        self.stage_jobs, self.stage_done, self.stage_since = {}, {}, {}
        self.running = {}  # jobid -> (rule, since)
        self.job_rule = {}  # jobid -> rule
        self.finished_stage = None
        self.files = []  # the files the run's jobs named (input and output), in order
        self.workdir = None
        self.snakemake_log = None
        self.failures = []  # [(rule, line, log or None)]
        self.error = {}  # the job error being read
        self.exception_line = None  # the message of the last exception Snakemake printed
        self.exception_type = None  # and its type
        self.error_record = None  # the last "ERROR name: line" a job logged
        self.last_shown = None  # the last line shown as it came (a message of Snakemake's or of the workflow)
        self.last_written = None  # the last line written, whatever wrote it
        self.nothing_to_do = False
        self.said_stopped = False
        self.stop_signal = None
        self.broken = False

    # -- output --

    def say(self, text: str) -> None:
        self.write(f"radrank: {text}")

    def write(self, line: str) -> None:
        self.last_print = time.monotonic()
        if self.broken:
            return
        try:
            self.out.write(line + "\n")
            self.last_written = line
            self.out.flush()
        except (BrokenPipeError, ValueError, OSError):
            self.broken = True  # `| head`: the run goes on, unseen

    def counter(self) -> str:
        if not self.total:
            return ""
        width = len(str(self.total))
        return f"[{self.done:>{width}}/{self.total}] "

    # -- input --

    def feed(self, line: str) -> None:
        glued = _GLUED.split(line)  # a worker's record written between a line of Snakemake's and its newline
        if len(glued) > 1:
            for part in glued:
                self.feed(part)
            return
        if self.mode != "quiet":
            self.write(line)
        shown = self._read(line)
        if shown and self.mode == "quiet":
            if self.stop_signal is None or line.startswith("radrank:"):
                self.write(line)
            self.last_shown = line

    def _read(self, line: str) -> bool:
        """Learn from one line; whether a quiet run shows it as it is."""
        text, state = line.strip(), self.state
        indented = line.startswith("    ")
        if state == "header":  # Snakemake's banner, up to its blank line
            if text.startswith("Working directory: "):
                self.workdir = text.split(": ", 1)[1]
            if not text:
                self.state = None
            return False
        if state == "stats":
            return self._stats_row(text)
        if state == "job" and indented:
            self._job_item(text)
            return False
        if state == "error" and indented:
            key, _, value = text.partition(": ")
            if key == "log":
                self.error["log"] = value.split(" (check log file", 1)[0].split(", ")[0]
            return False
        if state == "error":
            self._job_failed()
        if state == "exception" and re.match(r"\w+ in file .*, line \d+:$", text):
            self.state, self.exception_type = "exception_message", text.split(" ", 1)[0]
            return False
        if state == "exception_message":  # the exception's message: its first line
            self.exception_line = text
            self.state = "exception"
            return False
        if state == "exception" and line.startswith("  File "):
            return False
        if state == "traceback":  # a job's traceback (in its log)
            if line.startswith(" ") or not text:
                return False
            self.state = None
            return False  # the exception's own line, the traceback's last
        if state == "library_warning":
            self.state = None
            if line.startswith("  "):
                return False
        if state == "removing":  # the list of the failed job's outputs Snakemake removes
            self.state = None
            return False
        if state == "workflow_error":
            self.state = None
            if text == "At least one job did not complete successfully.":
                return False
            return True
        self.state = None
        return self._line(line, text)

    def _line(self, line: str, text: str) -> bool:
        if _LIBRARY_WARNING.match(text):
            self.state = "library_warning"  # its indented source line goes with it
            return False
        if _PROGRESS_BAR.match(line):
            return False
        if not text or text in ("SNAKEMAKE", "=========") or _TIMESTAMP.match(text) or _NOISE.match(line):
            if text == "SNAKEMAKE":
                self.state = "header"
            return False
        if text == "Job stats:":
            self.state = "stats"
            self.stage_jobs = {}
            return False
        head = _JOB_HEAD.match(line)
        if head:
            self.state, self.rule = "job", head.group(1)
            return False
        found = _FINISHED.match(text)
        if found:
            jobid, rule = found.groups()
            self.running.pop(jobid, None)
            stage = _stage(rule)
            self.stage_done[stage] = self.stage_done.get(stage, 0) + 1
            if self.stage_done[stage] == self.stage_jobs.get(stage) and rule != "all":
                self.finished_stage = stage
            return False
        found = _PROGRESS.match(text)
        if found:
            self.done, self.total = int(found.group(1)), int(found.group(2))
            if self.finished_stage and self.mode == "quiet":
                stage, self.finished_stage = self.finished_stage, None
                seconds = time.monotonic() - self.stage_since.get(stage, self.started)
                n = self.stage_jobs[stage]
                self.say(f"{self.counter()}{stage}: {n} job{'' if n == 1 else 's'} done in {_duration(seconds)}")
            return False
        if text.startswith("Error in rule ") and text.endswith(":"):
            self.state, self.error = "error", {"rule": text[len("Error in rule "):-1]}
            return False
        if text == "RuleException:":
            self.state, self.exception_line = "exception", None
            return False
        if text.startswith("Traceback (most recent call last):"):
            self.state = "traceback"
            return False
        if text.startswith("ERROR "):  # a job's failure, as its log has it: its error block follows
            self.error_record = text.split(": ", 1)[-1]
            return False
        if text.startswith("Removing output files of failed job "):
            self.state = "removing"
            return False
        if text.startswith("Complete log(s): "):
            self.snakemake_log = text.split(": ", 1)[1]
            return False
        if text == "WorkflowError:":
            self.state = "workflow_error"
            return False
        if text.startswith("Nothing to be done"):
            self.nothing_to_do = True
            if self.mode == "quiet":
                self.say("nothing to do: every result is up to date")
            return False
        if text.startswith("radrank: the run was stopped by "):
            self.said_stopped = True
        return True

    def _stats_row(self, text: str) -> bool:
        cells = text.split()
        if len(cells) == 2 and cells[1].isdigit():
            if cells[0] == "total":
                self.state = None
                self.total = self.total or int(cells[1])
                if self.mode == "quiet":
                    stages = ", ".join(f"{s} {n}" for s, n in self.stage_jobs.items() if s != "all")
                    self.say(f"{cells[1]} job{'' if cells[1] == '1' else 's'} to run: {stages} "
                             f"(every job's details: {VERBOSE_VAR}=1)")
            else:
                stage = _stage(cells[0])
                self.stage_jobs[stage] = self.stage_jobs.get(stage, 0) + int(cells[1])
        return False

    def _job_item(self, text: str) -> None:
        key, _, value = text.partition(": ")
        if key in ("input", "output"):
            self.files.extend(v for v in value.split(", ") if v)
        elif key == "jobid":
            rule = self.rule or "?"
            self.running[value] = (rule, time.monotonic())
            self.job_rule[value] = rule
            stage = _stage(rule)
            # a stage's start is not printed: stages overlap (one dataset's leaderboard starts while another's
            # ingest runs), so the lines are the stages' ends, in the order they complete, and a long silence
            # says what is running (:meth:`tick`)
            if stage not in self.stage_since and rule != "all":
                self.stage_since[stage] = time.monotonic()

    def _job_failed(self) -> None:
        rule, log_path = self.error.get("rule", "?"), self.error.get("log")
        # a job of Snakemake's process fails with its line (JobFailed); a rule script's line is in its log, and
        # Snakemake only says the command failed
        said = self.exception_line if self.exception_type == "JobFailed" else None
        line = (said or self._logged_error(log_path) or self.exception_line or self.error_record
                or f"rule {rule} failed")
        self.exception_type = None
        self.exception_line = self.error_record = None
        self.error = {}
        before = [f[1] for f in self.failures if not _STOPPED_LINE.search(f[1])]
        self.failures.append((rule, line, log_path))
        if self.mode == "quiet" and not _STOPPED_LINE.search(line):
            # the first failure's line ends the output (:meth:`finish`): said once, there; a later one's here
            said = (f"rule {rule}" if not before else f"rule {rule}, the same error" if line == before[0]
                    else line)
            self.say(f"{self.counter()}FAILED: {said}" + (f" (log: {log_path})" if log_path and log_path not in said
                                                          else ""))

    def _logged_error(self, log_path) -> str | None:
        """The last "ERROR name: line" of a job's log (a rule script's failure is there, not on stderr)."""
        if not log_path:
            return None
        try:
            text = self._path(log_path).read_text(errors="replace")
        except OSError:
            return None
        found = [ln.split(": ", 1)[-1] for ln in text.splitlines() if ln.startswith("ERROR ")]
        return found[-1] if found else None

    def _path(self, path: str) -> Path:
        return Path(self.workdir or ".", path).resolve() if not os.path.isabs(path) else Path(path)

    # -- the end --

    def stopping(self, signum: int) -> None:
        self.stop_signal = signum

    def tick(self) -> None:
        """(Every half second without a line.) A quiet run that has shown nothing for a while says what runs."""
        now = time.monotonic()
        if self.mode != "quiet" or not self.running or now - self.last_print < HEARTBEAT_S or self.stop_signal:
            return
        rules = list(dict.fromkeys(rule for rule, _ in self.running.values()))
        oldest = min(since for _, since in self.running.values())
        more = f" and {len(rules) - 3} more" if len(rules) > 3 else ""
        self.say(f"{self.counter()}running: {', '.join(rules[:3])}{more} (for {_duration(now - oldest)})")

    def results(self) -> list[Path]:
        """The report, leaderboards and model cards that exist: those the run's jobs named; when no job ran, the
        report and leaderboards in results/ (a run that trained a model lists its card, not older leaderboards)."""
        named = [self._path(f) for f in dict.fromkeys(self.files) if _RESULTS.search(f)]
        if not self.files:
            root = Path(self.workdir or ".")
            named = [root / "results/report/report.html", root / "results/report/report.md",
                     *sorted((root / "results/leaderboard").glob("*.csv")),
                     *sorted(root.glob("results/mrscore/*/model/MODEL_CARD.md"))]
        found = [p.resolve() for p in dict.fromkeys(named) if p.is_file()]
        return sorted(found, key=lambda p: (p.parent.name != "report", p.suffix != ".html", str(p)))

    def finish(self, code: int, stopped: int | None = None, killed: bool = False) -> None:
        import signal

        if self.mode == "raw":
            return
        if self.state == "error":
            self._job_failed()
        where = f" (the whole run's log: {self.snakemake_log})" if self.snakemake_log else ""
        if stopped is not None:
            name = signal.Signals(stopped).name
            if killed:
                self.say(f"the run was stopped by {name}: Snakemake had not ended {STOP_WAIT_S} s later and was "
                         "killed with every process it started; rerun the command to go on")
            elif not self.said_stopped:
                self.say(f"the run was stopped by {name}; the interrupted jobs' outputs were removed; "
                         "rerun the command to go on")
            return
        if code == 0:
            if self.mode == "quiet" and not self.nothing_to_do:
                self.say(f"{self.counter()}done in {_duration(time.monotonic() - self.started)}")
            found = self.results()
            if found:
                self.say("results:" if self.mode == "quiet" else "results (the report, the leaderboards, a "
                         "trained model's card):")
                for path in found:
                    self.write(f"  {path}")
            else:
                self.say("this run built no report, leaderboard or model" if self.files
                         else "no report or leaderboard exists yet")
            return
        failures = [f for f in self.failures if not _STOPPED_LINE.search(f[1])] or self.failures
        if failures:
            rule, line, log_path = failures[0]
            more = f" ({len(failures)} jobs failed; each is listed above)" if len(failures) > 1 else ""
            self.say(f"the run failed: {line}{more}")
            if log_path:
                self.say(f"open its log: {self._path(log_path)}{where}")
            elif self.snakemake_log:
                self.say(f"open the run's log: {self.snakemake_log}")
        else:
            last = (self.error_record or self.last_shown or "").strip()
            last = last[len("radrank: "):] if last.startswith("radrank: ") else last
            why = f": {last}" if last else f" (exit status {code})"
            if not self.error_record and self.last_shown and self.last_written == self.last_shown:
                why = ": the error above"  # the line just shown, said once
            self.say(f"the run failed{'' if self.job_rule else ' before its jobs ran'}{why}")
            if self.snakemake_log:
                self.say(f"open the run's log: {self.snakemake_log}")


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, seconds = divmod(int(round(seconds)), 60)
    return f"{minutes} min {seconds:02d} s" if minutes < 60 else f"{minutes // 60} h {minutes % 60:02d} min"
