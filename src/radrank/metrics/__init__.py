"""The metric registry: every metric by name, each one object (:class:`radrank.metrics.base.Metric`).

``import radrank.metrics`` costs nothing: :data:`REGISTRY` maps each name to where its object
lives, and a module is imported the first time one of its metrics is asked for. Adding a metric
is its module, one line here, its family's requirement line and its tests (docs/metrics.md: "Adding a
metric").
"""

from __future__ import annotations

from radrank.registry import Registry

REGISTRY = Registry("metric", {
    "bleu2": "radrank.metrics.bleu2:METRIC",
    "bleu4": "radrank.metrics.bleu4:METRIC",
    "rouge": "radrank.metrics.rouge:METRIC",
    "radcliq": "radrank.metrics.radcliq:METRIC",
    "bertscore": "radrank.metrics.bertscore:METRIC",
    "semb": "radrank.metrics.semb:METRIC",
    "chexbert": "radrank.metrics.chexbert:METRIC",
    "radgraph": "radrank.metrics.radgraph:METRIC",
    "ratescore": "radrank.metrics.ratescore:METRIC",
    "green": "radrank.metrics.green:METRIC",
    "crimson": "radrank.metrics.crimson:METRIC",
    "mrscore": "radrank.metrics.mrscore:METRIC",
    "mrscore_rubric": "radrank.metrics.mrscore_rubric:METRIC",
    "radeval_bertscore": "radrank.metrics.radeval_extras:RADEVAL_BERTSCORE",
    "f1radbert_ct": "radrank.metrics.radeval_extras:F1RADBERT_CT",
    "srrbert": "radrank.metrics.radeval_extras:SRRBERT",
    "temporal": "radrank.metrics.radeval_extras:TEMPORAL",
    "mammo_green": "radrank.metrics.radeval_api:MAMMO_GREEN",
    "radfact_ct": "radrank.metrics.radeval_api:RADFACT_CT",
    "vqa": "radrank.metrics.vqa:METRIC",
})


names = REGISTRY.names
get = REGISTRY.get  # the Metric called ``name`` (a KeyError naming the known ones)


def leaves(name: str):
    return get(name).leaves


def configured(name: str, config: dict):
    """Metric ``name``'s settings as a workflow config gives them: ``metric_settings.<name>`` over the
    defaults, with the top-level ``trust_remote_code`` list — the one place they are built, both when
    the workflow loads and in the job."""
    return get(name).settings((config.get("metric_settings") or {}).get(name) or {},
                              allow_remote_code=config.get("trust_remote_code") or ())


def score(name: str, pairs, settings=None, inputs: dict | None = None, runtime=None):
    """Per-sample scores of metric ``name`` on ``pairs``: ``sample_id`` + the metric's columns, one row per
    pair in order (checked). ``settings``: its Settings, or a mapping checked into them."""
    from radrank.runtime import Runtime

    metric = get(name)
    if not isinstance(settings, metric.Settings):
        settings = metric.settings(settings or {})
    out = metric.score(pairs, settings, dict(inputs or {}), runtime if runtime is not None else Runtime())
    return checked(metric, pairs, out)


def checked(metric, pairs, out):
    """``out`` restricted to ``sample_id`` + the metric's columns, after checking rows and columns."""
    missing = [c for c in ("sample_id", *metric.columns) if c not in out.columns]
    if missing:
        raise RuntimeError(f"metric {metric.name!r} did not return columns {missing}")
    if len(out) != len(pairs) or not out["sample_id"].reset_index(drop=True).equals(
            pairs["sample_id"].reset_index(drop=True)):
        raise RuntimeError(f"metric {metric.name!r} returned rows that do not match the pairs")
    result = out[["sample_id", *metric.columns]].reset_index(drop=True)
    result.attrs = dict(out.attrs)  # model provenance travels in attrs["models"]
    return result
