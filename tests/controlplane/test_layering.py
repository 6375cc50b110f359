"""The import arrows point one way: down the rooms of the shared base, apps → controlplane, never back,
never in a circle; the agent and the simulator stay free of Django.

Read from the source with ``ast`` (nothing is imported), the way a reviewer
would read the import lines.
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("controlplane", "proxy_app", "scheduler_app", "agent", "simulator")
# The rooms of controlplane/, lowest first: a room may import the rooms below it, never one above.
# The ground is what every room reads (now, figures, the environment); the project's own wiring
# (settings, URLs, the WSGI app, what Django looks up by name: models, admin, commands) stands on top.
ROOMS = (
    ("ground", ("controlplane.clock", "controlplane.figures", "controlplane.env", "controlplane.private_django",
                "controlplane.db_outage")),
    ("endpoints", ("controlplane.endpoints",)),
    ("series", ("controlplane.series",)),
    ("api", ("controlplane.api",)),
    ("pages", ("controlplane.pages",)),
    ("ops", ("controlplane.ops",)),
    ("wiring", ("controlplane.settings", "controlplane.urls", "controlplane.wsgi", "controlplane.models",
                "controlplane.admin", "controlplane.apps", "controlplane.management", "controlplane.sqlite_backend")),
)
# The rooms of proxy_app/, lowest first: what a pool stores and how its reports come in, the pool as a whole,
# where a request goes, the processes that run beside the web tier, then the two faces (the API, the pages),
# and Django's own files on top (the admin, the app's config, URLs, tasks, commands).
PROXY_ROOMS = (
    ("data", ("proxy_app.models", "proxy_app.managers")),
    ("ingest", ("proxy_app.ingest",)),
    ("pool", ("proxy_app.pool",)),
    ("placement", ("proxy_app.placement",)),
    ("prefix", ("proxy_app.prefix",)),
    ("tokenizers", ("proxy_app.tokenizers",)),
    ("ops", ("proxy_app.ops",)),
    ("api", ("proxy_app.api",)),
    ("pages", ("proxy_app.pages",)),
    ("wiring", ("proxy_app.admin", "proxy_app.apps", "proxy_app.urls", "proxy_app.tasks", "proxy_app.management")),
)
# Pure decisions: plain values in, plain answers out, no framework and no database.
PURE = ("proxy_app.placement.decision", "proxy_app.placement.fencing", "proxy_app.placement.prefix_cost",
        "proxy_app.prefix.index", "proxy_app.pool.aggregation", "proxy_app.pool.least_load",
        "proxy_app.ingest.normalise", "proxy_app.ingest.engines", "proxy_app.ingest.lenient",
        "proxy_app.tokenizers.files", "proxy_app.tokenizers.chat", "proxy_app.tokenizers.segments",
        "proxy_app.tokenizers.loaded")
DJANGO = ("django", "rest_framework", "drf_spectacular", "django_htmx", "django_q")


def module_name(path):
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path, packages=PACKAGES):
    """Modules a file imports, at any depth (a function-level import counts too), of ``packages``."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return {name for name in found if name.split(".")[0] in packages}


def sources(package):
    return [path for path in (ROOT / package).rglob("*.py") if "migrations" not in path.parts]


def project_graph():
    modules = {module_name(path): path for package in PACKAGES for path in sources(package)}
    return {name: {target for target in imports_of(path) if target in modules and target != name}
            for name, path in modules.items()}


def room_of(module, rooms=ROOMS):
    for floor, (room, prefixes) in enumerate(rooms):
        if any(module == prefix or module.startswith(prefix + ".") for prefix in prefixes):
            return floor, room
    return None


def test_it_puts_every_module_of_the_shared_base_in_a_room():
    homeless = sorted(name for name in project_graph() if name.startswith("controlplane.") and room_of(name) is None)
    assert homeless == []


def test_it_never_imports_a_higher_room_from_a_lower_one():
    upward = sorted((name, target) for name, targets in project_graph().items() if name.startswith("controlplane.")
                    for target in targets if target.startswith("controlplane.")
                    and room_of(target)[0] > room_of(name)[0])
    assert upward == []


def test_it_puts_every_module_of_the_proxy_in_a_room():
    homeless = sorted(name for name in project_graph()
                      if name.startswith("proxy_app.") and room_of(name, PROXY_ROOMS) is None)
    assert homeless == []


def test_it_never_imports_a_higher_room_of_the_proxy_from_a_lower_one():
    upward = sorted((name, target) for name, targets in project_graph().items() if name.startswith("proxy_app.")
                    for target in targets if target.startswith("proxy_app.")
                    and room_of(target, PROXY_ROOMS)[0] > room_of(name, PROXY_ROOMS)[0])
    assert upward == []


def test_it_keeps_the_decisions_free_of_django_and_of_the_database():
    graph = project_graph()
    for name in PURE:
        path = ROOT / (name.replace(".", "/") + ".py")
        framework = imports_of(path, packages=DJANGO)
        assert framework == set(), (name, sorted(framework))
        assert not any(target.endswith(("models", "managers")) for target in graph[name]), (name, graph[name])


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


def test_it_keeps_the_agent_and_the_simulator_free_of_django_and_of_the_control_planes():
    for package in ("agent", "simulator"):
        for path in sources(package):
            imported = imports_of(path, packages=DJANGO + ("controlplane", "scheduler_app"))
            assert imported == set(), (path.relative_to(ROOT), sorted(imported))
    # The agent is the ground of the host side: it imports nothing of the project but itself.
    assert {target.split(".")[0] for path in sources("agent") for target in imports_of(path)} == {"agent"}


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
