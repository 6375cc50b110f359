"""The dashboards' template filters: units, ages, local times, "–" for unknown. No database."""

import pytest
from django.template import Context, Template

from controlplane.pages import templatetags as f
from tests.factories import T0


def render(source, **context):
    return Template("{% load fleetwatch %}" + source).render(Context(context))


@pytest.mark.parametrize("value", [None, "", "n/a", float("nan"), float("inf"), True, [], {}])
def test_it_shows_a_dash_for_every_unknown(value):
    for name in ("pct", "ratio_pct", "mib", "gib", "mbps", "seconds", "num", "count", "bytes_total"):
        assert getattr(f, name)(value) == "–", name


def test_it_formats_zero_as_a_measured_zero_not_as_unknown():
    assert (f.pct(0), f.mbps(0.0), f.mib(0), f.count(0)) == ("0.0 %", "0.0 Mbit/s", "0 MiB", "0")


def test_it_writes_units_people_read():
    assert f.pct(12.345) == "12.3 %"
    assert f.ratio_pct(0.25) == "25.0 %"
    assert (f.mib(512), f.mib(80 * 1024), f.mib(3 * 1024 * 1024)) == ("512 MiB", "80.0 GiB", "3.0 TiB")
    assert (f.gib(120.54), f.gib(1843.2)) == ("120.5 GiB", "1.8 TiB")
    assert (f.mbps(812.5), f.mbps(12400)) == ("812.5 Mbit/s", "12.4 Gbit/s")
    assert (f.unit(61, "°C"), f.unit(512.3, "W"), f.unit(1980, "MHz")) == ("61 °C", "512.3 W", "1980 MHz")
    assert (f.seconds(0.42), f.seconds(12), f.seconds(300), f.seconds(9000)) == ("420 ms", "12 s", "5 min", "2.5 h")


def test_a_sub_second_latency_reads_in_milliseconds():
    # An ITL p50 of 0.028 s was "0.0 s" (issue 31, point 4).
    assert [f.seconds(n) for n in (0.028, 0.0004, 0.2104, 0.9994, 0.9995, 1.5, -0.028)] == [
        "28 ms", "0 ms", "210 ms", "999 ms", "1.0 s", "1.5 s", "-28 ms"]
    assert f.count(10000) == "10,000"
    assert f.bytes_total(123456789012) == "115.0 GiB"


def test_it_says_how_long_ago_and_keeps_the_moment_for_the_page_script():
    html = str(f.ago(T0 - 12, T0))
    assert ">12 s ago</time>" in html
    assert 'class="ago"' in html and 'datetime="2025-12-31T23:59:48+00:00"' in html
    assert f"data-t=\"{T0 - 12!r}\"" in html and f"data-now=\"{T0!r}\"" in html
    assert ">5 min ago<" in str(f.ago(T0 - 300, T0))
    assert ">2.0 h ago<" in str(f.ago(T0 - 7200, T0))
    assert f.ago(None, T0) == "–"


def test_it_shows_dates_not_epoch_numbers():
    html = str(f.localtime(T0))
    assert html == '<time class="local" datetime="2026-01-01T00:00:00+00:00">2026-01-01 00:00:00 UTC</time>'
    assert str(T0) not in html and "1767225600" not in html
    assert f.localtime(None) == "–"
    assert f.ms_to_s(1767225600000) == T0


def test_it_tones_words_and_levels_percentages():
    assert [f.tone(w) for w in ("alive", "suspect", "stale", "accepting", "degraded", "rejecting", None, "odd")] == [
        "ok", "warn", "crit", "ok", "warn", "crit", "muted", "muted"]
    assert [f.level(v) for v in (None, 10, 75, 90, 100)] == ["none", "ok", "warn", "crit", "crit"]
    assert [f.width(v) for v in (None, -5, 42.42, 250)] == ["0", "0.0", "42.4", "100.0"]


def test_it_draws_a_bar_with_its_value_or_a_dash():
    known = render("{% bar value %}", value=42.0)
    assert "width: 42.0%" in known and "42.0 %" in known and "bar--ok" in known
    unknown = render("{% bar value %}", value=None)
    assert "is-unknown" in unknown and "–" in unknown and 'role="meter"' not in unknown
    assert "bar--crit" in render("{% bar value caption='CPU' %}", value=97)


def test_it_draws_sparklines_with_gaps_where_values_are_unknown():
    svg = str(f.sparkline([0, 50, None, 100, 100], height=24, width_px=120))
    path = svg.split('d="')[1].split('"')[0]
    assert path.startswith("M0.0,23.0 L30.0,12.0 M90.0,1.0 L120.0,1.0")
    assert f.sparkline([None, 5]) == "–"
