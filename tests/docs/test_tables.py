"""Every table of the README and docs/ renders as one table: a blank line inside one ends it, and the rows after
it show as text (docs/placement.md's settings table broke before ``FLEETWATCH_ROUTE_SHARE``, issue 47)."""

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def broken_rows(text):
    """Line numbers of table rows that start a table without a header: no ``|---`` line right after them."""
    lines, fenced, broken = text.splitlines(), False, []
    for number, line in enumerate(lines):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        if fenced or not line.startswith("|"):
            continue
        starts_table = number == 0 or not lines[number - 1].startswith("|")
        separator = number + 1 < len(lines) and set(lines[number + 1].replace(" ", "")) <= set("|-:")
        if starts_table and not separator:
            broken.append(number + 1)
    return broken


@pytest.mark.parametrize("doc", DOCS, ids=lambda path: path.name)
def test_each_table_has_a_header_and_no_blank_line_within(doc):
    assert broken_rows(doc.read_text()) == []
