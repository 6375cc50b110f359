"""The live view: a ``--duration`` run shows a bar and the time left; a run without one shows neither."""

from rich.console import Console

from simulator.config import RunConfig
from simulator.display import ProgressView
from simulator.stats import FleetStats


def rendered(view, stats):
    console = Console(width=120, record=True, force_terminal=False, color_system=None)
    console.print(view.render(stats))
    return console.export_text()


def stats_at(elapsed_s):
    stats = FleetStats()
    stats.elapsed_s = elapsed_s
    return stats


def test_a_duration_run_shows_how_far_it_is_and_the_time_left():
    view = ProgressView(RunConfig(proxy_url="http://127.0.0.1:8000", instances=10, duration_s=120.0))
    text = rendered(view, stats_at(30.0))
    assert "25 %   00:00:30 of 00:02:00, left 00:01:30" in text
    assert "━" in text  # the bar
    assert " left=90s " in view.plain_line(stats_at(30.0))


def test_the_time_left_stops_at_zero_when_the_run_overruns():
    view = ProgressView(RunConfig(proxy_url="http://127.0.0.1:8000", instances=10, duration_s=60.0))
    assert "100 %   00:01:00 of 00:01:00, left 00:00:00" in rendered(view, stats_at(61.5))
    assert " left=0s " in view.plain_line(stats_at(61.5))


def test_a_run_until_ctrl_c_has_no_bar_and_no_time_left():
    view = ProgressView(RunConfig(proxy_url="http://127.0.0.1:8000", instances=10))
    assert "left" not in rendered(view, stats_at(30.0))
    assert "left=" not in view.plain_line(stats_at(30.0))


def test_a_proxy_it_cannot_reach_is_named_while_nothing_was_acknowledged():
    view = ProgressView(RunConfig(proxy_url="http://127.0.0.1:8001", instances=10))
    stats = stats_at(12.0)
    stats.record("register", "connection_error", 0.001)
    hint = "nothing answers at http://127.0.0.1:8001: is the Proxy running there?"
    assert hint in rendered(view, stats)
    assert hint in view.plain_line(stats)

    # Once the Proxy has answered, a connection error is the Proxy's trouble, not the address.
    stats.record("register", "ok", 0.001)
    assert "nothing answers" not in rendered(view, stats) + view.plain_line(stats)
