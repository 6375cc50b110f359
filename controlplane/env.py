"""Typed readers for environment variables, and the boolean words of SPEC section 1.

Only ``controlplane.settings`` reads the environment through these;
everything else reads ``django.conf.settings``. ``parse_bool`` is also how
the API reads a boolean query parameter (``controlplane.api.viewsets``), so a
setting and a query take the same words; ``parse_int`` is how the API and the
pages read an integer one.
"""

import json
import os
import re
from pathlib import Path

import dj_database_url

# What the API and the pages read as an integer: ASCII digits, a minus sign at most. Python's
# int() also takes "+5", " 5", "1_000" and other scripts' digits ("５"), which no client means,
# and fails with an error of its own past 4,300 digits.
INTEGER = re.compile(r"-?[0-9]{1,4000}")

TRUE_WORDS = {"1", "true", "yes", "on"}
FALSE_WORDS = {"0", "false", "no", "off"}


def parse_bool(text):
    """Parse the boolean words of SPEC section 1; None when not one of them."""
    word = str(text).strip().lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    return None


def parse_int(text):
    """Parse an integer written in ASCII digits (``INTEGER``); None when it is not one."""
    return int(text) if isinstance(text, str) and INTEGER.fullmatch(text) else None


def env_str(name, default=""):
    return os.environ.get(name, default)


def env_bool(name, default):
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    value = parse_bool(raw)
    if value is None:
        raise ValueError(f"{name}={raw!r} is not a boolean (true/false/1/0/yes/no/on/off)")
    return value


def env_int(name, default):
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    return int(raw)


def env_float(name, default):
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    return float(raw)


def env_json_object(name):
    """A JSON object of strings to strings (``FLEETWATCH_TOKENIZERS``); empty when unset."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except ValueError as error:
        raise ValueError(f"{name} is not JSON: {error}") from None
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise ValueError(f"{name} must be a JSON object of strings, e.g. {{\"my-model\": \"/models/my-model\"}}")
    return value


def env_list(name, default):
    raw = os.environ.get(name)
    if raw is None:
        return list(default)
    return [part.strip() for part in raw.split(",") if part.strip()]


def secret_key_from_file(path):
    """The key in ``path``, generated there (mode 0600) the first time: a fresh clone gets a
    key of its own that survives restarts, without a fixed default in the code."""
    try:
        key = path.read_text().strip()
    except FileNotFoundError:
        key = ""
    if len(key) >= 50:
        return key
    import secrets

    path.parent.mkdir(parents=True, exist_ok=True)
    key = secrets.token_urlsafe(50)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(key)
    return key


def database_from_url(url, base_dir, conn_max_age=300):
    """Turn ``DATABASE_URL`` into a Django DATABASES entry (parsed by dj-database-url).

    ``sqlite:///relative/path`` is under ``base_dir``, ``sqlite:////absolute``
    is absolute; SQLite gets this project's backend and options for
    concurrent writers. ``postgres://user:pass@host:port/name?option=value``
    gets persistent connections: a new connection per request halved ingest
    throughput in the benchmark.
    """
    config = dj_database_url.parse(url, conn_max_age=conn_max_age, conn_health_checks=True)
    engine = config["ENGINE"]
    if engine == "django.db.backends.sqlite3":
        name = config["NAME"]
        if name != ":memory:" and not Path(name).is_absolute():
            name = str(Path(base_dir) / name)
        return sqlite_database(name, conn_max_age)
    if engine != "django.db.backends.postgresql":
        scheme = url.split(":", 1)[0]
        raise ValueError(f"DATABASE_URL scheme {scheme!r} is not supported (sqlite, postgres)")
    config["PORT"] = str(config.get("PORT") or "")
    config.setdefault("OPTIONS", {})
    # Two test runs on one server need their own test databases (pytest-django
    # would otherwise use test_<name> for both).
    config["TEST"] = {"NAME": os.environ.get("FLEETWATCH_TEST_DB_NAME") or None}
    return config


def sqlite_database(name, conn_max_age=300):
    if name != ":memory:":
        Path(name).parent.mkdir(parents=True, exist_ok=True)
    return {
        "ENGINE": "controlplane.sqlite_backend",
        "NAME": name,
        "OPTIONS": {
            # Concurrent writers (several web workers, the q cluster, the
            # link) need WAL, a busy timeout and write locks taken at BEGIN
            # rather than on the first write, or they fail with "database is
            # locked" instead of waiting.
            "timeout": 20,
            "transaction_mode": "IMMEDIATE",
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA mmap_size=268435456;",
        },
        "CONN_MAX_AGE": conn_max_age,
        "CONN_HEALTH_CHECKS": True,
        "TEST": {"NAME": None},
    }
