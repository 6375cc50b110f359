"""What the README lists of the code's own lists: every token scope."""

import re
from pathlib import Path

from controlplane.api.tokens import Scope

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_readme_names_every_token_scope():
    [scoped] = re.findall(r"scoped \(([^)]*)\)", README.read_text())
    assert re.findall(r"`(\w+)`", scoped) == list(Scope.values)


def test_the_split_deployments_servers_take_ports_that_cannot_collide():
    # Each `up` listens on --port and, for the routers, the next one (or --route-port): pool-a's 8002 put its route
    # listener on 8003, pool-b's --port, and the two shared it (issue 47).
    section = README.read_text().split("## Split deployment", 1)[1].split("\n## ", 1)[0]
    [block] = re.findall(r"```sh\n(.*?)```", section, re.S)
    taken = []
    for command in re.findall(r"\./fw up ([^\n]*)", block):
        port = int(re.search(r"--port (\d+)", command).group(1))
        route = re.search(r"--route-port (\d+)", command)
        taken += [port, int(route.group(1)) if route else port + 1]
        taken += re.findall(r"--agent-listen [\d.]+:(\d+)", command)
    assert len(taken) >= 6
    assert len(set(map(int, taken))) == len(taken), taken
