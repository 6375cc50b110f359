"""The repository stands alone: no tracked file points at a path outside it.

A clone holds only what git tracks, so a doc that sends the reader to the
workspace's shared folder, or a test that reads a fixture from there, works
on the machine it was written on and nowhere else. What the project needs
(the contract, engine captures) lives in the repository itself.
"""

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Written in two parts so that this file does not name them itself.
FORBIDDEN = ("../" + "shared", "shared/" + "SPEC.md")
BINARY_SUFFIXES = {
    ".png", ".jpg", ".jpeg", ".gif", ".webp", ".ico", ".svgz", ".woff", ".woff2", ".ttf", ".otf", ".eot",
    ".gz", ".tgz", ".zip", ".whl", ".pdf", ".sqlite3", ".db", ".pyc",
}


def tracked_files(root):
    """Paths git tracks under ``root``, relative to it."""
    listing = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, check=True)
    return [Path(name) for name in listing.stdout.decode("utf-8").split("\0") if name]


def text_of(path):
    """The file's text, or None for a binary file (by suffix, or a NUL byte) or one gone from the tree."""
    if path.suffix.lower() in BINARY_SUFFIXES or path.is_symlink() or not path.is_file():
        return None
    data = path.read_bytes()
    if b"\0" in data:
        return None
    return data.decode("utf-8", errors="replace")


def references_outside(root):
    """``"path:line: text"`` for every line of a tracked text file that names a forbidden path."""
    found = []
    for relative in tracked_files(root):
        text = text_of(root / relative)
        if text is None:
            continue
        for number, line in enumerate(text.splitlines(), start=1):
            if any(needle in line for needle in FORBIDDEN):
                found.append(f"{relative}:{number}: {line.strip()}")
    return found


def test_it_lists_the_repository_files_it_checks():
    files = {str(path) for path in tracked_files(ROOT)}
    # The check would pass vacuously if it looked at the wrong tree.
    assert {"README.md", "docs/contract.md", "tests/controlplane/test_standalone.py"} <= files


def test_it_finds_no_reference_outside_the_repository():
    assert references_outside(ROOT) == []


def test_it_reports_the_file_and_line_of_a_reference(tmp_path):
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    (tmp_path / "guide.md").write_text("# Guide\n\nRead the " + FORBIDDEN[1] + " first.\n")
    (tmp_path / "data.py").write_text("FIXTURE = '" + FORBIDDEN[0] + "/engines/capture.prom'\n")
    (tmp_path / "picture.png").write_bytes(b"\x89PNG " + FORBIDDEN[0].encode())
    (tmp_path / "blob.bin").write_bytes(b"\0" + FORBIDDEN[0].encode())
    (tmp_path / "untracked.md").write_text(FORBIDDEN[0] + "\n")
    subprocess.run(["git", "add", "guide.md", "data.py", "picture.png", "blob.bin"], cwd=tmp_path, check=True)

    assert references_outside(tmp_path) == [
        f"data.py:1: FIXTURE = '{FORBIDDEN[0]}/engines/capture.prom'",
        f"guide.md:3: Read the {FORBIDDEN[1]} first.",
    ]
