"""Per-family pinned environments (src/radrank/envs.py): env files, locking, venv builds, and the
proof that one workflow run executes rules in environments with conflicting pins.

The tests that build environments or ask PyPI need the package registry; RADRANK_SKIP_ENV_BUILDS=1
skips them (offline). `make test` (and so .ci/run) runs them.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
from radrank import console, envs, metrics  # noqa: E402

ENVS_PY = REPO / "src" / "radrank" / "envs.py"
FAMILIES = envs.families()
TORCH_FAMILIES = [f for f in FAMILIES if envs.read_spec(f).torch]
needs_builds = pytest.mark.skipif(bool(os.environ.get("RADRANK_SKIP_ENV_BUILDS")),
                                  reason="RADRANK_SKIP_ENV_BUILDS is set (offline)")


def pins(family) -> dict:
    return {envs.canonical(p.partition("==")[0]): p.partition("==")[2] for p in envs.read_spec(family).pins}


# --- the env files ---------------------------------------------------------------------------------


def test_every_family_has_an_env_file_and_its_loose_input():
    assert set(FAMILIES) >= {"core", "rexrank", "ratescore", "radeval", "crimson", "judge"}
    for family in FAMILIES:
        assert envs.requirements_file(family).is_file(), family


@pytest.mark.parametrize("family", FAMILIES)
def test_env_file_is_a_conda_file_whose_pip_list_is_the_pinned_lock(family):
    doc = yaml.safe_load(envs.env_file(family).read_text())
    assert doc["name"] == f"radrank-{family}"
    assert "conda-forge" in doc["channels"]
    deps = doc["dependencies"]
    assert "python=3.11" in deps and "pip" in deps
    pip = next(d["pip"] for d in deps if isinstance(d, dict))
    assert pip == envs.read_spec(family).pins  # our stdlib reader sees what conda sees
    assert doc["variables"] == {"RADRANK_ENV": family}  # conda sets it on activation
    assert all(re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*==[0-9][A-Za-z0-9.!]*", p) for p in pip), \
        "every entry an exact pin without a local label (+cpu) or -r include"
    assert "torchvision" not in pins(family)


@pytest.mark.parametrize("family", FAMILIES)
def test_lock_satisfies_every_loose_requirement(family):
    locked = pins(family)
    for line in envs.requirements_file(family).read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        req = Requirement(line)
        name = envs.canonical(req.name)
        assert name in locked, f"{family}: {req.name} from the .in is not in the lock"
        assert req.specifier.contains(locked[name], prereleases=True), f"{family}: {name}=={locked[name]} vs {req}"


def test_family_contents_the_workflow_relies_on():
    core = pins("core")
    assert core["snakemake"] == "9.27.1" and core["snakemake-executor-plugin-slurm"] == "2.8.0"
    assert core["fast-bleu"] == "0.0.90"
    assert {"pandas", "pyarrow", "numpy", "scipy", "rouge-score", "nltk", "pycocoevalcap", "pyyaml",
            "jsonschema", "pytest"} <= set(core)
    assert "torch" not in core
    for family in TORCH_FAMILIES:
        assert pins(family)["torch"] == "2.13.0", family
        assert {"pandas", "pyarrow", "pytest"} <= set(pins(family)), family
    rexrank = pins("rexrank")
    assert rexrank["transformers"] == "4.57.6" and int(rexrank["huggingface-hub"].split(".")[0]) < 1
    assert (rexrank["bert-score"], rexrank["radgraph"], rexrank["f1chexbert"]) == ("0.3.13", "0.1.18", "0.0.2")
    assert "scikit-learn" in rexrank
    ratescore = pins("ratescore")
    assert ratescore["ratescore"] == "0.6.0" and "medspacy" in ratescore
    assert int(ratescore["numpy"].split(".")[0]) < 2
    # the conflict the environment proof below runs into on purpose
    for family in ("ratescore", "radeval", "crimson", "judge"):
        assert pins(family)["transformers"].startswith("5."), family


def test_every_metric_family_and_every_rule_has_both_routes():
    """Each metric's family has an env file; every script rule names a conda env file, the same family's
    Apptainer image (config `containers`) and loads the same family's venv through envmodules; the others are the core env's in-process rules, whose run:
    block is one call of radrank.jobs.run_in_process (they run in Snakemake's own environment, the core env)."""
    for name in metrics.names():
        family = metrics.get(name).family
        assert family in FAMILIES, f"metric {name} declares family {family!r}, which has no envs/{family}.yaml"
    for path in sorted((REPO / "rules").glob("*.smk")):
        text = path.read_text()
        condas = re.findall(r'conda:\s*f?"\.\./envs/([^"]+)\.yaml"\s*containerized:\s*family_image\((.+)\)\s*'
                            r'envmodules:\s*f?"radrank/([^"]+)"', text)
        assert len(condas) == text.count("conda:"), f"{path.name}: a conda: directive without its image and envmodules"
        assert all(c == m for c, _, m in condas), f"{path.name}: {condas}"
        # the image (config `containers`) is the same family's: family_image("train") or family_image(env_name)
        same = lambda a, b: a.replace("'", '"') == b.replace("'", '"')  # noqa: E731 (snakefmt's quotes)
        assert all(same(image, f'"{c}"') or same(image, c[1:-1]) for c, image, _ in condas), f"{path.name}: {condas}"
        assert text.count("script:") == text.count("conda:"), f"{path.name}: a script rule without its env"
        for call in re.findall(r"run:\n\s*(.*)", text):
            # (the report's job also gets the threads it was given: rules/common.smk `threaded`)
            pattern = (r"workers\.run_in_process\((jobs|mrscore_jobs)\.\w+, rule, (params|threaded\(params, "
                       r"threads\)), input, output, log, config, workflow\)")
            assert re.fullmatch(pattern, call), call


def test_env_file_reader_rejects_anything_but_exact_pins(tmp_path, monkeypatch):
    monkeypatch.setenv("RADRANK_ENV_SPECS", str(tmp_path))
    head = "name: x\ndependencies:\n  - python=3.11\n  - pip\n  - pip:\n"
    for bad in ("      - numpy\n", "      - -r requirements.txt\n", "      - numpy>=1\n",
                "      - numpy==1.0\n      - NumPy==1.1\n"):
        (tmp_path / "x.yaml").write_text(head + bad)
        with pytest.raises(envs.EnvError):
            envs.read_spec("x")
    (tmp_path / "x.yaml").write_text(head + "      - numpy==1.26.4  # comment\n      - 'six==1.17.0'\n"
                                     "  - something-after\n")
    spec = envs.read_spec("x")
    assert spec.pins == ["numpy==1.26.4", "six==1.17.0"] and spec.python == "3.11"


def test_build_key_follows_pins_python_and_torch_build():
    spec = envs.read_spec("rexrank")
    key = spec.key("cpu")
    assert key == envs.read_spec("rexrank").key("cpu")
    assert key != spec.key("cuda")
    assert key != envs.EnvSpec("rexrank", spec.python, spec.pins[:-1]).key("cpu")
    assert key != envs.EnvSpec("rexrank", "3.12", spec.pins).key("cpu")
    core = envs.read_spec("core")
    assert core.torch is None and core.key("cpu") == core.key("cuda") == core.key(None)


def test_torch_build_selection(monkeypatch, tmp_path):
    monkeypatch.setattr(envs, "pip_find_links", lambda: [str(tmp_path)])
    # a wheel folder without this torch: PyTorch's CPU index as well
    assert envs.torch_sources("cpu", "2.13.0")[0] == ["--find-links", str(tmp_path), "--torch-backend", "cpu"]
    (tmp_path / "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl").touch()
    options, rewrites = envs.torch_sources("cpu", "2.13.0")
    assert options == ["--find-links", str(tmp_path)] and rewrites == {"torch": "torch==2.13.0+cpu"}
    monkeypatch.setattr(envs, "pip_find_links", lambda: [])
    assert envs.torch_sources("cpu", "2.13.0") == (["--torch-backend", "cpu"], {"torch": "torch==2.13.0+cpu"})
    # CUDA builds never use the local CPU wheel folder
    assert envs.torch_sources("cuda", "2.13.0") == ([], {"torch": "torch==2.13.0"})
    assert envs.torch_sources("cu126", "2.13.0") == (["--torch-backend", "cu126"], {"torch": "torch==2.13.0+cu126"})
    assert envs.torch_sources("cpu", None) == ([], {})
    monkeypatch.setenv("RADRANK_TORCH", "cuda")
    assert envs.torch_variant() == "cuda" and envs.torch_variant("cpu") == "cpu"
    with pytest.raises(envs.EnvError):
        envs.torch_variant("rocm")


def test_pip_find_links_come_from_pip_config_files(monkeypatch, tmp_path):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    conf = tmp_path / "pip.conf"
    conf.write_text(f"[global]\nfind-links = {wheels}\n")
    monkeypatch.delenv("PIP_FIND_LINKS", raising=False)
    monkeypatch.setenv("PIP_CONFIG_FILE", str(conf))
    assert str(wheels) in envs.pip_find_links()
    assert str(wheels) in envs._find_links_from_files()
    monkeypatch.setenv("PIP_FIND_LINKS", f"{wheels} /does/not/exist")
    assert envs.pip_find_links() == [str(wheels)]


def test_modulefiles_put_the_venv_first_and_name_the_env(tmp_path, monkeypatch):
    monkeypatch.setenv("RADRANK_ENVS_DIR", str(tmp_path / "venvs"))
    envs.write_modulefiles()
    text = (tmp_path / "venvs/modulefiles/radrank/rexrank").read_text()
    assert f"prepend-path PATH {{{tmp_path / 'venvs/rexrank/bin'}}}" in text
    assert "setenv RADRANK_ENV rexrank" in text
    assert (tmp_path / "venvs/.gitignore").read_text().splitlines()[-1] == "*"
    if envs.module_init() is None:
        pytest.skip("Environment Modules is not installed")
    env = envs.workflow_env()
    load = subprocess.run(["bash", "-c", "module load radrank/rexrank"], env=env, capture_output=True, text=True)
    assert load.returncode != 0 and "envs.py build rexrank" in load.stderr  # unbuilt: says how to build


def test_snakemake_wrapper_adds_env_modules_unless_a_route_is_given(monkeypatch):
    seen = []
    monkeypatch.setattr(envs, "snakemake", lambda args, e, t: seen.append((args, e, t)) or 0)
    assert envs.main(["snakemake", "--envs", "rexrank", "--cores", "2", "all"]) == 0
    assert envs.main(["snakemake", "--torch=cpu", "-n", "--", "--envs"]) == 0
    assert seen == [(["--cores", "2", "all"], "rexrank", None), (["-n", "--envs"], None, "cpu")]
    assert console.with_deployment(["--cores", "2", "all"], "env-modules") == [
        "--cores", "2", "all", "--sdm", "env-modules"]  # last: --sdm takes several values
    for chosen in (["--sdm", "conda"], ["--software-deployment-method=conda"], ["--use-conda"], ["--use-envmodules"]):
        assert console.with_deployment(["--cores", "2", *chosen], "env-modules") == ["--cores", "2", *chosen]


def test_snakemake_wrapper_help_is_its_own_before_any_snakemake_argument(monkeypatch, capsys):
    monkeypatch.setattr(envs, "snakemake", lambda args, e, t: pytest.fail(f"ran snakemake {args}"))
    assert envs.main(["snakemake", "--envs", "all", "--help"]) == 0
    assert capsys.readouterr().out.startswith("usage: python3 src/radrank/envs.py snakemake [--envs LIST]")
    seen = []
    monkeypatch.setattr(envs, "snakemake", lambda args, e, t: seen.append(args) or 0)
    assert envs.main(["snakemake", "--cores", "2", "--help"]) == 0  # after one of Snakemake's: Snakemake's
    assert seen == [["--cores", "2", "--help"]]


# --- builds (need the package registry) ------------------------------------------------------------


@pytest.fixture
def tiny(tmp_path, monkeypatch):
    """A two-package family in its own spec and envs folders (its wheels are in core's lock)."""
    specs, venvs = tmp_path / "specs", tmp_path / "venvs"
    specs.mkdir()
    core = pins("core")
    chosen = [f"pyyaml=={core['pyyaml']}", f"six=={core['six']}"]
    (specs / "tiny.yaml").write_text(envs.render_env_file("tiny", chosen, ["tiny test family"]))
    monkeypatch.setenv("RADRANK_ENV_SPECS", str(specs))
    monkeypatch.setenv("RADRANK_ENVS_DIR", str(venvs))
    return specs / "tiny.yaml", chosen


def build_cli(*args, **popen):
    return subprocess.Popen([sys.executable, str(ENVS_PY), "build", "--json", *args], text=True,
                            stdout=subprocess.PIPE, **popen)


@needs_builds
def test_build_is_cached_by_pins_and_rebuilt_when_they_change(tiny):
    path, chosen = tiny
    first = envs.build("tiny")
    python = envs.env_path("tiny") / "bin" / "python"
    assert first["status"] == "built" and python.exists()
    marker = envs.env_path("tiny") / "pyvenv.cfg"
    before = os.stat(marker)
    second = envs.build("tiny")
    assert second["status"] == "up to date" and second["key"] == first["key"]
    after = os.stat(marker)  # nothing rebuilt: the venv is the same files, not a fast rebuild
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    has_six = [str(python), "-c", "import importlib.util as u; print(u.find_spec('six') is not None)"]
    assert subprocess.run(has_six, capture_output=True, text=True).stdout.strip() == "True"
    path.write_text(envs.render_env_file("tiny", chosen[:1], ["tiny test family"]))  # drop six
    third = envs.build("tiny")
    assert third["status"] == "built" and third["key"] != first["key"]
    assert subprocess.run(has_six, capture_output=True, text=True).stdout.strip() == "False"  # synced exactly


@needs_builds
def test_two_concurrent_builds_of_one_family_build_it_once(tiny, tmp_path):
    lock_dir = Path(os.environ["RADRANK_ENVS_DIR"]) / ".locks"
    lock_dir.mkdir(parents=True, exist_ok=True)
    errs = [tmp_path / f"err{i}.txt" for i in range(2)]
    with open(lock_dir / "tiny.lock", "a+") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # both builders must queue behind this holder
        procs = [build_cli("tiny", stderr=open(err, "w")) for err in errs]
        deadline = time.monotonic() + 60
        while not all("waiting for another build" in e.read_text() for e in errs):
            assert time.monotonic() < deadline, [e.read_text() for e in errs]
            assert all(p.poll() is None for p in procs), "a builder did not wait for the lock"
            time.sleep(0.1)
        fcntl.flock(held, fcntl.LOCK_UN)
    results = [json.loads(p.communicate(timeout=300)[0]) for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert sorted(r["status"] for r in results) == ["built", "up to date"]
    assert next(r for r in results if r["status"] == "up to date").get("waited") is True
    assert envs.is_built("tiny")


@needs_builds
def test_uv_is_bootstrapped_with_pip_when_missing(tmp_path, monkeypatch):
    monkeypatch.setenv("RADRANK_ENVS_DIR", str(tmp_path / "venvs"))
    monkeypatch.delenv("RADRANK_UV", raising=False)
    path = [d for d in os.environ.get("PATH", "").split(":") if d and not (Path(d) / "uv").exists()]
    monkeypatch.setenv("PATH", ":".join(path))
    uv = envs.find_uv()
    assert uv == str(tmp_path / "venvs/.tools/bin/uv")
    out = subprocess.run([uv, "--version"], capture_output=True, text=True, check=True).stdout
    assert out.split()[1] == envs.UV_VERSION


@needs_builds
def test_lock_regenerates_an_env_file_from_its_loose_input(tmp_path, monkeypatch):
    monkeypatch.setenv("RADRANK_ENV_SPECS", str(tmp_path))
    (tmp_path / "requirements").mkdir()
    shutil.copy(REPO / "envs/requirements/crimson.in", tmp_path / "requirements/crimson.in")
    result = subprocess.run([sys.executable, "-m", "radrank.envs", "lock", "crimson"], cwd=tmp_path,
                            env={**os.environ, "PYTHONPATH": str(REPO / "src")}, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    locked = {envs.canonical(p.partition("==")[0]): p.partition("==")[2] for p in envs.read_spec("crimson").pins}
    assert locked["torch"] == "2.13.0" and locked["crimson-score"] == "0.2.0"
    assert locked["transformers"].startswith("5.") and "torchvision" not in locked
    assert len(locked) > 30  # the whole transitive closure, not just the four inputs


@needs_builds
@pytest.mark.workflow
def test_one_run_executes_rules_in_envs_with_conflicting_pins(tmp_path):
    """rexrank (transformers 4.57.6) and crimson (transformers 5.x) in one workflow run."""
    if envs.module_init() is None:
        pytest.fail("Environment Modules is not installed: python3 src/radrank/envs.py sysdeps")
    env = {k: v for k, v in os.environ.items() if k != "RADRANK_ENV"}
    cmd = [sys.executable, str(ENVS_PY), "snakemake", "--envs", "rexrank,crimson",
           "-s", str(REPO / "tests/workflows/envcheck/Snakefile"), "-d", str(tmp_path), "--cores", "2",
           "--workflow-profile", "none", "--config", f"repo={REPO}"]
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stderr[-5000:]
    seen = {f: json.loads((tmp_path / f"probe/{f}.json").read_text()) for f in ("rexrank", "crimson")}
    for family, record in seen.items():
        venv_python = envs.env_path(family) / "bin" / "python"
        assert record["env"] == family
        assert Path(record["sys_executable"]) == venv_python
        assert record["lock_key"] == envs.read_stamp(family)["key"]  # provenance's record of it
        assert record["python"].startswith("3.11.")
        locked = pins(family)
        assert record["transformers_imported"] == record["packages"]["transformers"] == locked["transformers"]
        assert record["packages"]["huggingface-hub"] == locked["huggingface-hub"]
        assert record["packages"]["torch"] == locked["torch"] + "+cpu" or envs.torch_variant() != "cpu"
    assert seen["rexrank"]["transformers_imported"].startswith("4.")
    assert seen["crimson"]["transformers_imported"].startswith("5.")


@needs_builds
def test_the_wrapper_builds_the_families_the_config_needs(tmp_path, monkeypatch):
    envs.build("core")
    monkeypatch.chdir(REPO)  # the config's sheets are relative to the checkout
    config = (REPO / "config/config.yaml").read_text()
    assert envs.config_families([]) == ["core"]  # the bundled example: lexical metrics only
    custom = tmp_path / "config.yaml"
    custom.write_text(re.sub(r"(?m)^metrics:.*$", "metrics: [bleu2, bertscore, ratescore]", config))
    monkeypatch.setenv("RADRANK_WEIGHTS_CHECK", "off")  # this machine has none of their weights
    assert envs.config_families(["--cores", "2", "--configfile", str(custom)]) == ["core", "ratescore", "rexrank"]


def test_a_missing_model_stops_the_wrapper_before_any_family_is_built(tmp_path, monkeypatch):
    """The preflight (the workflow's own Plan and weights check, in the core env) refuses the run: the
    torch families are never built for a run that would fail at load."""
    envs.build("core")
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("RADRANK_WEIGHTS_CHECK", raising=False)
    custom = tmp_path / "config.yaml"
    custom.write_text(re.sub(r"(?m)^metrics:.*$", "metrics: [bleu2, bertscore]",
                             (REPO / "config/config.yaml").read_text()))
    built, real_build = [], envs.build
    monkeypatch.setattr(envs, "build", lambda family, *a, **k: built.append(family) or real_build(family, *a, **k))
    with pytest.raises(envs.EnvError, match=r"metric 'bertscore': model 'distilroberta-base' is not available"):
        envs.snakemake(["--cores", "1", "-n", "--configfile", str(custom)])
    assert built == ["core"]


def test_make_example_with_a_missing_model_says_so_in_one_message_before_any_family_is_built(tmp_path):
    """What `make example` prints when the config turns on a model metric whose weights are not here: the
    preflight's message, naming the model, its config key and both download commands, with no traceback line;
    no family besides core is built and Snakemake is never started."""
    envs.build("core")
    custom = tmp_path / "config.yaml"
    custom.write_text(re.sub(r"(?m)^metrics:.*$", "metrics: [bleu2, bertscore]",
                             (REPO / "config/config.yaml").read_text()))
    env = {k: v for k, v in os.environ.items() if k != "RADRANK_WEIGHTS_CHECK"}
    env.update(HF_HOME=str(tmp_path / "hf"), HF_HUB_OFFLINE="1")
    proc = subprocess.run([sys.executable, str(ENVS_PY), "snakemake", "--profile", "profiles/venv", "--cores", "1",
                           "--configfile", str(custom)], cwd=REPO, capture_output=True, text=True, env=env)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "[radrank.envs] error: 1 model(s) the config needs are not available locally" in out
    assert "metric 'bertscore': model 'distilroberta-base'" in out and "metric_settings.bertscore.model" in out
    assert "`hf download distilroberta-base`" in out and "`huggingface-cli download distilroberta-base`" in out
    assert "Traceback" not in out and 'File "' not in out, out
    assert re.findall(r"\[radrank\.envs\] (\S+): (?:built|up to date)", out) == ["core"], out
    assert "snakemake --profile" not in out  # Snakemake was never started


# --- the project inside the core env; system packages ----------------------------------------------


def test_sysdeps_waits_for_the_apt_lock(monkeypatch):
    calls = []
    monkeypatch.setattr(envs, "module_init", lambda: None)
    monkeypatch.setattr(envs.os, "geteuid", lambda: 0)
    monkeypatch.setattr(envs.shutil, "which", lambda name: f"/usr/bin/{name}")

    def fake_run(cmd, env=None, quiet=False):
        calls.append(cmd)
        if cmd[-1] == "environment-modules" and len(calls) == 1:
            raise envs.EnvError("no such package (lists not updated)")
        return ""

    monkeypatch.setattr(envs, "run", fake_run)
    envs.sysdeps()
    assert [c[3] for c in calls] == ["install", "update", "install"]
    for cmd in calls:
        assert cmd[:3] == ["apt-get", "-o", f"DPkg::Lock::Timeout={envs.APT_LOCK_TIMEOUT_S}"]
    assert envs.APT_LOCK_TIMEOUT_S >= 300


def test_project_installed_reads_the_editable_install_of_this_checkout(tmp_path, monkeypatch):
    monkeypatch.setenv("RADRANK_ENVS_DIR", str(tmp_path))
    site = tmp_path / "core/lib/python3.11/site-packages"
    assert envs.project_installed("rexrank")  # not a project env: nothing to install
    assert not envs.project_installed("core")
    info = site / "radrank-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "direct_url.json").write_text(json.dumps({"url": "file:///elsewhere/radrank", "dir_info": {"editable": True}}))
    assert not envs.project_installed("core")  # another checkout's install is re-pointed here
    (info / "direct_url.json").write_text(json.dumps({"url": REPO.as_uri(), "dir_info": {"editable": True}}))
    assert envs.project_installed("core")


@needs_builds
def test_project_env_gets_the_checkout_without_changing_its_key(tiny, monkeypatch, tmp_path):
    monkeypatch.setattr(envs, "PROJECT_ENVS", ("tiny",))
    first = envs.build("tiny")
    venv = envs.env_path("tiny")
    where = subprocess.run([str(venv / "bin/python"), "-c", "import radrank; print(radrank.__file__)"],
                           cwd=tmp_path, capture_output=True, text=True, env={"PATH": os.environ["PATH"]})
    assert where.stdout.strip() == str(REPO / "src/radrank/__init__.py"), where.stderr
    assert (venv / "bin/radrank").exists()  # the console script
    assert envs.build("tiny")["status"] == "up to date"
    for info in venv.glob("lib/python*/site-packages/radrank-*.dist-info"):
        shutil.rmtree(info)  # as in a venv built before the project was installed into it
    again = envs.build("tiny")
    assert again["status"] == "up to date (radrank installed into it)" and again["key"] == first["key"]
    assert envs.project_installed("tiny")
    has_six = [str(venv / "bin/python"), "-c", "import six"]
    assert subprocess.run(has_six).returncode == 0  # the pins were not touched
