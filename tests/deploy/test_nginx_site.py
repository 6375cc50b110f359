"""The nginx sites under deploy/nginx/ say how many values an operator must set, and mark each one."""

import re
from pathlib import Path

import pytest

SITES = sorted((Path(__file__).resolve().parents[2] / "deploy" / "nginx").glob("*.conf"))
NUMBERS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8}


@pytest.mark.parametrize("site", SITES, ids=lambda path: path.name)
def test_its_header_counts_the_marked_values(site):
    # The placement router's said "three" with four marked: the route token's second place (feedback) was missed.
    text = site.read_text()
    [said] = re.findall(r"set the (\w+) marked values", text)
    marked = len(re.findall(r"#\s*SET\b", text))
    assert NUMBERS[said] == marked, f"{site.name} says {said} marked values and marks {marked}"
