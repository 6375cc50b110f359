"""The SQLite database holds sessions and token hashes: its files are readable by their owner only (issue 20)."""

import os
import stat
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_it_creates_the_database_file_mode_0600_under_a_permissive_umask(tmp_path):
    database = tmp_path / "var" / "fleetwatch.sqlite3"
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{database}", "FLEETWATCH_VAR_DIR": str(tmp_path / "var")}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    subprocess.run(f"umask 022 && exec {sys.executable} manage.py migrate --verbosity 0", shell=True, cwd=ROOT,
                   env=env, check=True, timeout=300)
    files = [path for path in database.parent.iterdir() if path.name.startswith(database.name)
             and not path.name.endswith("-writelock")]
    assert database in files
    assert {path.name: oct(stat.S_IMODE(path.stat().st_mode)) for path in files} == {
        path.name: "0o600" for path in files}
