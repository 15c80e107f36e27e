"""The `radrank` command (radrank.cli) and what `pip install` declares (pyproject.toml)."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path
from types import SimpleNamespace

import pytest

from _workflow import make_workdir
from radrank import cli, envs

REPO = Path(__file__).resolve().parents[1]


def radrank(*args, cwd):
    return subprocess.run([sys.executable, "-m", "radrank.cli", *args], cwd=cwd, capture_output=True,
                          text=True, env={**__import__("os").environ, "PYTHONPATH": str(REPO / "src")})


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return make_workdir(tmp_path_factory.mktemp("cli") / "wd")


def test_results_lists_every_leaderboard_and_the_report_with_absolute_paths(workdir):
    out = radrank("results", cwd=workdir)
    assert out.returncode == 0, out.stderr
    for name in ("demo_cxr_findings.csv", "demo_cxr_reports.csv", "demo_clinic_findings.csv"):
        assert f"{workdir / 'results/leaderboard' / name}  (not built yet)" in out.stdout
    assert f"{workdir / 'results/report/report.md'}  (not built yet)" in out.stdout
    assert ("Leaderboards (3: one per dataset x split of this config) and the report (6 files: index, summary, appendix "
            "and a page per dataset x split):") in out.stdout
    assert "9 of the 9 files this config expects are not built yet" in out.stdout
    built = workdir / "results/leaderboard/demo_cxr_findings.csv"
    built.parent.mkdir(parents=True)
    built.write_text("Rank\n")
    try:
        out = radrank("results", cwd=workdir)
        assert f"  {built}\n" in out.stdout and "8 of the 9 files this config expects are not built yet" in out.stdout
    finally:
        built.unlink()


@pytest.mark.workflow  # a Snakemake dry run
def test_status_says_what_would_run(workdir):
    out = radrank("status", cwd=workdir)
    assert out.returncode == 0, out.stderr
    assert "Environments the config needs" in out.stdout and "  core " in out.stdout
    # each count says what it counts, of how many this config expects
    assert ("  leaderboards: 0 of 3 exist (one per dataset × split; results/leaderboard/<dataset>_<split>.csv)"
            in out.stdout), out.stdout
    assert ("  report files: 0 of 6 exist (results/report/report.md, results/report/report.html, "
            "results/report/appendix.md and 3 pages, one per dataset × split)") in out.stdout
    assert ("  meta-evaluation sets: 0 of 2 scored (radpref, radjudge; results/metaeval/<set>/agreement.csv)"
            in out.stdout)
    table = out.stdout.split("What would run (`radrank run` starts it):\n", 1)[1]
    assert "ingest" in table and "report" in table and table.strip().splitlines()[-1].split()[0] == "total"


@pytest.mark.workflow  # a Snakemake dry run
def test_status_reports_the_checkout_it_runs_in_not_the_one_radrank_came_from(workdir):
    """This `radrank` runs the code of REPO (PYTHONPATH, as an editable install from another checkout would);
    run in the workdir, it reports the workdir's .venvs and says whose code it runs."""
    env = {**__import__("os").environ, "PYTHONPATH": str(REPO / "src")}
    env.pop("RADRANK_ENVS_DIR", None)  # the default: each checkout's own .venvs
    out = subprocess.run([sys.executable, "-m", "radrank.cli", "status"], cwd=workdir, capture_output=True,
                         text=True, env=env)
    assert out.returncode in (0, 1), out.stderr  # 1: the dry run may fail; the environments are said first
    assert f"Checkout: {workdir} (config: config/config.yaml)" in out.stdout
    assert f"Environments the config needs (venv route), in {workdir / '.venvs'}:" in out.stdout
    assert f"  core           not built  {workdir / '.venvs/core'}" in out.stdout
    section = out.stdout.split("Environments the config needs", 1)[1].split("Results of this config", 1)[0]
    assert str(REPO / ".venvs") not in section
    assert f"was installed from another checkout and runs its code, {REPO / 'src'}" in out.stdout


@pytest.mark.workflow  # a Snakemake dry run
def test_run_passes_snakemake_arguments_through_on_the_here_route(workdir):
    out = radrank("run", "--route", "here", "--dry-run", "--quiet", "rules", cwd=workdir)
    assert out.returncode == 0, out.stderr
    assert "route: here (environments needed: core)" in out.stderr
    assert "-m snakemake --dry-run --quiet rules" in out.stderr
    assert "Job stats" in out.stdout + out.stderr


def test_run_with_a_bad_config_is_one_clear_error(workdir):
    bad = workdir / "bad.yaml"
    bad.write_text("submissions: config/submissions.tsv\nmetrics: [bleu2, nosuchmetric]\n")
    out = radrank("run", "--configfile", str(bad), cwd=workdir)
    assert out.returncode == 2
    assert "unknown metric(s) ['nosuchmetric']" in out.stderr and "Traceback" not in out.stderr


def test_run_checks_the_models_before_building_any_environment(workdir, tmp_path):
    """A model metric whose weights are missing: one line naming the model and its config key, exit 2,
    and no environment build or Snakemake started (the venv route would build GBs of torch first)."""
    config = workdir / "panel.yaml"
    config.write_text("submissions: config/submissions.tsv\nmetrics: [bleu2, bertscore]\n")
    env = {**__import__("os").environ, "PYTHONPATH": str(REPO / "src"), "HF_HOME": str(tmp_path / "hf"),
           "RADRANK_ENVS_DIR": str(tmp_path / "envs")}
    env.pop("RADRANK_WEIGHTS_CHECK", None)
    out = subprocess.run([sys.executable, "-m", "radrank.cli", "run", "--route", "venv", "--configfile", str(config)],
                         cwd=workdir, capture_output=True, text=True, env=env)
    assert out.returncode == 2, out.stderr
    assert "metric 'bertscore': model 'distilroberta-base' is not available locally" in out.stderr
    assert "metric_settings.bertscore.model" in out.stderr and "Traceback" not in out.stderr
    assert not (tmp_path / "envs").exists() and "route:" not in out.stderr


def test_outside_a_checkout_is_one_clear_error(tmp_path):
    out = radrank("status", cwd=tmp_path)
    assert out.returncode == 2
    assert f"{tmp_path} has no Snakefile: run radrank in the radrank checkout" in out.stderr


def test_route_choice():
    core_only = SimpleNamespace(envs=lambda: ["core"], generation_envs=lambda: [])
    with_models = SimpleNamespace(envs=lambda: ["core", "rexrank"], generation_envs=lambda: [])
    assert cli.choose_route("auto", core_only) == "here"  # snakemake is importable in the test env
    assert cli.choose_route("auto", with_models) == "venv"
    assert cli.choose_route("conda", core_only) == "conda"
    assert cli.run_command("here", ["--cores", "4"], slurm=True)[1:] == [
        "-m", "snakemake", "--workflow-profile", "profiles/slurm", "--cores", "4"]
    assert cli.run_command("conda", [], slurm=False)[1:] == ["-m", "snakemake", "--sdm", "conda"]


def test_config_files_follow_snakemake_arguments():
    assert cli.config_files(["--cores", "2"]) == ["config/config.yaml"]
    assert cli.config_files(["--configfile", "a.yaml", "b.yaml", "-n"]) == ["a.yaml", "b.yaml"]
    assert cli.config_files(["--configfile=a.yaml"]) == ["a.yaml"]


def test_job_table_reads_a_dry_run():
    out = "Building DAG of jobs...\nJob stats:\njob      count\n-----  -----\ningest   2\ntotal    2\n\nJob stats:\n..."
    assert cli.job_table(out) == ["job      count", "-----  -----", "ingest   2", "total    2"]
    assert cli.job_table("Nothing to be done (all requested files are present and up to date).") == []


# --- pip install -------------------------------------------------------------------------------------


def test_pip_dependencies_are_the_core_env_and_every_family_is_an_extra():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert set(project["project"]["dynamic"]) == {"dependencies", "optional-dependencies"}
    dynamic = project["tool"]["setuptools"]["dynamic"]
    assert dynamic["dependencies"] == {"file": ["envs/requirements/core.in"]}
    extras = dynamic["optional-dependencies"]
    families = sorted(f for f in envs.families() if f != "core")
    assert sorted(extras) == families
    for family in families:
        assert extras[family] == {"file": [f"envs/requirements/{family}.in"]}
    assert "include envs/requirements/*.in" in (REPO / "MANIFEST.in").read_text()  # the sdist carries them
    assert project["project"]["scripts"]["radrank"] == "radrank.cli:main"
    core_in = (REPO / "envs/requirements/core.in").read_text()
    for needed in ("snakemake", "rouge-score", "fast-bleu", "nltk"):  # what `snakemake --cores 2` imports
        assert needed in core_in


def test_results_and_clean_tell_another_sheets_outputs_from_this_configs(tmp_path):
    """After switching sheets, results/ holds the old sheet's leaderboards, pages and per-group folders, and the
    report index links to its pages: `results` says which belong to this config, `clean -n` lists the others,
    `clean` removes them and nothing of this config."""
    wd = make_workdir(tmp_path / "wd")
    sheet = wd / "config/submissions.tsv"
    sheet.write_text("".join(line for line in sheet.read_text().splitlines(True) if "demo_clinic" not in line
                             and "template" not in line))  # this config: careful and hasty on demo_cxr
    ours = ["results/leaderboard/demo_cxr_findings.csv", "results/report/demo_cxr_findings.html",
            "results/report/report.md", "results/pairs/demo_cxr/findings/hasty.parquet",
            "results/pairs/demo_cxr/findings/hasty.drops.csv", "results/scores/demo_cxr/reports/bleu2/careful.parquet",
            "results/stats/demo_cxr/findings/summary.parquet", "results/cases/demo_cxr/findings.parquet",
            "results/summary/demo_cxr/findings/careful/results.csv", "results/metaeval/radpref/agreement.csv",
            "results/pairs/metaeval-radpref/metaeval/candidates.parquet", "results/mrscore/demo/model/MODEL_CARD.md"]
    theirs = ["results/leaderboard/demo_clinic_findings.csv", "results/report/demo_clinic_findings.html",
              "results/pairs/demo_clinic/findings/careful.parquet",
              "results/scores/demo_clinic/findings/bleu2/careful.parquet",
              "results/stats/demo_clinic/findings/summary.parquet", "results/cases/demo_clinic/findings.parquet",
              "results/summary/demo_clinic/findings/careful/results.csv",
              "results/scores/demo_cxr/findings/bleu2/template.parquet",
              "results/pairs/demo_cxr/findings/template.parquet", "results/pairs/demo_cxr/findings/template.drops.csv",
              "results/metaeval/rexval/agreement.csv", "results/pairs/metaeval-rexval/metaeval/candidates.parquet"]
    for name in ours + theirs:
        (wd / name).parent.mkdir(parents=True, exist_ok=True)
        (wd / name).write_text("x\n")
    index = wd / "results/report/report.html"
    index.write_text('<a href="#overview">Overview</a><a href="demo_clinic_findings.html">demo_clinic</a>'
                     '<a href="demo_cxr_findings.html">p</a><a href="demo_cxr_reports.html">p</a>')
    listed = {str(wd / p) for p in ("results/leaderboard/demo_clinic_findings.csv",
                                    "results/report/demo_clinic_findings.html", "results/cases/demo_clinic/findings.parquet",
                                    "results/pairs/demo_cxr/findings/template.parquet",
                                    "results/pairs/demo_cxr/findings/template.drops.csv",
                                    "results/scores/demo_cxr/findings/bleu2/template.parquet")} | {
        str(wd / p) + "/" for p in ("results/pairs/demo_clinic", "results/scores/demo_clinic", "results/stats/demo_clinic",
                                    "results/summary/demo_clinic",
                                    "results/metaeval/rexval", "results/pairs/metaeval-rexval")}
    out = radrank("results", cwd=wd)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    start = lines.index("Not of this config (12: another sheet's datasets x splits, models or meta-evaluation sets; "
                        "`radrank clean` removes them, `radrank clean -n` lists them first):")
    assert {line.strip() for line in lines[start + 1:start + 13]} == listed, out.stdout
    assert lines[start + 13].startswith("Per-model summaries: ")
    assert (f"  {index}  (of another config: it covers demo_clinic_findings.html, demo_cxr_findings.html, "
            "demo_cxr_reports.html, this config has demo_cxr_findings.html, demo_cxr_reports.html; radrank run "
            "rebuilds it)") in lines
    out = radrank("clean", "-n", cwd=wd)
    assert out.stdout.splitlines()[0] == "Would remove 12 output(s) this config does not produce:"
    assert {line.strip() for line in out.stdout.splitlines()[1:]} == listed
    assert all((wd / p).exists() for p in theirs)  # a dry run removes nothing
    out = radrank("clean", cwd=wd)
    assert out.returncode == 0 and out.stdout.splitlines()[0] == "Removing 12 output(s) this config does not produce:"
    assert out.stdout.splitlines()[-1] == "The report index covers other datasets x splits: radrank run rebuilds it"
    assert not any((wd / p).exists() for p in theirs) and all((wd / p).exists() for p in ours)
    assert radrank("clean", cwd=wd).stdout == "Nothing to remove: everything in results/ is of this config\n"
