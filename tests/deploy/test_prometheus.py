"""deploy/prometheus/: promtool accepts the rules, their unit tests pass, and every alert has both a
unit test that makes it fire and a runbook entry in docs/alerts.md.

promtool comes with Debian's prometheus package; ``./fw test`` installs it
when it is missing, so here its absence is a failure, not a skip.
"""

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "prometheus" / "fleetwatch-rules.yml"
RULE_TESTS = sorted((ROOT / "deploy" / "prometheus" / "tests").glob("*.yml"))
RUNBOOK = ROOT / "docs" / "alerts.md"


@pytest.fixture(scope="module")
def promtool():
    path = shutil.which("promtool")
    assert path, "promtool is missing: ./fw test installs it (apt-get install prometheus)"
    return path


def alerts():
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [rule for group in groups for rule in group["rules"] if "alert" in rule]


def run(promtool, *args):
    result = subprocess.run([promtool, *args], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def test_promtool_accepts_the_rules(promtool):
    assert "SUCCESS" in run(promtool, "check", "rules", str(RULES))


def test_the_rules_unit_tests_pass(promtool):
    assert RULE_TESTS
    assert "SUCCESS" in run(promtool, "test", "rules", *map(str, RULE_TESTS))


def test_every_alert_has_a_for_a_severity_and_a_test_that_makes_it_fire():
    fired = set()
    for path in RULE_TESTS:
        for case in yaml.safe_load(path.read_text())["tests"]:
            for check in case.get("alert_rule_test", []):
                if check.get("exp_alerts"):
                    fired.add(check["alertname"])
    for rule in alerts():
        assert rule.get("for"), rule["alert"]
        assert rule["labels"]["severity"] in {"warning", "critical"}, rule["alert"]
        assert rule["alert"] in fired, f"no unit test makes {rule['alert']} fire"


def test_every_alert_has_a_runbook_entry_where_its_url_points():
    headings = {re.sub(r"[^a-z0-9-]", "", line[3:].strip().lower().replace(" ", "-"))
                for line in RUNBOOK.read_text().splitlines() if line.startswith("## ")}
    for rule in alerts():
        anchor = rule["annotations"]["runbook_url"].split("#", 1)[1]
        assert rule["annotations"]["runbook_url"] == f"docs/alerts.md#{anchor}"
        assert anchor == rule["alert"].lower() and anchor in headings, rule["alert"]
