"""The judge engine and the model runtime sit below the metrics: nothing they import, directly or through
other radrank modules, is a metric (radrank.metrics) or the workflow layer (radrank.jobs, radrank.workflow).
Read from the source, so a lazy import inside a function counts too."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
ABOVE = ("radrank.metrics", "radrank.jobs", "radrank.workflow")


def module_file(name: str) -> Path | None:
    path = SRC.joinpath(*name.split("."))
    for candidate in (path.with_suffix(".py"), path / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def imports_of(name: str) -> set[str]:
    """The radrank modules ``name``'s source imports (anywhere in the file), as dotted names."""
    path = module_file(name)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
            found.add(base)
            found.update(f"{base}.{a.name}" for a in node.names)  # ``from radrank import metrics``
    return {m for m in found if m.startswith("radrank") and module_file(m) is not None}


def reached_from(roots) -> dict[str, str]:
    """Every radrank module the roots import, transitively: module -> the module that imports it."""
    seen = {root: "" for root in roots}
    todo = list(roots)
    while todo:
        current = todo.pop()
        for imported in imports_of(current):
            if imported not in seen:
                seen[imported] = current
                todo.append(imported)
    return seen


def lower_layer() -> list[str]:
    runtime = sorted(f"radrank.runtime.{p.stem}" for p in (SRC / "radrank" / "runtime").glob("*.py")
                     if p.stem != "__init__")
    return ["radrank.engine", "radrank.runtime", *runtime]


def test_engine_and_runtime_import_no_metric_and_no_workflow():
    roots = lower_layer()
    assert "radrank.runtime.generators" in roots  # the generators the judges run on are in the runtime
    reached = reached_from(roots)
    wrong = {m: by for m, by in reached.items() if m.startswith(ABOVE)}
    assert not wrong, f"imported from below the metrics (module: imported by): {wrong}"


def test_the_check_sees_an_arrow_up():
    """The walk finds what the metrics import (so an empty result above is not a blind check)."""
    reached = reached_from(["radrank.metrics.green"])
    assert "radrank.metrics.judge" in reached and "radrank.runtime.generators" in reached
    assert "radrank.engine" in reached
