"""The contract every registered metric passes, in its family's environment (like torchmetrics' MetricTester).

A family's test folder subclasses :class:`MetricContract` once, listing its metrics and giving, per
metric, the settings that point at tiny local models (fixture ``contract_settings``) and, where a
metric cannot run on a tiny model here (an API judge), a runtime with a supplied endpoint
(``contract_runtime``). Every test below then runs for every metric listed:

* the declaration is complete and consistent (columns, leaves, NaN policy, requirements, board, settings);
* an unknown setting and an ill-typed value of every setting are refused when settings are built,
  naming ``metric_settings.<metric>.<key>`` (what the workflow does when it loads);
* identity holds the scoring settings only: changing any speed-only setting (of any kind) leaves it
  unchanged, changing any scored one changes it, and the remote-code allow-list enters as a yes/no for
  the metric's own model (:func:`check_identity`);
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
TOLERANCE = 1e-6  # float differences between batch compositions (length-sorted batches, padding), absolute and
# relative: a float32 reward of magnitude 7 moves by a few ulps (1.4e-6) between a batch of 1 and of 8


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


def other_values(spec, current) -> list:
    """Valid-looking values of every kind a setting admits, each different from ``current`` (the metric's own
    rules may still refuse some). Every kind a settings class can declare (radrank.settings._kinds: bool, int,
    float, str, null, a Literal, a list of strings; a dict or any other type is refused there) gets one, so no
    setting escapes the identity check."""
    out = []
    for kind in spec.kinds:
        if kind is bool:
            out += [not current] if isinstance(current, bool) else [True, False]
        elif kind is int:
            base = current if isinstance(current, int) and not isinstance(current, bool) else spec.minimum or 1
            out += [v for v in (base + 1, base - 1, base + 2, base) if v != current
                    and (spec.minimum is None or v >= spec.minimum) and (spec.maximum is None or v <= spec.maximum)]
        elif kind is float:
            base = float(current) if isinstance(current, (int, float)) and not isinstance(current, bool) else None
            candidates = ([base * 0.5, base * 0.75 + 0.01, base + 0.5] if base else [0.25, 0.5, 1.5]) + [0.3]
            out += [v for v in candidates if v != current
                    and (spec.minimum is None or v >= spec.minimum) and (spec.maximum is None or v <= spec.maximum)]
        elif kind is str:
            text = current if isinstance(current, str) else ""
            out += [v for v in ("cpu", "auto", "cuda:1", "off", text + " (changed)", "org/other-model", "other")
                    if v != current]
        elif kind is None:
            if current is not None:
                out.append(None)
        elif kind[0] == "literal":
            out += [c for c in kind[1] if c != current or type(c) is not type(current)]
        elif kind[0] == "strings":
            listed = tuple(current) if isinstance(current, (list, tuple)) else ()
            out += [(*listed, "another"), listed[:-1]] if listed else [("another",)]
        else:
            raise AssertionError(f"{spec.name}: a kind of setting the contract cannot vary: {kind!r}")
    return out


# Scored settings whose every other value the metric's own rules refuse on their own: (the settings a variation
# needs besides, values to try). Each stays under the identity check instead of being skipped.
VARIATION_NEEDS = {
    ("mrscore_rubric", "verdict"): ({"backend": "local"}, ("constrained",)),
    ("ratescore", "affinity_matrix"): ({}, ("short",)),
}


def check_identity(metric_name: str, values: dict | None = None) -> None:
    """A metric's identity holds its scoring settings only: every speed setting, of every kind, varied on its own
    leaves the identity unchanged; every scored setting varied changes it (except those ``values`` sets: what
    makes the metric run here). A setting every variation of which the metric's own rules refuse fails, unless
    :data:`VARIATION_NEEDS` says what it needs (and it is skipped where ``values`` sets those otherwise). The
    top-level ``trust_remote_code`` list enters as whether the metric's model is on it: an unrelated id changes
    nothing, the model's own id changes the identity."""
    m = metrics.get(metric_name)
    values = dict(values or {})
    base = m.settings(values)
    specs = field_specs(m.Settings)
    assert set(base.identity()) == {k for k, spec in specs.items() if spec.scores}, metric_name
    for key, spec in specs.items():
        if key == "trust_remote_code":
            continue
        if key in values and spec.scores:  # what makes the metric run here (e.g. a tiny model) stays
            continue
        start, tries = base, other_values(spec, getattr(base, key))
        if (metric_name, key) in VARIATION_NEEDS:
            needs, extra = VARIATION_NEEDS[metric_name, key]
            if any(k in values and values[k] != v for k, v in needs.items()):
                continue  # what it needs is fixed otherwise by ``values`` (e.g. a constrained verdict, an endpoint)
            start = base.replace(**needs)
            tries = [*extra, *tries]
        accepted = []
        for value in tries:
            if value == getattr(start, key) and type(value) is type(getattr(start, key)):
                continue
            try:
                accepted.append(start.replace(**{key: value}))
            except ConfigError:  # a value the metric's own rules refuse (e.g. another backend's needs)
                continue
        assert accepted, (f"{metric_name}.{key}: every variation was refused; say what it needs in "
                          "tests/contract.py VARIATION_NEEDS")
        for changed in accepted:
            same = m.identity(changed) == m.identity(start)
            assert same == (not spec.scores), (metric_name, key, getattr(changed, key),
                                               "scored setting left the identity unchanged" if spec.scores
                                               else "speed setting changed the identity")
    if "trust_remote_code" in specs:
        meta = m.Settings.__dataclass_fields__["trust_remote_code"].metadata
        model_field = meta.get("remote_code_of")
        assert model_field, f"{metric_name}: trust_remote_code must be declared with radrank.settings.remote_code()"
        model = getattr(base, model_field) or "org/the-model"
        with_model = {**values, model_field: model}
        alone = m.settings(with_model)
        unrelated = m.settings(with_model, allow_remote_code=("someone/unrelated", "/some/folder"))
        allowed = m.settings(with_model, allow_remote_code=("someone/unrelated", model))
        assert m.identity(unrelated) == m.identity(alone), f"{metric_name}: an unrelated allow-list id changed it"
        assert m.identity(allowed) != m.identity(alone), f"{metric_name}: its own model's permission is not in it"
        assert m.identity(allowed)["settings"]["trust_remote_code"] is True
        assert m.identity(alone)["settings"]["trust_remote_code"] is False


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
            np.testing.assert_allclose(x[~np.isnan(x)], y[~np.isnan(y)], rtol=TOLERANCE, atol=TOLERANCE,
                                       err_msg=f"{what}: {c}")
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
        assert set(defaults.identity()) == {k for k in defaults.as_dict() if specs[k].scores}
        assert {k: v for k, v in defaults.identity().items() if k != "trust_remote_code"} == \
            {k: v for k, v in defaults.as_dict().items() if specs[k].scores and k != "trust_remote_code"}

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
        check_identity(metric_name, contract_settings)

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
