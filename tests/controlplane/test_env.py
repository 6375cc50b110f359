"""Typed readers of environment variables (SPEC 1 booleans, DATABASE_URL)."""

import pytest

from controlplane.env import database_from_url, env_bool, env_int, env_list, parse_bool


@pytest.mark.parametrize("word", ["true", "TRUE", "True", "1", "yes", "YES", "Yes", "on", "ON", " On "])
def test_it_reads_true_words_in_any_case(word):
    assert parse_bool(word) is True


@pytest.mark.parametrize("word", ["false", "FALSE", "False", "0", "no", "NO", "No", "off", "OFF", " oFf "])
def test_it_reads_false_words_in_any_case(word):
    assert parse_bool(word) is False


@pytest.mark.parametrize("word", ["", "maybe", "2", "-1", "y", "n", "t", "f", "truee", "enabled", "none", "null"])
def test_it_refuses_other_words(word):
    assert parse_bool(word) is None


def test_it_uses_the_default_for_an_unset_or_blank_boolean(monkeypatch):
    monkeypatch.delenv("FW_TEST_FLAG", raising=False)
    assert env_bool("FW_TEST_FLAG", True) is True
    monkeypatch.setenv("FW_TEST_FLAG", "  ")
    assert env_bool("FW_TEST_FLAG", False) is False


def test_it_reads_a_boolean_word_from_the_environment(monkeypatch):
    monkeypatch.setenv("FW_TEST_FLAG", "Off")
    assert env_bool("FW_TEST_FLAG", True) is False


def test_it_refuses_to_start_on_a_bad_boolean(monkeypatch):
    monkeypatch.setenv("FW_TEST_FLAG", "maybe")
    with pytest.raises(ValueError, match="FW_TEST_FLAG"):
        env_bool("FW_TEST_FLAG", True)


def test_it_reads_ints_and_lists(monkeypatch):
    monkeypatch.setenv("FW_TEST_INT", "42")
    monkeypatch.setenv("FW_TEST_LIST", " proxy , ,scheduler ")
    assert env_int("FW_TEST_INT", 1) == 42
    assert env_list("FW_TEST_LIST", ["x"]) == ["proxy", "scheduler"]
    monkeypatch.delenv("FW_TEST_INT")
    assert env_int("FW_TEST_INT", 7) == 7


def test_it_puts_a_relative_sqlite_path_under_the_project(tmp_path):
    database = database_from_url("sqlite:///var/db/fleet.sqlite3", tmp_path)
    assert database["ENGINE"] == "controlplane.sqlite_backend"
    assert database["NAME"] == str(tmp_path / "var" / "db" / "fleet.sqlite3")
    assert (tmp_path / "var" / "db").is_dir()


def test_it_keeps_an_absolute_sqlite_path(tmp_path):
    target = tmp_path / "abs" / "fleet.sqlite3"
    database = database_from_url("sqlite:///" + str(target), tmp_path / "elsewhere")
    assert database["NAME"] == str(target)
    assert (tmp_path / "abs").is_dir()
    assert not (tmp_path / "elsewhere").exists()


def test_it_configures_sqlite_for_concurrent_writers(tmp_path):
    options = database_from_url("sqlite:///fleet.sqlite3", tmp_path)["OPTIONS"]
    assert options["transaction_mode"] == "IMMEDIATE"
    assert options["timeout"] > 0
    assert "journal_mode=WAL" in options["init_command"]


@pytest.mark.parametrize("scheme", ["postgres", "postgresql", "pgsql", "POSTGRES"])
def test_it_reads_a_postgres_url(scheme, monkeypatch, tmp_path):
    monkeypatch.delenv("FLEETWATCH_CONN_MAX_AGE", raising=False)
    database = database_from_url(f"{scheme}://fleet:p%40ss@db.example:6543/fleetwatch?sslmode=require", tmp_path)
    assert database["ENGINE"] == "django.db.backends.postgresql"
    assert database["NAME"] == "fleetwatch"
    assert database["USER"] == "fleet"
    assert database["PASSWORD"] == "p@ss"
    assert database["HOST"] == "db.example"
    assert database["PORT"] == "6543"
    assert database["OPTIONS"] == {"sslmode": "require"}
    # Persistent connections by default: a connection per request halves ingest.
    assert database["CONN_MAX_AGE"] == 300


def test_it_leaves_out_what_a_postgres_url_does_not_say(tmp_path):
    database = database_from_url("postgres://postgres@127.0.0.1/fleetwatch", tmp_path)
    assert database["USER"] == "postgres"
    assert database["PASSWORD"] == ""
    assert database["PORT"] == ""
    assert database["OPTIONS"] == {}


def test_it_refuses_an_unknown_database_scheme(tmp_path):
    with pytest.raises(ValueError, match="mysql"):
        database_from_url("mysql://root@localhost/fleet", tmp_path)
