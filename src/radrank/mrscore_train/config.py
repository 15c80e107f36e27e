"""The config section ``mrscore_training``, read once into typed settings (checked when the workflow loads).

Each sub-mapping is a :class:`~radrank.settings.Settings` class, so a typo or a wrong type fails at load
with one line naming ``mrscore_training.<part>.<key>``:

* ``references`` — a list of sources, each ``{dataset: <a dataset of the run>}`` or ``{path: <ReXrank
  JSON | CSV>}``; ``sources`` — how many to use (:class:`SourceSettings`);
* ``tiers`` — the quality tiers the writer aims at, ``[[low, high], ...]`` on the rubric's 0–100 scale;
* ``candidates`` — the writer (:class:`~radrank.mrscore_train.candidates.CandidateSettings`);
* ``rubric`` — the grader (:class:`~radrank.metrics.mrscore_rubric.RubricSettings`, the metric's own);
* ``pairs`` — :class:`PairSettings`; ``train`` — :class:`~radrank.mrscore_train.trainer.TrainSettings`;
* ``prompt`` — how a (reference, candidate) pair is shown to the reward model: the ``mrscore`` metric's
  prompt settings (:data:`PROMPT_FIELDS`), written into the trained model's folder so the metric uses
  exactly them;
* ``selection`` — :class:`SelectionSettings`;
* ``demo_models`` — the workflow builds tiny random writer, judge and base models itself and uses them
  (``make mrscore-demo``: the path is proven, the numbers mean nothing).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Literal

from radrank.errors import ConfigError
from radrank.metrics.mrscore import PROMPT_FIELDS, prompt_of
from radrank.runtime import WeightRef
from radrank.settings import Settings, scored, speed

SECTION = "mrscore_training"
OWNER = "MRScore training"
DEFAULT_TIERS = ((0.0, 40.0), (40.0, 70.0), (70.0, 100.0))  # the paper's three tiers
DEMO_MODELS = ("writer", "judge", "base")
ROOT = "results/mrscore"  # + /<name>/: every stage's output


def folder(name: str) -> str:
    return f"{ROOT}/{name}"


def demo_dir(name: str) -> str:
    return f"{folder(name)}/demo-models"


@dataclass(frozen=True)
class SourceSettings(Settings):
    max_references: int | None = scored(None, "use at most this many references, a seeded sample (null: all; "
                                              "the paper: 1,000)", minimum=1)
    seed: int = scored(0, "seed of that sample", minimum=0)


@dataclass(frozen=True)
class PairSettings(Settings):
    min_gap: float = scored(0.0, "δ: a pair needs score_w > score_l + δ (rubric points)", minimum=0.0)
    margin_scale: float = scored(20.0, "margin = (score_w − score_l) / margin_scale (docs/mrscore-training.md: why 20)",
                                 minimum=1e-6)
    validation_fraction: float = scored(0.1, "share of references (not pairs) held out for validation",
                                        minimum=0.0, maximum=0.9)
    seed: int = scored(0, "seed of the train / validation split", minimum=0)


@dataclass(frozen=True)
class SelectionSettings(Settings):
    human_set: Literal["radpref"] = scored("radpref", "radiologist ratings each checkpoint is compared with (the "
                                                      "bundled RadPref: 100 studies, 2 candidates, 3 raters)")
    n_boot: int = scored(1000, "bootstrap resamples (over cases) for the intervals of τ", minimum=0)
    level: float = scored(0.95, "interval level", minimum=0.5, maximum=0.999)
    seed: int = scored(0, "seed of the bootstrap", minimum=0)
    batch_size: int = speed(16, "reward model inputs per forward pass when scoring checkpoints", minimum=1)


@dataclass(frozen=True)
class Tier:
    low: float
    high: float

    @property
    def name(self) -> str:
        return f"{self.low:g}-{self.high:g}"

    def holds(self, score: float, last: bool) -> bool:
        """``low ≤ score < high``, the top tier including its upper bound (so 40 is mid, 100 is high)."""
        return self.low <= score < self.high or (last and score == self.high)


def read_tiers(values) -> tuple[Tier, ...]:
    where = f"config {SECTION}.tiers"
    if not isinstance(values, (list, tuple)) or not values:
        raise ConfigError(f"{where}: a non-empty list of [low, high] ranges on the 0-100 scale")
    tiers = []
    for i, v in enumerate(values):
        if (not isinstance(v, (list, tuple)) or len(v) != 2
                or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v)):
            raise ConfigError(f"{where}[{i}]: {v!r} is not a [low, high] pair of numbers")
        low, high = float(v[0]), float(v[1])
        if not 0 <= low < high <= 100:
            raise ConfigError(f"{where}[{i}]: [{low:g}, {high:g}] must satisfy 0 <= low < high <= 100")
        if tiers and low < tiers[-1].high:
            raise ConfigError(f"{where}[{i}]: tiers must be in increasing order without overlap "
                              f"({low:g} < {tiers[-1].high:g})")
        tiers.append(Tier(low, high))
    return tuple(tiers)


@dataclass(frozen=True)
class Source:
    """One place references come from: a dataset of the run (its first submission's references) or a file."""

    dataset: str | None = None
    path: str | None = None

    @property
    def label(self) -> str:
        return self.dataset or self.path


def read_sources(values) -> tuple[Source, ...]:
    where = f"config {SECTION}.references"
    if not isinstance(values, list) or not values:
        raise ConfigError(f"{where}: list where the references come from, e.g. [{{dataset: mimic_cxr}}] or "
                          "[{path: references.csv}]")
    out = []
    for i, v in enumerate(values):
        if not isinstance(v, dict) or len(v) != 1 or next(iter(v)) not in ("dataset", "path") \
                or not isinstance(next(iter(v.values())), str) or not next(iter(v.values())).strip():
            raise ConfigError(f"{where}[{i}]: {v!r} must be {{dataset: <name>}} or {{path: <file>}}")
        out.append(Source(**v))
    return tuple(out)


@dataclass(frozen=True)
class TrainingConfig:
    """The ``mrscore_training`` section, built and checked once."""

    name: str
    sources: tuple[Source, ...]
    source_settings: SourceSettings
    tiers: tuple[Tier, ...]
    candidates: object  # CandidateSettings
    rubric: object  # RubricSettings
    pairs: PairSettings
    train: object  # TrainSettings
    prompt: object  # MRScoreSettings: only PROMPT_FIELDS are set from the config
    selection: SelectionSettings
    demo_models: bool

    @classmethod
    def from_config(cls, config: dict, datasets=None) -> "TrainingConfig | None":
        """The section of ``config``, or None when the config has none. ``datasets``: the run's datasets (a
        ``{dataset: ...}`` source must be one of them). With ``demo_models`` the writer, judge and base model
        settings point where the workflow builds them (:func:`demo_dir`)."""
        from radrank.metrics.mrscore import MRScoreSettings
        from radrank.metrics.mrscore_rubric import RubricSettings
        from radrank.mrscore_train.candidates import CandidateSettings
        from radrank.mrscore_train.trainer import TrainSettings

        section = config.get(SECTION)
        if not section:
            return None
        remote = tuple(config.get("trust_remote_code") or ())
        demo = section.get("demo_models", False)
        if not isinstance(demo, bool):
            raise ConfigError(f"config {SECTION}.demo_models: {demo!r} is not true or false")
        name = str(section.get("name", "mrscore"))
        models = {}
        if demo:
            for part, key in (("candidates", "model"), ("rubric", "model"), ("train", "base_model")):
                if key in (section.get(part) or {}):
                    raise ConfigError(f"config {SECTION}.{part}.{key}: demo_models builds that model itself; "
                                      "remove one of the two")
            models = {m: f"{demo_dir(name)}/{m}" for m in DEMO_MODELS}

        def build(part, settings_class, extra=None):
            values = dict(section.get(part) or {})
            if not isinstance(values, dict):
                raise ConfigError(f"config {SECTION}.{part} must be a mapping of setting names to values")
            if "trust_remote_code" in values:
                raise ConfigError(f"config {SECTION}.{part}.trust_remote_code: remote code is allowed in one place "
                                  "only, the top-level list `trust_remote_code`")
            values.update(extra or {})
            fixed = {"trust_remote_code": remote} if "trust_remote_code" in settings_class.__dataclass_fields__ \
                else {}
            return settings_class.build(values, where=f"{SECTION}.{part}", **fixed)

        prompt_values = dict(section.get("prompt") or {})
        for key in prompt_values:
            if key not in PROMPT_FIELDS:
                raise ConfigError(f"config {SECTION}.prompt.{key}: not a prompt setting; allowed: "
                                  f"{', '.join(PROMPT_FIELDS)}")
        demo_backend = {"backend": "local"} if demo else {}
        cfg = cls(
            name=name,
            sources=read_sources(section.get("references")),
            source_settings=build("sources", SourceSettings),
            tiers=read_tiers(section.get("tiers", DEFAULT_TIERS)),
            candidates=build("candidates", CandidateSettings,
                             {**demo_backend, "model": models["writer"]} if demo else None),
            rubric=build("rubric", RubricSettings,
                         {**demo_backend, "model": models["judge"], "verdict": "constrained"} if demo else None),
            pairs=build("pairs", PairSettings),
            train=build("train", TrainSettings, {"base_model": models["base"]} if demo else None),
            prompt=MRScoreSettings.build(prompt_values, where=f"{SECTION}.prompt"),
            selection=build("selection", SelectionSettings),
            demo_models=demo,
        )
        cfg.check(datasets)
        return cfg

    def check(self, datasets=None) -> None:
        if not isinstance(self.name, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.+-]*", self.name):
            raise ConfigError(f"config {SECTION}.name: {self.name!r} must be letters, digits, _ . + - only")
        known = sorted({str(d) for d in datasets or ()})
        for i, src in enumerate(self.sources):
            if src.dataset is not None and datasets is not None and src.dataset not in known:
                raise ConfigError(f"config {SECTION}.references[{i}]: dataset {src.dataset!r} is not a dataset of "
                                  f"the run ({', '.join(known) or 'none'})")
        if self.candidates.candidates_per_tier > 1 and self.candidates.temperature == 0:
            raise ConfigError(f"config {SECTION}.candidates.temperature: 0 writes the same candidate "
                              f"{self.candidates.candidates_per_tier} times; sample (e.g. 0.7) or ask for one")

    # --- what the workflow asks -----------------------------------------------------------------------
    def model_ref(self, part: str) -> WeightRef:
        """The model of stage ``part`` (candidates, rubric, train), named by its config key."""
        if part == "train":
            return WeightRef(OWNER, f"{SECTION}.train.base_model", self.train.base_model, need="model",
                             revision=self.train.base_revision)
        s = getattr(self, part)
        return WeightRef(OWNER, f"{SECTION}.{part}.model", s.model, need="model", revision=s.revision)

    def weight_refs(self) -> list[WeightRef]:
        """Every model the stages load, as the load-time check looks for them (demo models are built by the
        workflow, so they are not looked for)."""
        if self.demo_models:
            return []
        parts = [p for p in ("candidates", "rubric") if getattr(self, p).backend != "openai"]
        return [self.model_ref(p) for p in (*parts, "train")]

    def identity(self, stage: str) -> dict:
        """What the outputs of ``stage`` depend on besides its inputs (the rule's params)."""
        from radrank.metrics.mrscore_rubric import PROMPT_VERSION
        from radrank.mrscore_train.candidates import WRITER_VERSION

        tiers = [[t.low, t.high] for t in self.tiers]
        if stage == "references":
            return {"sources": [dataclasses.asdict(s) for s in self.sources], **self.source_settings.identity()}
        if stage == "demo":
            return {"sources": [dataclasses.asdict(s) for s in self.sources], "version": 2}
        if stage == "candidates":
            return {"tiers": tiers, "prompt": WRITER_VERSION, **self.candidates.identity()}
        if stage == "rubric":
            return {"tiers": tiers, "prompt": PROMPT_VERSION, **self.rubric.identity()}
        if stage == "pairs":
            return self.pairs.identity()
        if stage == "train":
            return {"train": self.train.identity(), "prompt": prompt_of(self.prompt)}
        if stage == "select":
            return self.selection.identity()
        raise KeyError(stage)

    def env_of(self, part: str) -> str:
        """The environment family of a stage: the writer and the grader run on the judge engines (vllm
        environment for the vllm backend), everything that trains or loads the reward model in ``train``."""
        if part in ("candidates", "rubric"):
            s = getattr(self, part)
            return "vllm" if s.backend == "vllm" else "judge"
        return "train"

    def gpus_of(self, part: str) -> int:
        if part in ("candidates", "rubric"):
            s = getattr(self, part)
            return 0 if s.backend == "openai" else (s.tensor_parallel_size if s.backend == "vllm" else 1)
        if part == "train":
            return int(self.train.gpus)
        return 1 if part == "select" else 0
