"""Production settings pass Django's deployment check; a fresh clone has no fixed secret."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_check(tmp_path, **env):
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "FLEETWATCH_", "PYTEST"))}
    environment.update({"DJANGO_SETTINGS_MODULE": "controlplane.settings", "FLEETWATCH_VAR_DIR": str(tmp_path),
                        "DATABASE_URL": f"sqlite:///{tmp_path}/check.sqlite3", **env})
    return subprocess.run([sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"], cwd=ROOT,
                          env=environment, capture_output=True, text=True, timeout=120)


def test_it_passes_the_deployment_check_with_production_settings(tmp_path):
    result = run_check(tmp_path, DJANGO_SECRET_KEY="k" * 20 + "-production-key-from-a-vault-0123456789",
                       FLEETWATCH_TLS="on", DJANGO_ALLOWED_HOSTS="pool-a.example")
    assert result.returncode == 0, result.stderr + result.stdout
    assert "no issues" in result.stdout


def test_it_names_what_is_missing_without_tls(tmp_path):
    result = run_check(tmp_path)
    assert result.returncode != 0
    for check in ("security.W004", "security.W008", "security.W012", "security.W016"):
        assert check in result.stderr + result.stdout


def test_it_generates_a_secret_key_once_per_clone(tmp_path):
    from controlplane.env import secret_key_from_file

    first = secret_key_from_file(tmp_path / "secret_key")
    assert len(first) >= 50 and first == secret_key_from_file(tmp_path / "secret_key")
    assert oct((tmp_path / "secret_key").stat().st_mode & 0o777) == "0o600"
    assert secret_key_from_file(tmp_path / "other") != first
