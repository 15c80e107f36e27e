"""config/README.md is generated from the schema's descriptions and the metrics' typed settings
(``python -m radrank.configdoc > config/README.md``), and every key has a description."""

from __future__ import annotations

from pathlib import Path

import yaml

from radrank import configdoc

REPO = Path(__file__).resolve().parents[1]


def test_config_readme_is_the_generated_one():
    assert (REPO / "config/README.md").read_text() == configdoc.render(), \
        "config/README.md is out of date: python -m radrank.configdoc > config/README.md"


def test_every_schema_key_is_described():
    def walk(spec, path):
        for key, sub in (spec.get("properties") or {}).items():
            assert sub.get("description"), f"schema key {path}{key} has no description"
            walk(sub, f"{path}{key}.")
            if isinstance(sub.get("items"), dict):
                walk(sub["items"], f"{path}{key}[].")

    walk(yaml.safe_load((REPO / "schemas/config.schema.yaml").read_text()), "")


def test_the_metrics_table_of_docs_metrics_md_is_the_registrys():
    """docs/metrics.md's table is generated from the registry: a new metric, leaf, environment or default model
    makes this fail until the page is regenerated."""
    page = (REPO / "docs/metrics.md").read_text()
    start, end = page.index(configdoc.METRICS_BEGIN), page.index(configdoc.METRICS_END) + len(configdoc.METRICS_END)
    assert page[start:end] + "\n" == configdoc.metrics_table(), \
        "docs/metrics.md's table is out of date: python -m radrank.configdoc --metrics, pasted between its markers"
