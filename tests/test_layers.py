"""The one-way layers of src/radrank: the library never imports the workflow layer (the Plan, the jobs, the
workers that run them), not even inside a function; the judge loop and runtime sit below the metrics; no import
cycles. Read from the source with ast, so a lazy import counts."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
# The workflow layer: the Plan (workflow), one job object per stage (jobs, mrscore_jobs), the workers that run the
# core env's jobs in Snakemake's process (workers).
WORKFLOW_LAYER = {"radrank.workflow", "radrank.jobs", "radrank.mrscore_jobs", "radrank.workers"}
# Entry points above both layers: the `radrank` command plans and runs the workflow.
ENTRY_POINTS = {"radrank.cli"}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(SRC.glob("radrank/**/*.py"))}


def imported(name: str) -> set[str]:
    """The radrank modules ``name`` imports anywhere in its file: ``from radrank import jobs`` names radrank.jobs
    (a submodule), ``from radrank.jobs import Report`` radrank.jobs (a name in it)."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the package, one level up per extra dot
                parents = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join([*parents, base] if base else parents)
            found.update(f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base for alias in node.names)
    return {m for m in found if m in MODULES and m != name}


def test_the_layer_lists_name_existing_modules():
    assert WORKFLOW_LAYER | ENTRY_POINTS <= set(MODULES), sorted((WORKFLOW_LAYER | ENTRY_POINTS) - set(MODULES))


def test_the_import_reader_sees_module_level_and_lazy_imports():
    """Known arrows of the tree, one at module level (workers imports jobs), one inside a function (cli imports
    workflow in load_plan): the reader the next test relies on finds both."""
    assert "radrank.jobs" in imported("radrank.workers")
    assert "radrank.workflow" in imported("radrank.cli")


def test_the_library_never_imports_the_workflow_layer():
    library = sorted(set(MODULES) - WORKFLOW_LAYER - ENTRY_POINTS)
    leaks = {name: sorted(imported(name) & WORKFLOW_LAYER) for name in library if imported(name) & WORKFLOW_LAYER}
    assert not leaks, f"library modules importing the workflow layer: {leaks}"


# Below the metrics: the judge loop and the model runtime (its generators) serve every metric and import none.
BELOW_METRICS = ("radrank.engine", "radrank.runtime", *(m for m in MODULES if m.startswith("radrank.runtime.")))


def reached_from(roots) -> dict[str, str]:
    """Every radrank module the roots import, transitively: module -> the module that imports it."""
    seen = {root: "" for root in roots}
    todo = list(roots)
    while todo:
        current = todo.pop()
        for name in imported(current):
            if name not in seen:
                seen[name] = current
                todo.append(name)
    return seen


def test_engine_and_runtime_import_no_metric_and_no_workflow():
    assert "radrank.runtime.generators" in BELOW_METRICS  # the generators the judges run on are in the runtime
    above = ("radrank.metrics", *WORKFLOW_LAYER)
    wrong = {m: by for m, by in reached_from(BELOW_METRICS).items() if m.startswith(above)}
    assert not wrong, f"imported from below the metrics (module: imported by): {wrong}"


def test_the_walk_sees_what_a_metric_imports():
    """The transitive walk finds the arrows of a judge metric (so an empty result above is not a blind check)."""
    reached = reached_from(["radrank.metrics.green"])
    assert {"radrank.metrics.judge", "radrank.runtime.generators", "radrank.engine"} <= set(reached)


def test_no_import_cycles():
    """No module reaches itself through its imports, lazy ones included (Tarjan's strongly connected components)."""
    graph = {name: imported(name) for name in MODULES}
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while not component or component[-1] != v:
                component.append(stack.pop())
                on_stack.discard(component[-1])
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    assert not cycles, f"import cycles: {cycles}"


def test_the_cycle_check_sees_a_cycle(monkeypatch):
    """With one arrow added back up (the report's page module importing the report package's loader), the check
    above finds the loop: it is not blind."""
    real = imported

    def with_arrow(name):
        return real(name) | ({"radrank.report"} if name == "radrank.report.page" else set())

    monkeypatch.setitem(globals(), "imported", with_arrow)
    with pytest.raises(AssertionError, match="import cycles"):
        test_no_import_cycles()
