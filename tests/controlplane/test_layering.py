"""The import arrows point one way: apps → controlplane, never back, never in a circle.

Read from the source with ``ast`` (nothing is imported), the way a reviewer
would read the import lines.
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("controlplane", "proxy_app", "scheduler_app", "agent")


def module_name(path):
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path):
    """Project modules a file imports, at any depth (a function-level import counts too)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return {name for name in found if name.split(".")[0] in PACKAGES}


def project_graph():
    modules = {module_name(path): path for package in PACKAGES for path in (ROOT / package).rglob("*.py")
               if "migrations" not in path.parts}
    return {name: {target for target in imports_of(path) if target in modules and target != name}
            for name, path in modules.items()}


def test_it_keeps_the_shared_base_free_of_the_apps():
    graph = project_graph()
    offending = {name: sorted(t for t in targets if t.startswith(("proxy_app", "scheduler_app")))
                 for name, targets in graph.items() if name.startswith("controlplane")}
    assert {name: targets for name, targets in offending.items() if targets} == {}


def test_it_keeps_the_two_control_planes_apart():
    graph = project_graph()
    crossing = [(name, target) for name, targets in graph.items() for target in targets
                if name.split(".")[0] in ("proxy_app", "scheduler_app")
                and target.split(".")[0] in ("proxy_app", "scheduler_app")
                and name.split(".")[0] != target.split(".")[0]]
    assert crossing == []


def test_it_has_no_import_circle():
    graph = project_graph()
    state, cycles = {}, []

    def visit(node, trail):
        state[node] = "open"
        for target in sorted(graph[node]):
            if state.get(target) == "open":
                cycles.append(trail[trail.index(target):] + [target])
            elif target not in state:
                visit(target, trail + [target])
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    assert cycles == []
