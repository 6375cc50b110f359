"""What the README lists of the code's own lists: every token scope."""

import re
from pathlib import Path

from controlplane.api.tokens import Scope

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_readme_names_every_token_scope():
    [scoped] = re.findall(r"scoped \(([^)]*)\)", README.read_text())
    assert re.findall(r"`(\w+)`", scoped) == list(Scope.values)
