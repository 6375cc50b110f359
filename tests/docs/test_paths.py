"""Every repository path the documentation names exists: a file or folder in backticks
(``proxy_app/link.py``), a link (``[…](docs/contract.md)``), or a dotted name of the code
(``controlplane.api.tokens.Scope``, ``controlplane.wsgi:application``).

A name in backticks counts as a path when its first part is something the repository tracks at its
root (``agent/``, ``docs/``, ``fw``, …), so URLs (``/v1/instance/list``), files of a host
(``/etc/…``) and runtime files (``var/…``) are left alone; a dotted name, when its first part is one
of the project's packages. Dotted names are imported and their attributes looked up.

A file that is gone but worth citing (a superseded measurement's) is named as the command that shows
it, ``git show <commit>:<path>``: that is not a path, and it works.
"""

import importlib
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted([ROOT / "README.md", ROOT / "bench" / "README.md", *(ROOT / "docs").glob("*.md")])
PACKAGES = ("agent", "controlplane", "proxy_app", "scheduler_app", "simulator")

CODE = re.compile(r"`([^`\s]+)`")
LINK = re.compile(r"\]\(([^)\s]+)\)")
DOTTED = re.compile(rf"^(?:{'|'.join(PACKAGES)})(?:\.\w+)+(?::\w+)?$")
# A file's name (`agent.py` in a table of a package's files) is not a dotted name of the code.
FILE_SUFFIXES = re.compile(r"\.(py|md|html|js|css|json|toml|txt|conf|prom|service|sh|ya?ml)$")


def tracked_roots():
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return {line.split("/")[0] for line in listed.splitlines()}


def named_paths(text, roots):
    """The repository paths ``text`` names in backticks, as written."""
    for token in CODE.findall(text):
        path = token.split("::")[0]  # tests/x.py::test_name
        path = re.sub(r":\d+(?:-\d+)?$", "", path)  # file.py:123
        if path.startswith("./"):
            path = path[2:]
        if path.split("/")[0] in roots and ("/" in path or path in roots):
            yield path


def linked_paths(text, doc):
    """The repository paths ``doc``'s links point at, relative to the repository root."""
    for target in LINK.findall(text):
        if re.match(r"^[a-z]+:", target) or target.startswith("#"):
            continue
        path = (doc.parent / target.split("#")[0]).resolve()
        yield str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def expanded(path):
    """A shell's brace expansion of ``path`` (``x-{busy,idle}.prom``: both files)."""
    found = re.search(r"\{([^{}]*,[^{}]*)\}", path)
    if not found:
        return [path]
    return [name for part in found[1].split(",") for name in expanded(path[:found.start()] + part + path[found.end():])]


def exists(path):
    if any(mark in path for mark in "*?["):
        return any(ROOT.glob(path))
    return all((ROOT / name).exists() for name in expanded(path))


def resolves(name):
    """Whether a dotted name (``package.module.attribute``, or ``module:attribute``) is in the code."""
    module_name, _, attribute = name.partition(":")
    parts = module_name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for part in [*parts[cut:], *([attribute] if attribute else [])]:
            if not hasattr(found, part):
                return False
            found = getattr(found, part)
        return True
    return False


def dotted_names(text):
    return [name for name in CODE.findall(text) if DOTTED.match(name) and not FILE_SUFFIXES.search(name)]


def missing_in(doc):
    text = doc.read_text()
    roots = tracked_roots()
    missing = [path for path in [*named_paths(text, roots), *linked_paths(text, doc)] if not exists(path)]
    missing += [name for name in dotted_names(text) if not resolves(name)]
    return sorted(set(missing))


@pytest.mark.parametrize("doc", DOCS, ids=lambda doc: str(doc.relative_to(ROOT)))
def test_every_path_a_doc_names_exists(doc):
    assert missing_in(doc) == []


def test_it_finds_a_moved_module_a_missing_link_and_a_wrong_dotted_name(tmp_path):
    doc = tmp_path / "doc.md"
    doc.write_text("See `controlplane/liveness.py`, `controlplane/ops/up.py` and `docs/`; "
                   "[the contract](docs/no-such.md), [up](#up), [site](https://example.org); "
                   "`controlplane.models.RegisteredEndpoint`, `controlplane.api.tokens.Scope`, "
                   "`controlplane.wsgi:application`, `controlplane.wsgi:nothing`; not paths: "
                   "`/v1/instance/list`, `var/up-tokens.json`, `access.py`, `agent.py`.")
    text = doc.read_text()
    roots = tracked_roots()
    assert [path for path in named_paths(text, roots) if not exists(path)] == ["controlplane/liveness.py"]
    assert [name for name in dotted_names(text) if not resolves(name)] == [
        "controlplane.models.RegisteredEndpoint", "controlplane.wsgi:nothing"]
    assert [path for path in linked_paths(text, ROOT / "README.md") if not exists(path)] == ["docs/no-such.md"]
    assert exists("tests/data/engines/vllm-0.32.0-cpu-{busy,idle}.prom")
    assert not exists("tests/data/engines/vllm-0.32.0-cpu-{busy,missing}.prom")
