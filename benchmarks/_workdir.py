"""A throw-away copy of the workflow with a synthetic submissions sheet, shared by the workflow benchmarks."""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from contextlib import contextmanager
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
COPY = ("Snakefile", "rules", "scripts", "src", "config", "schemas", "envs", "profiles", "resources", "report")


@contextmanager
def revision(rev: str):
    """A temporary folder holding the files of git revision ``rev`` of this checkout (the reference
    measured in the same run as the checkout itself)."""
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(["git", "-C", str(REPO), "archive", rev], check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        yield Path(tmp)


def make(work: Path, *, models: int, datasets: int, cases: int, metrics: list | None = None, seed: int = 0,
         bootstrap_n: int | None = None, repo: Path = REPO) -> Path:
    """Copy the workflow to ``work`` with ``models`` ReXrank JSON submissions of ``cases`` cases for each of
    ``datasets`` datasets (both splits). Texts come from tests/synthetic.py when ``cases`` > 5.
    ``repo``: the checkout to copy (another revision's files, for a reference measured in the same run)."""
    import sys

    sys.path.insert(0, str(REPO / "tests"))
    from synthetic import leaderboard

    for name in (n for n in COPY if (repo / n).exists()):  # an older revision may lack some
        (shutil.copytree if (repo / name).is_dir() else shutil.copy2)(
            repo / name, work / name, **({"ignore": shutil.ignore_patterns("__pycache__")}
                                        if (repo / name).is_dir() else {}))
    rows = ["model\tdataset\tpath\treference_path\tsplit"]
    for d in range(datasets):
        boards = leaderboard(cases * models, n_models=models, seed=seed + d) if cases > 5 else None
        for m in range(models):
            if boards is None:
                entries = {f"c{i}": {"model_prediction": "No effusion.", "section_findings": "No pleural effusion."}
                           for i in range(cases)}
            else:
                frame = boards[f"model_{m + 1}"]
                entries = {}
                for sid, ref, hyp in frame[["sample_id", "reference", "hypothesis"]].itertuples(index=False):
                    findings, _, impression = ref.removeprefix("Findings: ").partition(" Impression: ")
                    entries[sid] = {"model_prediction": hyp, "section_findings": findings,
                                    "section_impression": impression}
            path = work / "subs" / f"ds{d}" / f"m{m:03d}.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(entries))
            # absolute: read the same by every revision (relative sheet paths once meant the project folder)
            rows.append(f"m{m:03d}\tds{d}\t{path.resolve()}\t\t")
    (work / "config/submissions.tsv").write_text("\n".join(rows) + "\n")
    config_path = work / "config/config.yaml"
    config = yaml.safe_load(config_path.read_text())
    config["models"] = None
    if metrics is not None:
        config["metrics"] = list(metrics)
    if bootstrap_n is not None:
        config["bootstrap"] = {**config["bootstrap"], "n": bootstrap_n}
    config_path.write_text(yaml.safe_dump(config))
    return work
