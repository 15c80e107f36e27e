"""The workflow's Snakemake files are snakefmt-clean, as the snakemake-workflow-catalog checks them
(`snakefmt --check Snakefile workflow/Snakefile rules/*.smk`, settings from pyproject.toml's [tool.snakefmt])."""

from __future__ import annotations

import subprocess
import sys

from _workflow import REPO


def snakefmt(*args, cwd=REPO):
    return subprocess.run([sys.executable, "-m", "snakefmt", *args], cwd=cwd, capture_output=True, text=True)


def workflow_files() -> list[str]:
    return ["Snakefile", "workflow/Snakefile", *sorted(str(p.relative_to(REPO)) for p in (REPO / "rules").glob("*.smk"))]


def test_snakefmt_is_pinned_in_core():
    pins = (REPO / "envs/core.yaml").read_text()
    version = snakefmt("--version").stdout.split()[-1]
    assert f"- snakefmt=={version}\n" in pins


def test_workflow_files_are_snakefmt_clean():
    files = workflow_files()
    assert len(files) >= 2 and "rules/score.smk" in files
    proc = snakefmt("--check", *files)
    assert proc.returncode == 0, (
        "snakefmt would reformat these files; run `.venvs/core/bin/snakefmt Snakefile rules/`:\n"
        + snakefmt("--diff", *files).stdout[-6000:])


def test_check_fails_on_an_unformatted_file(tmp_path):
    """The check above is not vacuous: with the project's settings, a misformatted rule fails it."""
    (tmp_path / "pyproject.toml").write_text((REPO / "pyproject.toml").read_text())
    (tmp_path / "Snakefile").write_text('rule a:\n  output: "a.txt"\n  shell: "touch {output}"\n')
    assert snakefmt("--check", "Snakefile", cwd=tmp_path).returncode == 1
    assert snakefmt("Snakefile", cwd=tmp_path).returncode == 0
    assert snakefmt("--check", "Snakefile", cwd=tmp_path).returncode == 0
    assert (tmp_path / "Snakefile").read_text() == 'rule a:\n    output:\n        "a.txt",\n    shell:\n        "touch {output}"\n'


def test_project_line_length_applies(tmp_path):
    """pyproject.toml's line length (120, not black's 88) is the one snakefmt formats to."""
    (tmp_path / "pyproject.toml").write_text((REPO / "pyproject.toml").read_text())
    call = "        job=PLAN.score_job(score_rule, first_argument_name, second_argument_name).params(),\n"
    assert 88 < len(call.rstrip()) <= 120
    text = f'rule a:\n    output:\n        "a.txt",\n    params:\n{call}    shell:\n        "touch {{output}}"\n'
    (tmp_path / "Snakefile").write_text(text)
    assert snakefmt("--check", "Snakefile", cwd=tmp_path).returncode == 0
    (tmp_path / "pyproject.toml").unlink()  # black's default 88 wraps the same call
    assert snakefmt("--check", "Snakefile", cwd=tmp_path).returncode == 1
