"""Every registered metric passes the metric contract (tests/contract.py) in its family's environment:
the test_contract.py of the family's test folder (tests/ for the core family, tests/envs/<family>/
otherwise) lists it. A metric added to the registry without its contract test fails here."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from contract import check_identity
from radrank import metrics

TESTS = Path(__file__).resolve().parent


def listed_by_family() -> dict[str, set]:
    """family -> the metrics its contract test lists (``metrics = (...)`` of MetricContract subclasses)."""
    found: dict[str, set] = {}
    for path in [TESTS / "test_contract.py", *sorted(TESTS.glob("envs/*/test_contract.py"))]:
        family = "core" if path.parent == TESTS else path.parent.name
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and any(getattr(b, "id", None) == "MetricContract" for b in node.bases):
                for stmt in node.body:
                    if isinstance(stmt, ast.Assign) and any(getattr(t, "id", None) == "metrics" for t in stmt.targets):
                        found.setdefault(family, set()).update(ast.literal_eval(stmt.value))
    return found


def test_every_registered_metric_is_under_contract_in_its_familys_environment():
    listed = listed_by_family()
    missing = [(name, metrics.get(name).family) for name in metrics.names()
               if name not in listed.get(metrics.get(name).family, set())]
    assert not missing, f"metrics without a contract test in their family's folder: {missing}"
    unknown = {name for names in listed.values() for name in names} - set(metrics.names())
    assert not unknown, f"contract tests list unregistered metrics: {sorted(unknown)}"


@pytest.mark.parametrize("name", metrics.names())
def test_every_metrics_identity_holds_its_scoring_settings_only(name):
    """The contract's identity check (tests/contract.py check_identity: every speed setting of every kind varied
    leaves the identity unchanged, every scored one changes it, the allow-list enters as a yes/no for the
    metric's own model) needs no model: here it runs for every registered metric in the core environment too."""
    check_identity(name)
