"""The jobs of the ``mrscore_train`` target (rules/mrscore.smk), one per stage: the workflow layer, beside
:mod:`radrank.jobs`, over the library's :mod:`radrank.mrscore_train`.

Each job's params hold its stage's identity only (the settings that change its outputs, from
:meth:`~radrank.mrscore_train.config.TrainingConfig.identity`); the job rebuilds the typed settings from
the config and refuses to run when they no longer match. Every stage writes its table atomically and lists
what it dropped, with why, in a CSV people read.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from radrank import io, provenance
from radrank.jobs import Job, built

log = logging.getLogger("radrank")


def _training(name: str, config: dict):
    from radrank.mrscore_train.config import TrainingConfig

    cfg = TrainingConfig.from_config(config)
    if cfg is None or cfg.name != name:
        raise RuntimeError(f"config mrscore_training (name {name!r}) changed since the jobs were planned; rerun "
                           "Snakemake")
    return cfg


@dataclass(frozen=True)
class Stage(Job):
    """A stage of training run ``name``; ``identity`` is what its outputs depend on."""

    name: str
    identity: dict
    training: object = built()
    stage = ""

    @classmethod
    def from_params(cls, params: dict, config: dict):
        job = cls(**dict(params))
        cfg = _training(job.name, config)
        if cfg.identity(cls.stage) != job.identity:
            raise RuntimeError(f"mrscore_training.{cls.stage}: the settings in the config differ from the rule's "
                               "identity; rerun Snakemake so that it plans the jobs again")
        return dataclasses.replace(job, training=cfg)

    def write_table(self, frame, path, **extra):
        io.write_parquet(frame, path, provenance.record(f"mrscore_{self.stage}", name=self.name,
                                                        identity=self.identity, n_rows=len(frame), **extra))


@dataclass(frozen=True)
class References(Stage):
    """Input: ``sources`` (one file per configured source, in order). Output: ``references``, ``drops``."""

    labels: tuple = ()
    sources_sha256: dict = field(default_factory=dict)  # their content reruns the job
    stage = "references"

    def run(self, input, output):
        from radrank.mrscore_train.references import read_references, sample

        cfg = self.training
        refs, drops = read_references(list(zip(self.labels, list(input.sources))))
        available = len(refs)
        refs = sample(refs, cfg.source_settings.max_references, cfg.source_settings.seed)
        log.info("mrscore_training: %d references (%d available, %d listed as unusable in %s)", len(refs),
                 available, len(drops), output.drops)
        io.write_csv(drops, output.drops)
        if refs.empty:
            raise RuntimeError(f"no usable reference in {', '.join(map(str, input.sources))}: {len(drops)} listed "
                               f"in {output.drops}")
        self.write_table(refs, output.references, available=available, dropped=len(drops),
                         sources={str(p): provenance.file_sha256(p) for p in input.sources})


@dataclass(frozen=True)
class Candidates(Stage):
    """Input: ``references``. Output: ``candidates``, ``drops``."""

    stage = "candidates"

    def run(self, input, output):
        from radrank.mrscore_train.candidates import write_candidates
        from radrank.runtime import Runtime

        cfg = self.training
        refs = io.read_parquet(input.references)
        out, drops = write_candidates(refs, cfg.tiers, cfg.candidates, Runtime(),
                                      ref=cfg.model_ref("candidates"))
        io.write_csv(drops, output.drops)
        if out.empty:
            raise RuntimeError(f"the writer produced no usable candidate ({len(drops)} listed in {output.drops})")
        self.write_table(out, output.candidates, models=out.attrs.get("models"), dropped=len(drops))


@dataclass(frozen=True)
class Grade(Stage):
    """Input: ``references``, ``candidates``, ``write_drops``. Output: ``graded``, ``dropped`` (every candidate
    dropped, writing and grading)."""

    stage = "rubric"

    def run(self, input, output):
        import pandas as pd

        from radrank.mrscore_train.candidates import grade_candidates
        from radrank.runtime import Runtime

        cfg = self.training
        refs, cands = io.read_parquet(input.references), io.read_parquet(input.candidates)
        graded, drops = grade_candidates(cands, refs, cfg.tiers, cfg.rubric, Runtime())
        written = io.read_text_table(input.write_drops)
        all_drops = pd.concat([written, drops.astype(str)], ignore_index=True) if len(written) else drops
        io.write_csv(all_drops, output.dropped)
        if graded.empty:
            raise RuntimeError(f"no candidate survived grading ({len(drops)} of {len(cands)} dropped; see "
                               f"{output.dropped})")
        self.write_table(graded, output.graded, models=graded.attrs.get("models"), dropped=len(drops))


@dataclass(frozen=True)
class Pairs(Stage):
    """Input: ``references``, ``graded``. Output: ``pairs``."""

    stage = "pairs"

    def run(self, input, output):
        from radrank.mrscore_train.pairs import build_pairs

        p = self.training.pairs
        pairs = build_pairs(io.read_parquet(input.graded), io.read_parquet(input.references), min_gap=p.min_gap,
                            margin_scale=p.margin_scale, validation_fraction=p.validation_fraction, seed=p.seed)
        n_train = int((pairs["split"] == "train").sum())
        log.info("mrscore_training: %d pairs (%d train, %d validation) from %d references", len(pairs), n_train,
                 len(pairs) - n_train, pairs["reference_id"].nunique())
        if n_train == 0:
            raise RuntimeError("no training pair: no reference has two candidates whose scores differ by more than "
                               f"min_gap {p.min_gap:g} outside the validation split (see {input.graded})")
        self.write_table(pairs, output.pairs, n_train=n_train)


RESTART_FILE = "restart-key.json"


@dataclass(frozen=True)
class Train(Stage):
    """Input: ``pairs``. Output: ``state`` (train_state.json, beside the checkpoints folder a killed run resumes
    from). Checkpoints of other data or settings (anything but how long it trains and when it saves) are removed
    first: the rule reran because they changed, so they are another run's."""

    gpus: int = 1
    stage = "train"

    def run(self, input, output):
        from radrank.mrscore_train import trainer

        cfg = self.training
        out_dir = Path(output.state).parent
        checkpoints = out_dir / trainer.CHECKPOINTS
        key = {"settings": {k: v for k, v in cfg.train.identity().items() if k not in trainer.RESUMABLE},
               "prompt": self.identity["prompt"], "pairs_sha256": provenance.file_sha256(input.pairs)}
        mark = out_dir / RESTART_FILE
        if checkpoints.exists() and (not mark.is_file() or json.loads(mark.read_text()) != key):
            log.info("mrscore_training: %s holds checkpoints of other pairs or settings; starting afresh", checkpoints)
            shutil.rmtree(checkpoints)
            (out_dir / trainer.RUN_FILE).unlink(missing_ok=True)
        out_dir.mkdir(parents=True, exist_ok=True)
        mark.write_text(json.dumps(key, sort_keys=True))
        pairs = io.read_parquet(input.pairs)
        train, validation = pairs[pairs["split"] == "train"], pairs[pairs["split"] == "validation"]
        if self.gpus > 1:
            self._launch(cfg, out_dir, train, validation)
        else:
            trainer.train(train.reset_index(drop=True), out_dir, cfg.train, cfg.prompt,
                          validation=validation.reset_index(drop=True))
        if not Path(output.state).is_file():
            raise RuntimeError(f"training ended without writing {output.state}")

    def _launch(self, cfg, out_dir, train, validation):
        """torchrun on this job's GPUs, one process each (data parallel; radrank.mrscore_train.trainer)."""
        from radrank.mrscore_train import trainer
        from radrank.metrics.mrscore import prompt_of

        data = out_dir / "launch"
        data.mkdir(exist_ok=True)
        io.write_parquet(train, data / "train.parquet", {})
        io.write_parquet(validation, data / "validation.parquet", {})
        (data / "settings.json").write_text(json.dumps(cfg.train.as_dict()))
        (data / "prompt.json").write_text(json.dumps(prompt_of(cfg.prompt)))
        cmd = trainer.launch_command(self.gpus, ["--pairs", data / "train.parquet", "--validation",
                                                 data / "validation.parquet", "--out", out_dir,
                                                 "--settings", data / "settings.json", "--prompt",
                                                 data / "prompt.json"])
        log.info("mrscore_training: %s", " ".join(map(str, cmd)))
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(Path(__file__).resolve().parents[2]),
                                                        env.get("PYTHONPATH")) if p)
        subprocess.run(cmd, check=True, env=env)


@dataclass(frozen=True)
class Select(Stage):
    """Input: ``state``, ``pairs``, ``references``, ``graded``, ``dropped``, ``reference_drops``, ``candidates``,
    ``human_data``, ``human_raters``. Output: ``selection`` (CSV), ``model`` (mrscore.json of the kept model),
    ``card``."""

    stage = "select"

    def run(self, input, output):
        from radrank import metaeval
        from radrank.mrscore_train import selection

        cfg = self.training
        state = json.loads(Path(input.state).read_text())
        model_dir = Path(output.model).parent
        exports = model_dir.parent / "checkpoints-exported"
        pairs = io.read_parquet(input.pairs)
        item_set = metaeval.read_set(cfg.selection.human_set, "radpref",
                                     {"data": input.human_data, "raters": list(input.human_raters)}, {})
        table, best = selection.select(Path(input.state).parent, exports, pairs, item_set, cfg)
        io.write_csv(table, output.selection)
        if model_dir.exists():
            shutil.rmtree(model_dir)
        shutil.copytree(best, model_dir)
        dropped = io.read_text_table(input.dropped)
        grade = dropped[dropped["stage"] == "grade"]
        refs = io.read_parquet(input.references)
        ref_prov = io.read_provenance(input.references)
        written, graded = io.read_parquet(input.candidates), io.read_parquet(input.graded)
        tiers = [(t.name, int((written["tier"] == t.name).sum()), int((graded["tier"] == t.name).sum()),
                  float(graded.loc[graded["tier"] == t.name, "score"].mean()) if (graded["tier"] == t.name).any()
                  else float("nan")) for t in cfg.tiers]
        counts = {
            "references": len(refs), "references_dropped": len(io.read_text_table(input.reference_drops)),
            "references_available": ref_prov.get("available", len(refs)),
            "written": len(written), "tiers": tiers,
            "dropped_write": int((dropped["stage"] == "write").sum()),
            "dropped_grade": len(grade), "dropped_unparsed": int((~grade["reason"].str.startswith("graded")).sum()),
            "dropped_tier": int(grade["reason"].str.startswith("graded").sum()),
            "kept": len(graded), "pairs_train": int((pairs["split"] == "train").sum()),
            "pairs_validation": int((pairs["split"] == "validation").sum())}
        models = {"writer": io.read_provenance(input.candidates).get("models"),
                  "judge": io.read_provenance(input.graded).get("models"), "base": state.get("base_model")}
        card = selection.model_card(cfg, selection=table, state={**state, "model_dir": str(model_dir)},
                                    counts=counts, models=models, item_set_description=item_set.description)
        io.write_text(card, output.card)
        best_row = table[table["selected"]].iloc[0]
        log.info("mrscore_training: kept %s (Kendall tau-b %.3f) as %s; card %s", best_row["checkpoint"],
                 best_row["kendall_tau_b"], model_dir, output.card)


@dataclass(frozen=True)
class DemoModels(Stage):
    """Input: ``sources`` (the tokenizer learns their words). Output: ``writer``, ``judge``, ``base`` (each
    model's config.json)."""

    labels: tuple = ()
    stage = "demo"

    def run(self, input, output):
        from radrank.mrscore_train.demo import build_models
        from radrank.mrscore_train.references import read_references

        refs, _ = read_references(list(zip(self.labels, list(input.sources))))
        build_models(refs["reference"].tolist(), Path(output.writer).parent.parent)


JOB_TYPES = {job.stage: job for job in (References, Candidates, Grade, Pairs, Train, Select, DemoModels)}
