"""The contract every registered metric passes, in its family's environment (like torchmetrics' MetricTester).

A family's test folder subclasses :class:`MetricContract` once, listing its metrics and giving, per
metric, the settings that point at tiny local models (fixture ``contract_settings``) and, where a
metric cannot run on a tiny model here (an API judge), a runtime with a supplied endpoint
(``contract_runtime``). Every test below then runs for every metric listed:

* the declaration is complete and consistent (columns, leaves, NaN policy, requirements, board, settings);
* an unknown setting and an ill-typed value of every setting are refused when settings are built,
  naming ``metric_settings.<metric>.<key>`` (what the workflow does when it loads);
* identity holds the scoring settings only: changing a speed-only setting leaves it unchanged;
* scoring keeps the pairs' rows and order (also shuffled), returns exactly the declared columns, and
  respects the declared NaN policy;
* ``weights(settings)`` is exactly what scoring resolves, and the load-time check finds each of them;
* shard invariance: two slices scored separately equal the whole; chunk invariance: a batch of one
  equals the default batch (speed settings change no number).

tests/test_contract_coverage.py checks that every registered metric is listed by the folder of its
family, so a new metric cannot skip this.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from radrank import metrics
from radrank.errors import ConfigError
from radrank.runtime import Runtime, available
from radrank.settings import field_specs

# Tiny pairs with what real submissions have: repeated references, a duplicate pair, an empty
# hypothesis, newlines, punctuation, non-ASCII text, a long report and a perfect copy.
CASES = pd.DataFrame({
    "sample_id": [f"case-{i:02d}" for i in range(8)],
    "reference": ["No acute cardiopulmonary process.",
                  "Small bilateral pleural effusions with bibasilar atelectasis.",
                  "Mild cardiomegaly. No pleural effusion.",
                  "No acute cardiopulmonary process.",
                  "Right lower lobe opacity,\nconcerning for pneumonia.",
                  "Stable cardiomediastinal silhouette; no pneumothorax.",
                  "Mild cardiomegaly. No pleural effusion.",
                  " ".join(["Lungs are clear without focal consolidation, effusion or pneumothorax."] * 6)],
    "hypothesis": ["No acute findings.",
                   "Bilateral pleural effusions and basilar atelectasis.",
                   "",
                   "No acute findings.",
                   "Opacité du lobe inférieur droit – pneumonia?",
                   "Stable cardiomediastinal silhouette; no pneumothorax.",
                   "Mild cardiomegaly with clear lungs.",
                   "Lungs are clear."],
    "context": ["", "Age: 71", "", "", "Indication: cough", "", "", ""],
    "age": [np.nan, 71.0, 58.0, np.nan, 64.0, np.nan, 80.0, 45.0],
    "indication": ["", "Dyspnea.", "", "", "Cough.", "", "Follow-up.", ""],
})
TOLERANCE = 1e-6  # float differences between batch compositions (length-sorted batches, padding)


def wrong_values(spec) -> list:
    """Values no kind of a setting admits: each must be refused, naming the key."""
    kinds = spec.kinds
    out = []
    if bool not in kinds:
        out.append(True)
    else:
        out.append("yes please")  # not silently truthy
    if not any(k in (int, float) for k in kinds):
        out.append(3)
    else:
        out.append("3")
    if str not in kinds and not any(isinstance(k, tuple) and k[0] == "literal" for k in kinds):
        out.append("a string")
    if None not in kinds:
        out.append(None)
    out.append({"nested": "mapping"})
    return out


def other_value(spec):
    """A valid value different from the default (None when there is no obvious one)."""
    d = spec.default
    for kind in spec.kinds:
        if kind is bool and isinstance(d, bool):
            return not d
        if kind is int and isinstance(d, int) and not isinstance(d, bool):
            v = d + 1
            return v if spec.maximum is None or v <= spec.maximum else d - 1
        if kind is float and isinstance(d, (int, float)) and not isinstance(d, bool):
            return float(d) * 0.5 if d else 0.25
        if isinstance(kind, tuple) and kind[0] == "literal":
            choices = [c for c in kind[1] if c != d]
            if choices:
                return choices[0]
    return None


def numeric(frame):
    return [c for c in frame.columns if c != "sample_id" and pd.api.types.is_numeric_dtype(frame[c])]


def assert_scores_equal(a, b, what: str):
    assert list(a.columns) == list(b.columns), what
    assert a["sample_id"].tolist() == b["sample_id"].tolist(), what
    for c in a.columns:
        if c == "sample_id":
            continue
        if c in numeric(a):
            x, y = a[c].to_numpy(dtype="float64"), b[c].to_numpy(dtype="float64")
            assert np.array_equal(np.isnan(x), np.isnan(y)), f"{what}: NaN pattern of {c} differs"
            np.testing.assert_allclose(x[~np.isnan(x)], y[~np.isnan(y)], rtol=0, atol=TOLERANCE, err_msg=f"{what}: {c}")
        else:
            assert a[c].tolist() == b[c].tolist(), f"{what}: {c}"


class MetricContract:
    """Subclass in a family's test folder; set ``metrics`` and override the two fixtures."""

    metrics: tuple = ()

    def pytest_generate_tests(self, metafunc):
        if "metric_name" in metafunc.fixturenames:
            metafunc.parametrize("metric_name", list(self.metrics))

    @pytest.fixture
    def contract_settings(self, metric_name) -> dict:
        """``metric_settings.<metric>`` that make the metric run here (tiny local models)."""
        return {}

    @pytest.fixture
    def contract_runtime(self, metric_name):
        """A fresh runtime per scoring call (override to supply an endpoint or a model)."""
        return Runtime

    @pytest.fixture
    def contract_inputs(self, metric_name, contract_settings):
        """The scores of the metrics this one requires, on :data:`CASES` (override when they cannot run here)."""
        metric = metrics.get(metric_name)
        return {req: metrics.score(req, CASES) for req in metric.requires}

    # -- helpers -------------------------------------------------------------------------------------
    def _score(self, name, pairs, settings, inputs, make_runtime):
        runtime = make_runtime()
        out = metrics.score(name, pairs, settings, inputs, runtime)
        return out, runtime

    # -- the declaration -------------------------------------------------------------------------------
    def test_declaration_is_complete(self, metric_name):
        from pathlib import Path

        m = metrics.get(metric_name)
        assert m.name == metric_name and m.description and m.version
        repo = Path(__file__).resolve().parents[1]
        assert (repo / "envs/requirements" / f"{m.family}.in").is_file(), f"{metric_name}: no family {m.family}"
        assert len(set(m.columns)) == len(m.columns) and "sample_id" not in m.columns
        for leaf in m.leaves:
            used = (leaf.column,) if leaf.is_mean else leaf.stats
            assert set(used) <= set(m.columns), (metric_name, leaf.name)
        assert set(m.nan_columns) <= set(m.columns)
        assert m.reason_column is None or m.reason_column in m.columns
        assert set(m.explained_by) <= set(m.columns)
        assert all(r in metrics.names() for r in m.requires)
        leaf_names = {leaf.name for leaf in m.leaves}
        assert all(col.leaf in leaf_names for col in m.board)
        specs = field_specs(m.Settings)
        assert all(spec.doc for spec in specs.values())
        defaults = m.settings()
        assert defaults.identity() == {k: v for k, v in defaults.as_dict().items() if specs[k].scores}

    def test_unknown_setting_is_refused_naming_the_key(self, metric_name):
        with pytest.raises(ConfigError, match=rf"metric_settings\.{metric_name}\.no_such_setting"):
            metrics.get(metric_name).settings({"no_such_setting": 1})

    def test_ill_typed_settings_are_refused_naming_the_key(self, metric_name):
        m = metrics.get(metric_name)
        for key, spec in field_specs(m.Settings).items():
            if key == "trust_remote_code":  # the top-level list only: refused as a key (below)
                continue
            for value in wrong_values(spec):
                with pytest.raises(ConfigError, match=rf"metric_settings\.{metric_name}\.{key}\b"):
                    m.settings({key: value})
        if "trust_remote_code" in field_specs(m.Settings):
            with pytest.raises(ConfigError, match="top-level list `trust_remote_code`"):
                m.settings({"trust_remote_code": ["org/x"]})

    def test_identity_holds_scoring_settings_only(self, metric_name, contract_settings):
        m = metrics.get(metric_name)
        base = m.settings(contract_settings)
        for key, spec in field_specs(m.Settings).items():
            value = other_value(spec)
            if value is None or key in contract_settings:
                continue
            try:
                changed = base.replace(**{key: value})
            except ConfigError:  # a value the metric's own rules refuse (e.g. another backend's needs)
                continue
            assert (m.identity(changed) == m.identity(base)) == (not spec.scores), (metric_name, key)

    # -- scoring -------------------------------------------------------------------------------------
    def test_rows_order_columns_and_nan_policy(self, metric_name, contract_settings, contract_runtime,
                                              contract_inputs):
        m = metrics.get(metric_name)
        shuffled = CASES.sample(frac=1.0, random_state=3).reset_index(drop=True)
        inputs = {k: v.set_index("sample_id").loc[shuffled["sample_id"]].reset_index()
                  for k, v in contract_inputs.items()}
        out, _ = self._score(metric_name, shuffled, contract_settings, inputs, contract_runtime)
        assert out["sample_id"].tolist() == shuffled["sample_id"].tolist()
        assert list(out.columns) == ["sample_id", *m.columns]
        for column in numeric(out):
            if column not in m.nan_columns:
                assert np.isfinite(out[column].to_numpy(dtype="float64")).all(), (metric_name, column)
        if m.reason_column:
            reasons = out[m.reason_column].fillna("").astype(str)
            for column in m.nan_columns:
                missing = out[column].isna()
                assert (reasons[missing] != "").all(), f"{metric_name}: NaN {column} without a reason"

    def test_weights_are_what_scoring_resolves(self, metric_name, contract_settings, contract_runtime,
                                               contract_inputs):
        m = metrics.get(metric_name)
        s = m.settings(contract_settings)
        declared = m.weights(s)
        for ref in declared:
            assert available(ref) is None, f"{metric_name}: the load-time check would refuse {ref}"
        _, runtime = self._score(metric_name, CASES, s, contract_inputs, contract_runtime)
        named = {(r.key, r.ref) for r in declared if r.ref}
        derived = {r.key for r in declared if not r.ref}
        resolved = {(r.key, r.ref) for r in runtime.resolved}
        assert {pair for pair in resolved if pair[0] not in derived} == named, metric_name
        assert derived <= {key for key, _ in resolved}, metric_name

    def test_scores_depend_on_the_columns_it_reads_only(self, metric_name, contract_settings, contract_runtime,
                                                        contract_inputs):
        """A pair's scores are a function of ``reads`` (and the settings): other columns and the sample id may
        change freely — what lets the group job score identical pairs of different models once."""
        m = metrics.get(metric_name)
        assert set(m.reads) <= set(CASES.columns) and {"reference", "hypothesis"} <= set(m.reads)
        other = CASES.copy()
        other["sample_id"] = [f"other-{i}" for i in range(len(CASES))]
        for column in set(CASES.columns) - set(m.reads) - {"sample_id"}:
            other[column] = [99.0] * len(CASES) if column == "age" else ["Other text."] * len(CASES)
        inputs = {k: v.assign(sample_id=other["sample_id"]) for k, v in contract_inputs.items()}
        if m.needs_corpus(m.settings(contract_settings)):
            inputs["corpus_pairs"] = other
        base, _ = self._score(metric_name, CASES, contract_settings, contract_inputs, contract_runtime)
        changed, _ = self._score(metric_name, other, contract_settings, inputs, contract_runtime)
        assert_scores_equal(changed.assign(sample_id=CASES["sample_id"]), base, f"{metric_name}: unread columns")

    def test_shard_invariance(self, metric_name, contract_settings, contract_runtime, contract_inputs):
        m = metrics.get(metric_name)
        whole, _ = self._score(metric_name, CASES, contract_settings, contract_inputs, contract_runtime)
        parts = []
        for rows in (slice(0, 3), slice(3, len(CASES))):
            part = CASES.iloc[rows].reset_index(drop=True)
            inputs = {k: v.iloc[rows].reset_index(drop=True) for k, v in contract_inputs.items()}
            if m.needs_corpus(m.settings(contract_settings)):
                inputs["corpus_pairs"] = CASES
            parts.append(self._score(metric_name, part, contract_settings, inputs, contract_runtime)[0])
        assert_scores_equal(pd.concat(parts, ignore_index=True), whole, f"{metric_name}: shards")

    @pytest.fixture
    def speed_variants(self, metric_name) -> list:
        """Speed-only settings to score with besides the defaults (default: a batch of one, where batched)."""
        specs = field_specs(metrics.get(metric_name).Settings)
        return [{"batch_size": 1}] if "batch_size" in specs else []

    def test_speed_settings_change_no_number(self, metric_name, contract_settings, contract_runtime,
                                             contract_inputs, speed_variants):
        m = metrics.get(metric_name)
        specs = field_specs(m.Settings)
        if not speed_variants:  # then nothing may claim to be speed-only but placement
            assert all(spec.scores or key in ("device", "cache_dir") for key, spec in specs.items()), metric_name
            return
        default, _ = self._score(metric_name, CASES, contract_settings, contract_inputs, contract_runtime)
        for variant in speed_variants:
            assert all(not specs[k].scores for k in variant), (metric_name, variant)
            other, _ = self._score(metric_name, CASES, {**contract_settings, **variant}, contract_inputs,
                                   contract_runtime)
            assert_scores_equal(other, default, f"{metric_name}: {variant} vs default")
