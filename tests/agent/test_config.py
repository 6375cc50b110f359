"""Settings from flags and FLEETWATCH_AGENT_* variables: flags win, bad values exit 2."""

import pytest

from agent.config import OPTIONS, Settings, load_settings


def test_it_runs_with_defaults_on_a_bare_host():
    settings = load_settings([], {})
    assert settings == Settings()
    assert (settings.listen_host, settings.listen_port) == ("127.0.0.1", 9201)
    assert settings.sample_interval_ms == 1000 and settings.report_interval_ms == 1000
    assert settings.register and settings.report and not settings.once
    assert settings.monitored_mounts == ("/",)


def test_it_reads_every_spec_flag():
    settings = load_settings([
        "--listen", "0.0.0.0:9300", "--proxy-url", "http://proxy:8002/", "--instance-id", "gpu-7",
        "--token", "s3cret", "--sample-interval-ms", "250", "--report-interval-ms", "2000",
        "--no-register", "--no-report", "--once",
    ], {})
    assert (settings.listen_host, settings.listen_port) == ("0.0.0.0", 9300)
    assert settings.proxy_url == "http://proxy:8002"
    assert settings.instance_id == "gpu-7"
    assert settings.token == "s3cret"
    assert settings.sample_interval_ms == 250
    assert settings.report_interval_ms == 2000
    assert settings.register is False and settings.report is False and settings.once is True


def test_it_takes_variables_and_flags_win():
    env = {"FLEETWATCH_AGENT_PROXY_URL": "http://from-env:8000", "FLEETWATCH_AGENT_SAMPLE_INTERVAL_MS": "500",
           "FLEETWATCH_AGENT_REGISTER": "off", "FLEETWATCH_AGENT_TOKEN": "env-token"}
    settings = load_settings(["--sample-interval-ms", "100", "--register"], env)
    assert settings.proxy_url == "http://from-env:8000"
    assert settings.token == "env-token"
    assert settings.sample_interval_ms == 100
    assert settings.register is True


def test_it_has_a_variable_named_after_each_flag():
    names = {option.flag: option.env_name for option in OPTIONS}
    assert names["--proxy-url"] == "FLEETWATCH_AGENT_PROXY_URL"
    assert names["--register"] == "FLEETWATCH_AGENT_REGISTER"
    assert len(set(names.values())) == len(names)


def test_it_takes_disk_mounts_from_repeated_flags_or_a_list_and_adds_the_model_dir():
    from_flags = load_settings(["--disk-mount", "/", "--disk-mount", "/data", "--model-dir", "/models"], {})
    assert from_flags.monitored_mounts == ("/", "/data", "/models")
    from_env = load_settings([], {"FLEETWATCH_AGENT_DISK_MOUNT": "/scratch, /data"})
    assert from_env.monitored_mounts == ("/scratch", "/data")


def test_it_takes_engine_urls_from_repeated_flags_or_the_spec_variable():
    from_flags = load_settings(["--engine-url", "http://127.0.0.1:8000/", "--engine-url", "http://127.0.0.1:8001"],
                               {"FLEETWATCH_AGENT_ENGINE_URLS": "http://ignored:1"})
    assert from_flags.engine_urls == ("http://127.0.0.1:8000", "http://127.0.0.1:8001")
    from_env = load_settings([], {"FLEETWATCH_AGENT_ENGINE_URLS": "http://127.0.0.1:30000, https://gpu-7:8000/v"})
    assert from_env.engine_urls == ("http://127.0.0.1:30000", "https://gpu-7:8000/v")
    assert load_settings([], {}).engine_urls == ()


def test_it_has_the_engine_and_gpu_event_settings_with_spec_defaults():
    settings = load_settings([], {})
    assert (settings.engine_timeout_ms, settings.engine_window_ms) == (500, 10_000)
    assert (settings.thresholds.max_engine_kv_usage_ratio, settings.thresholds.max_engine_requests_waiting) == (
        0.95, 32)
    assert (settings.gpu_xid_window_s, settings.nvml_slow_ms) == (300.0, 2000)
    changed = load_settings(["--engine-timeout-ms", "250", "--max-engine-requests-waiting", "5"],
                            {"FLEETWATCH_AGENT_NVML_SLOW_MS": "5000", "FLEETWATCH_AGENT_GPU_XID_WINDOW_S": "60"})
    assert (changed.engine_timeout_ms, changed.thresholds.max_engine_requests_waiting) == (250, 5)
    assert (changed.nvml_slow_ms, changed.gpu_xid_window_s) == (5000, 60.0)


def test_it_sends_prefix_changes_once_a_second_by_default_and_never_more_often_than_spec_15_2_allows():
    assert load_settings([], {}).prefix_interval_ms == 1000
    assert load_settings(["--prefix-interval-ms", "250"], {}).prefix_interval_ms == 250
    assert load_settings([], {"FLEETWATCH_AGENT_PREFIX_INTERVAL_MS": "500"}).prefix_interval_ms == 500


def test_it_parses_ipv6_listen_addresses_and_port_zero():
    settings = load_settings(["--listen", "[::1]:0"], {})
    assert (settings.listen_host, settings.listen_port) == ("::1", 0)


def test_it_takes_thresholds_from_settings():
    thresholds = load_settings(["--min-memory-free-ratio", "0.1", "--max-cpu-pct", "80",
                                "--max-gpu-memory-ratio", "0.9"], {}).thresholds
    assert (thresholds.min_memory_free_ratio, thresholds.max_cpu_pct, thresholds.max_gpu_memory_ratio) == (
        0.1, 80.0, 0.9)


@pytest.mark.parametrize("argv, env, culprit", [
    (["--listen", "nonsense"], {}, "HOST:PORT"),
    (["--listen", "127.0.0.1:70000"], {}, "out of range"),
    (["--proxy-url", "ftp://x"], {}, "http"),
    (["--proxy-url", "http://127.0.0.1:99999"], {}, "port"),
    (["--proxy-url", "http://proxy:http"], {}, "port"),
    ([], {"FLEETWATCH_AGENT_PROXY_URL": "http://127.0.0.1:0"}, "FLEETWATCH_AGENT_PROXY_URL"),
    (["--sample-interval-ms", "0"], {}, "at least"),
    (["--prefix-interval-ms", "100"], {}, "between 250 and 60000"),
    (["--engine-url", "127.0.0.1:8000"], {}, "http"),
    ([], {"FLEETWATCH_AGENT_ENGINE_URLS": "http://ok:1,ftp://no"}, "FLEETWATCH_AGENT_ENGINE_URLS"),
    ([], {"FLEETWATCH_AGENT_REPORT": "maybe"}, "FLEETWATCH_AGENT_REPORT"),
    ([], {"FLEETWATCH_AGENT_REPORT_INTERVAL_MS": "fast"}, "FLEETWATCH_AGENT_REPORT_INTERVAL_MS"),
])
def test_it_refuses_bad_values_naming_the_culprit(argv, env, culprit, capsys):
    with pytest.raises(SystemExit) as exit_info:
        load_settings(argv, env)
    assert exit_info.value.code == 2
    assert culprit in capsys.readouterr().err
