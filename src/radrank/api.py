"""Python API: evaluate a report generator or a VQA answerer in a few lines (RadHarmony-style).

    from radrank.api import ReportGenerationEvaluator

    ev = ReportGenerationEvaluator(my_generator, dataset=("iu_xray", "/data/iu-xray"),
                                   metrics=("bleu2", "bleu4", "rouge"), n_bootstrap=1000, output_dir="out")
    df = ev.evaluate()        # label, fold, seed, bootstrap, one column per leaf
    ev.save_results(df)       # results.csv, results_summary.csv, generations.csv, drops.csv

Underneath is the workflow's own code: :func:`radrank.generate.run_generation`
(the generation job's loop), :func:`radrank.ingest.pairs.build_pairs` (drop
policies), :func:`radrank.metrics.score` (per-sample scores),
:func:`radrank.stats.bootstrap` (exact bootstrap from per-sample statistics:
metrics run once, never per resample) and the per-model summary writers of
:mod:`radrank.summaries`. Unlike RadHarmony, every pair left out is listed in
``drops_`` / drops.csv with its reason, and ``max_samples`` takes the first
samples of the dataset (before generation), so a capped run is reproducible.

Rows of ``evaluate()``: ``bootstrap`` is -1 for the point estimate, then
0 … n_bootstrap-1; ``fold`` and ``seed`` are -1. Report generation has one row
per bootstrap (label ``report``); VQA has RadHarmony's rows ``overall``
(token_f1), ``closed`` (accuracy, token_f1) and ``open`` (token_f1,
token_recall), and other requested metrics' leaves in the ``overall`` row.

Generator contracts, image formats and the use of the indication are those of
:mod:`radrank.generate`. A ``dataset`` is an adapter (:mod:`radrank.datasets`)
or a ``(name, root)`` / ``(name, root, options)`` tuple.
"""

from __future__ import annotations

import logging
from pathlib import Path

from radrank import metrics, summaries
from radrank.errors import ConfigError, InputError
from radrank.generate import callable_name, generate, resolve_callable, run_generation, select_samples, to_pairs

log = logging.getLogger("radrank")


def score_pairs(pairs, metric_names, settings: dict | None = None, overrides: dict | None = None):
    """Per-sample scores of every metric in ``metric_names`` (and those they require), merged on sample_id.

    ``overrides`` maps a metric name to a function ``pairs -> scores`` used instead of the registry's.
    """
    settings, overrides = settings or {}, overrides or {}
    done: dict = {}

    def run(name, stack=()):
        if name in done:
            return done[name]
        if name in stack:
            raise ConfigError(f"metric requirements form a cycle: {' -> '.join(stack + (name,))}")
        spec = metrics.get(name)
        inputs = {req: run(req, stack + (name,)) for req in spec.requires}
        if name in overrides:
            out = overrides[name](pairs)
        else:
            out = metrics.score(name, pairs, settings.get(name), inputs)
        if len(out) != len(pairs) or not out["sample_id"].equals(pairs["sample_id"]):
            raise RuntimeError(f"metric {name!r} returned rows that do not match the pairs")
        done[name] = out
        return out

    merged = pairs[["sample_id"]].copy()
    for name in dict.fromkeys(metric_names):
        out = run(name)
        merged = merged.merge(out[["sample_id", *metrics.get(name).columns]], on="sample_id", how="left",
                              validate="one_to_one")
    return merged


class _GenerativeEvaluator:
    task = "report"
    _role = "generator"
    default_metrics: tuple = ()

    def __init__(self, fn, *, dataset, metrics=None, device: str = "cuda", batch_size: int = 8,
                 num_workers: int = 4, max_samples: int | None = None, n_bootstrap: int = 0,
                 bootstrap_seed: int = 0, output_dir=None, level: float = 0.95, empty_hypothesis: str = "drop",
                 max_chars: int | None = None, image_format="pil", max_images: int | None = None,
                 metric_settings: dict | None = None, name: str | None = None):
        from radrank.datasets import make_adapter

        self.metrics = metric_names(metrics if metrics is not None else self.default_metrics)
        check_arguments(n_bootstrap=n_bootstrap, level=level, max_chars=max_chars, max_samples=max_samples,
                        output_dir=output_dir)
        self.adapter = make_adapter(dataset)
        if self.adapter.task != self.task:
            raise ConfigError(f"dataset {self.adapter.name} is a {self.adapter.task} dataset; "
                              f"{type(self).__name__} needs a {self.task} dataset")
        self.device = device
        self.fn = resolve_callable(fn, device=device)
        self.batch_size, self.num_workers = int(batch_size), int(num_workers)
        self.max_samples = max_samples
        self.n_bootstrap, self.bootstrap_seed, self.level = int(n_bootstrap), int(bootstrap_seed), float(level)
        self.output_dir = output_dir
        self.empty_hypothesis, self.max_chars = empty_hypothesis, max_chars
        self.image_format, self.max_images = image_format, max_images
        self.metric_settings = dict(metric_settings or {})
        self.name = name or callable_name(self.fn)
        self.pairs_ = self.drops_ = self.scores_ = self.bootstrap_ = None
        self.n_samples_ = 0

    # -- hooks ----------------------------------------------------------------------------------------
    def _generation_settings(self) -> dict:
        return {"task": self.task}

    def _overrides(self) -> dict:
        return {}

    def _results(self, replicates):
        return summaries.results_table(replicates, label="report")

    def _tidy(self, df):
        df = df.reset_index(drop=True)
        df.columns.name = None
        return df

    def _generations(self):
        return self.pairs_[["sample_id", "reference", "hypothesis"]]

    # -- running --------------------------------------------------------------------------------------
    def _generate(self):
        samples, positions = select_samples(self.adapter, max_samples=self.max_samples)
        self._samples = {s.sample_id: s for s in samples}
        records, unmatched = run_generation(
            samples, self.fn, batch_size=self.batch_size, num_workers=self.num_workers,
            image_format=self.image_format, max_images=self.max_images, positions=positions,
            **self._generation_settings())
        pairs, drops = to_pairs(records, unmatched, empty_hypothesis=self.empty_hypothesis, max_chars=self.max_chars)
        self.pairs_, self.drops_ = pairs, drops
        self.n_samples_ = len(pairs)
        if drops.shape[0]:
            log.info("%s: %d pairs; %d listed in drops_ (%s)", self.adapter.name, len(pairs), len(drops),
                     drops["reason"].value_counts().to_dict())
        if pairs.empty:
            raise InputError(self.adapter.root, f"no scorable pair was produced ({len(drops)} listed in drops_, "
                             f"e.g. {drops['reason'].value_counts().to_dict()})")
        return pairs, drops

    def evaluate(self):
        """Generate, score, bootstrap; return the results rows (see the module docstring)."""
        from radrank.stats import bootstrap

        pairs, _ = self._generate()
        self.scores_ = score_pairs(pairs, self.metrics, self.metric_settings, self._overrides())
        leaves = [leaf for name in self.metrics for leaf in metrics.get(name).leaves]
        self.bootstrap_ = bootstrap({self.name: self.scores_}, leaves, n_boot=self.n_bootstrap,
                                    seed=self.bootstrap_seed, level=self.level, compare=False)
        return self._tidy(self._results(self.bootstrap_.replicates))

    def generate_only(self, out_parquet, out_drops=None):
        """Generate and write canonical pairs (``radrank.ingest.pairs.PAIRS_COLUMNS``) with provenance, and the
        drop file (default ``<out_parquet stem>.drops.csv``); no scoring. The generation job underneath is
        the workflow's (:func:`radrank.generate.generate`), so an interrupted run resumes. Returns the path."""
        out_parquet = Path(out_parquet)
        out_drops = Path(out_drops) if out_drops else out_parquet.with_name(out_parquet.stem + ".drops.csv")
        settings = self._generation_settings()
        self.pairs_, self.drops_ = generate(
            self.adapter, self.fn, shard=(0, 1), out_pairs=out_parquet, out_drops=out_drops,
            batch_size=self.batch_size, num_workers=self.num_workers, image_format=self.image_format,
            max_images=self.max_images, max_samples=self.max_samples, empty_hypothesis=self.empty_hypothesis,
            max_chars=self.max_chars, device=self.device, model=self.name, **settings)
        self.n_samples_ = len(self.pairs_)
        return str(out_parquet)

    def save_results(self, df, output_dir=None) -> str:
        """Write results.csv (``df``), results_summary.csv (bootstrap summary), generations.csv and
        drops.csv into ``output_dir`` (default the evaluator's); return the folder."""
        out = output_dir if output_dir is not None else self.output_dir
        if out is None:
            raise ValueError("save_results needs an output_dir (on the evaluator or in this call)")
        if self.bootstrap_ is None:
            raise RuntimeError("call evaluate() before save_results()")
        out = Path(out)
        check_arguments(output_dir=out)
        out.mkdir(parents=True, exist_ok=True)
        summary = self.bootstrap_.summary.drop(columns=["model"])
        summaries.write_model_files(results=df, summary=summary, generations=self._generations(), drops=self.drops_,
                               out_results=out / "results.csv", out_summary=out / "results_summary.csv",
                               out_generations=out / "generations.csv", out_drops=out / "drops.csv")
        return str(out)


def metric_names(names) -> tuple:
    """The ``metrics`` argument as a tuple of known metric names, or a ConfigError: a string would be read letter
    by letter (``'bleu2'`` as b, l, e, …), and no metric would return no rows."""
    if isinstance(names, str):
        raise ConfigError(f"metrics must be a list or tuple of metric names, e.g. ({names!r},); got the string "
                          f"{names!r}, which would be read letter by letter")
    names = tuple(names)
    if not names:
        raise ConfigError(f"metrics is empty: name at least one metric; known metrics: {metrics.names()}")
    for m in names:
        metrics_get(m)
    return names


def _whole(value) -> bool:
    import numbers

    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def check_arguments(*, n_bootstrap=0, level=0.95, max_chars=None, max_samples=None, output_dir=None) -> None:
    """The evaluators' numeric and folder arguments, checked before any generation or scoring: a ConfigError
    naming the argument (``max_chars=-5`` would cut the last five characters of every text, ``level=nan`` and
    ``n_bootstrap=-5`` would fail in numpy after all the work, an output_dir that is a file at the end)."""
    import math
    import numbers

    if not _whole(n_bootstrap) or n_bootstrap < 0:
        raise ConfigError(f"n_bootstrap must be a whole number >= 0 (0: the point estimate only); got {n_bootstrap!r}")
    if not isinstance(level, numbers.Real) or isinstance(level, bool) or not math.isfinite(level) \
            or not 0 < level < 1:
        raise ConfigError(f"level must be a number strictly between 0 and 1 (e.g. 0.95); got {level!r}")
    for name, value, none in (("max_chars", max_chars, "no cut"), ("max_samples", max_samples, "every sample")):
        if value is not None and (not _whole(value) or value < 1):
            raise ConfigError(f"{name} must be None ({none}) or a whole number >= 1; got {value!r}")
    if output_dir is not None and Path(output_dir).exists() and not Path(output_dir).is_dir():
        raise ConfigError(f"output_dir {output_dir} is a file, not a folder: the results are written into a folder")


def metrics_get(name):
    try:
        return metrics.get(name)
    except KeyError as e:
        raise ConfigError(str(e).strip("'\"")) from None


class ReportGenerationEvaluator(_GenerativeEvaluator):
    """Generate reports for a dataset and score them against its reference sections.

    ``report_generator(imgs, indications=None) -> list[str]`` (or ``(imgs)``), a
    callable or an import path. ``ref_section``: findings, impression, both or
    full; ``use_indication`` passes each report's ``indication_section`` (never
    the report body). Other keywords: see :class:`_GenerativeEvaluator` /
    the module docstring (``empty_hypothesis`` defaults to RadHarmony's "drop").
    """

    task = "report"
    default_metrics = ("bleu2", "bleu4", "rouge")

    def __init__(self, report_generator, *, dataset, metrics=("bleu2", "bleu4", "rouge"), ref_section: str = "findings",
                 use_indication: bool = False, indication_section: str = "indication", device: str = "cuda",
                 batch_size: int = 8, num_workers: int = 4, max_samples: int | None = None, n_bootstrap: int = 0,
                 bootstrap_seed: int = 0, output_dir=None, **options):
        super().__init__(report_generator, dataset=dataset, metrics=metrics, device=device, batch_size=batch_size,
                         num_workers=num_workers, max_samples=max_samples, n_bootstrap=n_bootstrap,
                         bootstrap_seed=bootstrap_seed, output_dir=output_dir, **options)
        self.ref_section = ref_section
        self.use_indication = bool(use_indication)
        self.indication_section = indication_section

    @property
    def report_generator(self):
        return self.fn

    def _generation_settings(self) -> dict:
        return {"task": "report", "ref_section": self.ref_section, "use_indication": self.use_indication,
                "indication_section": self.indication_section}


class VQAEvaluator(_GenerativeEvaluator):
    """Answer a VQA dataset's questions and score the answers (``vqa`` metric, MedGemma protocol).

    ``vqa_answerer(imgs, questions) -> list[str]``. ``is_closed`` chooses the
    closed subset: None (default) = reference exactly yes / no; a callable
    ``reference -> bool``; or ``"answer_type"`` = the dataset's own CLOSED / OPEN
    label. ``metrics`` defaults to ``("vqa",)``; other text metrics may be added.
    """

    task = "vqa"
    _role = "answerer"
    default_metrics = ("vqa",)

    def __init__(self, vqa_answerer, *, dataset, is_closed=None, metrics=("vqa",), device: str = "cuda",
                 batch_size: int = 8, num_workers: int = 4, max_samples: int | None = None, n_bootstrap: int = 0,
                 bootstrap_seed: int = 0, output_dir=None, **options):
        super().__init__(vqa_answerer, dataset=dataset, metrics=metrics, device=device, batch_size=batch_size,
                         num_workers=num_workers, max_samples=max_samples, n_bootstrap=n_bootstrap,
                         bootstrap_seed=bootstrap_seed, output_dir=output_dir, **options)
        if not (is_closed is None or is_closed == "answer_type" or callable(is_closed)):
            raise ConfigError("is_closed must be None, 'answer_type' or a callable reference -> bool")
        self.is_closed = is_closed

    @property
    def vqa_answerer(self):
        return self.fn

    def closed_mask(self, pairs):
        """Whether each pair is in the closed subset (see ``is_closed``)."""
        from radrank.metrics.vqa import is_yes_no_answer

        if self.is_closed is None:
            return [is_yes_no_answer(r) for r in pairs["reference"]]
        if self.is_closed == "answer_type":
            return [self._samples[s].answer_type == "closed" for s in pairs["sample_id"]]
        return [bool(self.is_closed(r)) for r in pairs["reference"]]

    def _overrides(self) -> dict:
        if self.is_closed is None:
            return {}
        from radrank.metrics.vqa import score_frame

        return {"vqa": lambda pairs: score_frame(pairs, closed=self.closed_mask(pairs))}

    def _results(self, replicates):
        from radrank.metrics.vqa import RESULT_ROWS, result_rows

        wide = summaries.results_table(replicates, label="overall")
        if not any(c in RESULT_ROWS for c in wide.columns):
            return wide
        rows = result_rows(wide)
        # Leaves of other metrics go in the overall row; a subset with no question has no row (RadHarmony).
        extra = [c for c in wide.columns if c not in ("label", "fold", "seed", "bootstrap") and c not in RESULT_ROWS]
        if extra:
            rows = rows.merge(wide[["bootstrap", *extra]].assign(label="overall"), on=["label", "bootstrap"],
                              how="left")
        closed = self.closed_mask(self.pairs_)
        present = {"overall": True, "closed": any(closed), "open": not all(closed)}
        return rows[rows["label"].map(present)].reset_index(drop=True)

    def _generations(self):
        out = self.pairs_[["sample_id", "context", "reference", "hypothesis"]].rename(columns={"context": "question"})
        return out.assign(closed=self.closed_mask(self.pairs_))


__all__ = ["ReportGenerationEvaluator", "VQAEvaluator", "score_pairs"]
