"""What a run prints (radrank.console.run_snakemake, behind `console.py snakemake` and `make example`): a line per
stage as it completes, with the run's progress, then the report and leaderboards that exist; a failure ends with its one line and
the log to open; RADRANK_VERBOSE=1 (or --verbose) shows Snakemake's whole output, every job's block; a dry run
or a listing goes through as Snakemake prints it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from _workflow import make_workdir
from radrank import console

REPO = Path(__file__).resolve().parents[1]
DRIVER = ("import sys; sys.path.insert(0, {src!r}); from radrank import console; "
          "sys.exit(console.run_snakemake([sys.executable, '-m', 'snakemake', *sys.argv[1:]]))")
RESULT_GLOBS = ("results/report/report.html", "results/report/report.md", "results/leaderboard/*.csv")


def run(workdir: Path, *args, verbose=False):
    env = {k: v for k, v in os.environ.items() if k != console.VERBOSE_VAR}
    if verbose:
        env[console.VERBOSE_VAR] = "1"
    proc = subprocess.run([sys.executable, "-c", DRIVER.format(src=str(REPO / "src")), "--cores", "2", *args],
                          cwd=workdir, env=env, capture_output=True, text=True, timeout=600)
    return proc.returncode, proc.stdout + proc.stderr


def existing_results(workdir: Path) -> list[str]:
    return sorted(str(p.resolve()) for pattern in RESULT_GLOBS for p in workdir.glob(pattern))


def listed_results(lines: list[str]) -> list[str]:
    """The paths after the last "radrank: results:" line, which must end the output."""
    start = max(i for i, line in enumerate(lines) if line.startswith("radrank: results"))
    paths = [line.strip() for line in lines[start + 1:]]
    assert all(line.startswith("  /") for line in lines[start + 1:]), lines[start:]
    return sorted(paths)


@pytest.fixture(scope="module")
def first_run(tmp_path_factory):
    workdir = make_workdir(tmp_path_factory.mktemp("output") / "wd")
    code, out = run(workdir)
    return workdir, code, out


@pytest.mark.workflow
def test_a_run_prints_a_few_lines_per_stage_and_ends_with_the_results(first_run):
    workdir, code, out = first_run
    assert code == 0, out[-4000:]
    lines = out.rstrip().splitlines()
    # Snakemake's own output of the example is ~650 lines (every job's block, the report's 60 inputs twice)
    assert len(lines) <= 30, out
    assert not any(re.match(r"\s*(localrule|input:|output:|reason:|Finished jobid)", line) for line in lines), out
    total = int(re.search(r"^radrank: (\d+) jobs to run: ingest \d+", out, re.M).group(1))
    assert total > 20
    # one line per stage, when it completes: in completion order, so the counter never goes back, and no stage
    # seems to start before the one it waits for has ended (stages overlap across datasets)
    ends = re.findall(rf"^radrank: \[ *(\d+)/{total}\] (\w+): \d+ jobs? done in ", out, re.M)
    assert sorted(stage for _, stage in ends) == sorted(["ingest", "metaeval", "cases", "score", "bootstrap",
                                                          "leaderboard", "report"]), out
    assert [int(n) for n, _ in ends] == sorted(int(n) for n, _ in ends), out
    assert [stage for _, stage in ends].index("ingest") < [stage for _, stage in ends].index("leaderboard")
    assert "started" not in out, out
    assert f"radrank: [{total}/{total}] done in " in out
    listed = listed_results(lines)
    assert listed == existing_results(workdir) and len(listed) == 5, out  # 3 leaderboards, the report twice
    assert all(Path(p).is_file() for p in listed)


@pytest.mark.workflow
def test_a_run_with_nothing_to_do_says_so_and_lists_the_results(first_run):
    workdir, _, _ = first_run
    code, out = run(workdir)
    assert code == 0, out[-4000:]
    lines = out.rstrip().splitlines()
    assert lines[0] == "radrank: nothing to do: every result is up to date", out
    assert listed_results(lines) == existing_results(workdir)


@pytest.mark.workflow
def test_verbose_shows_every_jobs_block(first_run):
    workdir, _, _ = first_run
    code, out = run(workdir, "--forcerun", "leaderboard", verbose=True)
    assert code == 0, out[-4000:]
    assert re.search(r"^localrule leaderboard:$", out, re.M) and re.search(r"^localrule report:$", out, re.M)
    assert re.search(r"^    input: results/leaderboard/", out, re.M)  # the report's inputs, as Snakemake lists them
    assert "Finished jobid" in out and "steps (100%) done" in out
    assert listed_results(out.rstrip().splitlines()) == existing_results(workdir)


@pytest.mark.workflow
def test_a_failed_run_ends_with_its_line_and_the_log_to_open(first_run):
    workdir, _, _ = first_run
    submission = workdir / "example/demo_cxr/hasty.json"
    kept = submission.read_bytes()
    submission.write_text("{not json")
    try:
        code, out = run(workdir)
    finally:
        submission.write_bytes(kept)
    assert code != 0
    lines = out.rstrip().splitlines()
    assert len(lines) <= 15, out
    assert re.fullmatch(r"radrank: the run failed: file example/demo_cxr/hasty\.json: is not valid JSON.*",
                        lines[-2]), out
    log = re.fullmatch(r"radrank: open its log: (\S+) \(the whole run's log: (\S+)\)", lines[-1])
    assert log, out
    job_log, run_log = map(Path, log.groups())
    assert job_log.is_absolute() and job_log.is_relative_to(workdir / "logs/ingest/demo_cxr")
    assert "is not valid JSON" in job_log.read_text() and run_log.is_file()
    # said once: the FAILED line names the job, the end says its error
    failed = re.findall(r"^radrank: \[ *\d+/\d+\] FAILED: (.*)$", out, re.M)
    assert failed == ["rule ingest (log: logs/ingest/demo_cxr/findings/hasty.log)",
                      "rule ingest, the same error (log: logs/ingest/demo_cxr/reports/hasty.log)"] or failed == [
        "rule ingest (log: logs/ingest/demo_cxr/reports/hasty.log)",
        "rule ingest, the same error (log: logs/ingest/demo_cxr/findings/hasty.log)"], out  # either may fail first
    assert out.count("is not valid JSON") == 1, out
    assert "Traceback" not in out and "RuleException" not in out


def test_how_the_output_is_shown():
    assert console.output_mode(["--cores", "2"], {}) == "quiet"
    assert console.output_mode(["--cores", "2"], {console.VERBOSE_VAR: "1"}) == "verbose"
    assert console.output_mode(["--cores", "2", "--verbose"], {}) == "verbose"
    assert console.output_mode(["--cores", "2"], {console.VERBOSE_VAR: "0"}) == "quiet"
    for asked in (["-n"], ["-np"], ["--dry-run"], ["--unlock"], ["--dag"], ["--list-rules"], ["--summary"],
                  ["--quiet", "rules"]):
        assert console.output_mode(["--cores", "2", *asked], {}) == "raw", asked


@pytest.mark.workflow
def test_a_dry_run_goes_through_as_snakemake_prints_it(first_run):
    workdir, _, _ = first_run
    code, out = run(workdir, "-n", "--forcerun", "report")
    assert code == 0, out[-4000:]
    assert re.search(r"^(local)?rule report:$", out, re.M) and "This was a dry-run" in out
    assert "radrank: results" not in out


def test_the_console_reads_snakemakes_lines(tmp_path, monkeypatch):
    """The quiet console on lines as Snakemake 9 writes them: the plan, a job's start, a worker's record glued to
    one of Snakemake's lines (two processes write one pipe), the line saying which jobs run after a silence,
    and the end's results."""
    import io

    (tmp_path / "results/leaderboard").mkdir(parents=True)
    (tmp_path / "results/leaderboard/d_findings.csv").write_text("Rank\n")
    out = io.StringIO()
    shown = console.SnakemakeConsole(out, "quiet")
    for line in ["", "SNAKEMAKE", "=========", f"  Working directory: {tmp_path}", "", "Job stats:",
                 "job                   count", "------------------  -------", "score_bleu2_d_findings        1",
                 "leaderboard                   1", "all                           1",
                 "total                         3", "", "[Wed Dec  2 02:07:44 2026]",
                 "localrule score_bleu2_d_findings:", "    input: results/pairs/d/findings/m.parquet",
                 "    output: results/scores/d/findings/m/bleu2.parquet", "    jobid: 2", "    resources: tmpdir=/tmp",
                 "Shell command: None"]:
        shown.feed(line)
    monkeypatch.setattr(console, "HEARTBEAT_S", 0)
    shown.tick()
    shown.feed("Finished jobid: 2 (Rule: score_bleu2_d_findings)INFO radrank: bleu2 on d/findings: 1 models")
    shown.feed("1 of 3 steps (33%) done")
    shown.feed("WARNING radrank: something worth seeing")
    shown.feed("localrule leaderboard:")
    shown.feed("    output: results/leaderboard/d_findings.csv")
    shown.feed("    jobid: 1")
    shown.finish(0)
    assert re.sub(r"\d+\.\d s", "T", out.getvalue()).splitlines() == [
        "radrank: 3 jobs to run: score 1, leaderboard 1 (every job's details: RADRANK_VERBOSE=1)",
        "radrank: [0/3] running: score_bleu2_d_findings (for T)",  # a 3-job run: the counter's width is one digit
        "radrank: [1/3] score: 1 job done in T",
        "WARNING radrank: something worth seeing",
        "radrank: [1/3] done in T",
        "radrank: results:",
        f"  {(tmp_path / 'results/leaderboard/d_findings.csv').resolve()}",
    ]


def test_a_training_run_ends_with_the_model_card_it_wrote_not_older_leaderboards(tmp_path):
    """make mrscore-demo's first stage builds no leaderboard: the end names the trained model's card, not the
    leaderboards an earlier run left in results/."""
    import io

    (tmp_path / "results/leaderboard").mkdir(parents=True)
    (tmp_path / "results/leaderboard/d_findings.csv").write_text("Rank\n")  # an earlier run's
    card = tmp_path / "results/mrscore/demo/model/MODEL_CARD.md"
    card.parent.mkdir(parents=True)
    card.write_text("# card\n")
    out = io.StringIO()
    shown = console.SnakemakeConsole(out, "quiet")
    preamble = ["", "SNAKEMAKE", "=========", f"  Working directory: {tmp_path}", "", "Job stats:",
                "job                   count", "------------------  -------", "mrscore_select                1",
                "total                         1", "", "[Wed Dec  2 02:07:44 2026]"]
    for line in [*preamble, "localrule mrscore_select:",
                 "    input: results/mrscore/demo/train/train_state.json",
                 "    output: results/mrscore/demo/selection.csv, results/mrscore/demo/model/MODEL_CARD.md",
                 "    jobid: 1"]:
        shown.feed(line)
    shown.finish(0)
    lines = out.getvalue().splitlines()
    assert lines[-2:] == ["radrank: results:", f"  {card.resolve()}"]
    out = io.StringIO()
    shown = console.SnakemakeConsole(out, "quiet")
    for line in [*preamble, "localrule mrscore_refs:", "    output: results/x.parquet", "    jobid: 1"]:
        shown.feed(line)
    shown.finish(0)
    assert out.getvalue().splitlines()[-1] == "radrank: this run built no report, leaderboard or model"


def test_a_quiet_run_drops_progress_bars_module_lines_and_library_deprecations():
    """What the model-loading jobs print (make mrscore-demo printed 148 lines against the example's 35): progress
    bars, Environment Modules' activation lines and third-party deprecation notices are not shown; a warning
    that is the user's to act on is."""
    import io

    out = io.StringIO()
    shown = console.SnakemakeConsole(out, "quiet")
    noise = ["Activating environment modules: radrank/judge",
             "Config file config/config.yaml is extended by additional config specified via the command line.",
             "\rLoading weights:   0%|          | 0/21 [00:00<?, ?it/s]\rLoading weights: 100%|██| 21/21 "
             "[00:00<00:00, 10596.77it/s]",
             "Writing model shards: 100%|███| 1/1 [00:00<00:00, 274.21it/s]",
             "/x/.venvs/train/lib/python3.11/site-packages/transformers/modeling_utils.py:3312: FutureWarning: "
             "`is_gradient_checkpointing` is deprecated", "  warnings.warn("]
    for line in noise:
        shown.feed(line)
    shown.feed("/x/src/radrank/metrics/green.py:10: UserWarning: 3 answers had no verdict")
    assert out.getvalue().splitlines() == ["/x/src/radrank/metrics/green.py:10: UserWarning: 3 answers had no verdict"]
    loud = io.StringIO()
    shown = console.SnakemakeConsole(loud, "verbose")
    for line in noise:
        shown.feed(line)
    assert loud.getvalue() == "".join(f"{line}\n" for line in noise)  # RADRANK_VERBOSE=1 shows everything


def test_an_error_before_any_job_is_said_once():
    """A line the workflow printed when it loaded (a sheet's missing file) is the run's error: the end points
    at it instead of repeating it; an error the console did not show is said at the end."""
    import io

    out = io.StringIO()
    shown = console.SnakemakeConsole(out, "quiet")
    error = "radrank: sheet config/submissions.tsv, row 7 (line 8): path nope.json does not exist"
    shown.feed(error)
    shown.finish(1)
    assert out.getvalue().splitlines() == [error, "radrank: the run failed before its jobs ran: the error above"]
    out = io.StringIO()
    shown = console.SnakemakeConsole(out, "quiet")
    shown.feed("ERROR radrank: the config is broken")  # a logged record: not shown as it came
    shown.finish(1)
    assert out.getvalue().splitlines() == ["radrank: the run failed before its jobs ran: the config is broken"]
