"""Formatting for the dashboards, written once: units, "12 s ago", local times, "–" for unknown.

Every filter takes plain values (numbers, strings, None) and never fails: a
value it cannot read is shown as "–" (SPEC 1: null means unknown, and an
unknown is never drawn as 0). Times are epoch seconds, like everywhere in
the control planes; ``ago`` needs the page's ``now`` so a frozen clock in a
test and the page agree. The HTML they return is a ``<time>`` element the
page script keeps current (ages tick, UTC becomes the browser's local time).
"""

import json
from datetime import datetime, timezone

from django import template
from django.utils.html import conditional_escape, format_html, format_html_join
from django.utils.safestring import mark_safe

from controlplane.clock import ago as age_text
from controlplane.figures import MISSING, as_percent, finite, in_units, percent_text

register = template.Library()

# Where a bar turns amber, then red (percent of its maximum).
WARN_AT = 75.0
CRIT_AT = 90.0
# The tone of a badge for the words the control planes use.
TONES = {
    "alive": "ok", "accepting": "ok", "ok": "ok", "complete": "ok", "running": "ok", "registered": "ok",
    "suspect": "warn", "degraded": "warn", "partial": "warn",
    "stale": "crit", "rejecting": "crit", "error": "crit", "missing": "crit", "expired": "crit",
    "invalid": "crit", "exited": "crit",
    # A serving engine's scrape (SPEC 13).
    "unreachable": "crit", "timeout": "crit", "http_error": "crit", "bad_format": "crit",
    "unregistered": "muted", "stopped": "muted",
    # Placement and fencing (SPEC 14).
    "accept": "ok", "queue": "warn", "shed": "crit", "unavailable": "crit", "fenced": "crit", "unfenced": "ok",
}

# The unit ladders of the filters below: (below, size, unit, digits), the last takes any number.
MIB_UNITS = ((1024, 1, "MiB", 0), (1024**2, 1024, "GiB", 1), (None, 1024**2, "TiB", 1))
GIB_UNITS = ((1024, 1, "GiB", 1), (None, 1024, "TiB", 1))
BYTE_UNITS = ((1024, 1, "B", 0), (1024**2, 1024, "KiB", 1), (1024**3, 1024**2, "MiB", 1), (1024**4, 1024**3, "GiB", 1),
              (1024**5, 1024**4, "TiB", 1), (None, 1024**5, "PiB", 1))
MBPS_UNITS = ((1000, 1, "Mbit/s", 1), (None, 1000, "Gbit/s", 1))
# A sub-second latency in milliseconds (an ITL of 0.028 s is "28 ms", not "0.0 s"); from 0.9995 s on
# it would round to "1000 ms", so it is "1.0 s".
DURATION_UNITS = ((0.9995, 0.001, "ms", 0), (10, 1, "s", 1), (120, 1, "s", 0), (7200, 60, "min", 0),
                  (None, 3600, "h", 1))


def _number(value):
    """What a filter reads: a finite number, numeric text too; None for anything else (bools, NaN, words)."""
    return finite(value, text=True)


def _fixed(number, digits):
    return f"{number:.{digits}f}"


def _in_units(value, ladder):
    number = _number(value)
    return MISSING if number is None else in_units(number, ladder)


@register.filter
def dash(value):
    """The value, or "–" when it is unknown (None or empty)."""
    if value is None or value == "" or value == []:
        return MISSING
    return value


@register.filter
def num(value, digits=1):
    number = _number(value)
    return MISSING if number is None else _fixed(number, int(digits))


@register.filter
def count(value):
    """An integer count with thousands separators."""
    number = _number(value)
    return MISSING if number is None else f"{int(number):,}"


@register.filter
def pct(value, digits=1):
    """A percentage (0–100): "12.3 %"."""
    return percent_text(_number(value), int(digits))


@register.filter
def ratio_pct(value, digits=1):
    """A ratio (0–1) as a percentage: 0.25 → "25.0 %"."""
    return percent_text(as_percent(_number(value)), int(digits))


def _unit_filter(name, ladder, description):
    """A filter writing a figure in the unit of ``ladder`` that keeps it readable."""

    def write(value):
        return _in_units(value, ladder)

    write.__name__, write.__qualname__, write.__doc__ = name, name, description
    return register.filter(name, write)


mib = _unit_filter("mib", MIB_UNITS, 'Mebibytes, in the largest unit that keeps the number readable: "512 MiB", '
                                     '"78.5 GiB".')
gib = _unit_filter("gib", GIB_UNITS, 'Gibibytes: "120.5 GiB", "1.8 TiB".')
bytes_total = _unit_filter("bytes_total", BYTE_UNITS, 'A byte counter: "1.2 GiB".')
mbps = _unit_filter("mbps", MBPS_UNITS, 'A rate in megabits per second: "812.5 Mbit/s", "12.4 Gbit/s".')
seconds = _unit_filter("seconds", DURATION_UNITS, 'A duration: "28 ms", "1.5 s", "12 s", "3 min", "2.5 h".')


@register.filter
def unit(value, suffix):
    """A number and its unit, as precise as the unit deserves: "61 °C", "512.3 W", "1980 MHz"."""
    number = _number(value)
    if number is None:
        return MISSING
    digits = 1 if suffix in ("W", "%") and not number.is_integer() else 0
    return f"{_fixed(number, digits)} {suffix}"


@register.filter
def ms_to_s(value):
    """Epoch milliseconds (agent snapshots) as the epoch seconds the other filters read."""
    number = _number(value)
    return None if number is None else number / 1000


def _moment(epoch_s):
    return datetime.fromtimestamp(epoch_s, tz=timezone.utc)


@register.filter
def ago(value, now):
    """"12 s ago" for an epoch-seconds time, kept ticking by the page script; "–" when unknown."""
    moment, now = _number(value), _number(now)
    if moment is None or now is None:
        return MISSING
    try:
        when = _moment(moment)
    except (OverflowError, OSError, ValueError):
        return MISSING
    # Every part is a number or a date formatted here: nothing to escape.
    return mark_safe(
        f'<time class="ago" datetime="{when.isoformat()}" data-t="{moment!r}" data-now="{now!r}" '
        f'title="{when:%Y-%m-%d %H:%M:%S} UTC">{age_text(moment, now)}</time>')


@register.filter
def localtime(value):
    """An epoch-seconds time as a date; the page script shows it in the browser's time zone."""
    moment = _number(value)
    if moment is None:
        return MISSING
    try:
        when = _moment(moment)
    except (OverflowError, OSError, ValueError):
        return MISSING
    return format_html('<time class="local" datetime="{}">{} UTC</time>', when.isoformat(),
                       when.strftime("%Y-%m-%d %H:%M:%S"))


@register.filter
def tone(word):
    """The badge colour of a status, admission state or health word."""
    if not isinstance(word, str):
        return "muted"
    return TONES.get(word.strip().lower(), "muted")


@register.filter
def fence_words(reason):
    """A fence or unfence reason (SPEC 14.2) in words, or "" for any other reason."""
    if not isinstance(reason, str):
        return ""
    if reason == "gpu_error":
        return "a GPU reports health error"
    for prefix, words in (("engine_", "no engine is ok ({})"), ("router_", "router errors in a row, the last: {}")):
        if reason.startswith(prefix):
            return words.format(reason[len(prefix):].replace("_", " "))
    if reason.startswith("recovered_after_"):
        return f"clean for {reason[len('recovered_after_'):].rstrip('s')} s"
    return ""


@register.filter
def level(value):
    """The bar colour of a percentage: ok below 75, warn below 90, crit above."""
    number = _number(value)
    return "none" if number is None else "crit" if number >= CRIT_AT else "warn" if number >= WARN_AT else "ok"


@register.filter
def width(value):
    """A percentage clamped to 0–100 for a bar's CSS width ("42.5")."""
    number = _number(value)
    if number is None:
        return "0"
    return f"{min(100.0, max(0.0, number)):.1f}"


@register.filter
def pretty_json(value):
    """Indented JSON for a raw-data block (the template escapes it)."""
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)


@register.simple_tag
def admission_badge(state, status, large=False):
    """An instance's admission state as a badge; a stale instance's is its last one, muted and marked
    "last:", since a host past its TTL is taking no work whatever it said then."""
    size = " badge--lg" if large else ""
    if state is None or state == "":
        return mark_safe(f'<span class="badge badge--muted{size}">{MISSING}</span>')
    if status == "stale":
        return mark_safe(
            f'<span class="badge badge--muted badge--past{size}" data-admission-current="false" '
            f'title="not current: the instance is stale, this was its last admission state">'
            f'last: {conditional_escape(state)}</span>')
    return mark_safe(f'<span class="badge badge--{tone(state)}{size}" data-admission-current="true">'
                     f'{conditional_escape(state)}</span>')


@register.simple_tag
def bar(value, text=None, caption="", plain=False):
    """A horizontal bar for a percentage (0–100) and its value; ``text`` replaces the printed value.

    Its colour judges the value (``level``); a ``plain`` bar shows the amount without a judgement.

    Plain string building rather than an included template or format_html:
    a pool page draws a few hundred, and only ``text`` and ``caption`` need
    escaping (everything else is a number formatted here).
    """
    number = _number(value)
    caption_html = f'<span class="meter__caption">{conditional_escape(caption)}</span> ' if caption else ""
    shown = conditional_escape(text) if text else pct(number)
    if number is None:
        return mark_safe(
            f'<span class="meter is-unknown">{caption_html}<span class="bar bar--none"><span class="bar__fill" '
            f'style="width: 0%"></span></span> <span class="meter__text">{shown}</span></span>')
    filled = width(number)
    return mark_safe(
        f'<span class="meter">{caption_html}<span class="bar bar--{"plain" if plain else level(number)}" '
        f'role="meter" aria-valuemin="0" '
        f'aria-valuemax="100" aria-valuenow="{filled}"><span class="bar__fill" style="width: {filled}%"></span>'
        f'</span> <span class="meter__text">{shown}</span></span>')


@register.simple_tag
def gpu_memory_bar(value, engines, caption=""):
    """GPU memory used: judged on a host (or pool) without a serving engine, plain beside one.

    A vLLM engine reserves 90 % of its GPUs' memory for its KV cache as it
    starts, so a healthy engine host is always near full; what tells of
    trouble there is the engine's KV cache, which its own bar judges.
    ``engines``: the engines (or how many), falsy when there are none.
    """
    return bar(value, caption=caption, plain=bool(engines))


def _spark_path(values, height, width_px):
    """The SVG path of one line: a gap where a value is unknown."""
    last = max(1, len(values) - 1)
    segments, previous = [], None
    for i, value in enumerate(values):
        number = _number(value)
        if number is None:
            continue
        x = i / last * width_px
        y = height - min(100.0, max(0.0, number)) / 100 * (height - 2) - 1
        segments.append(f"{'L' if previous == i - 1 else 'M'}{x:.1f},{y:.1f}")
        previous = i
    return " ".join(segments) if len(segments) > 1 else ""


@register.simple_tag
def sparkline(*series, height=24, width_px=120):
    """An inline SVG of one or more lines of percentages (0–100, None gaps), oldest first; "–" when empty."""
    paths = [_spark_path(list(values or ()), height, width_px) for values in series]
    if not any(paths):
        return MISSING
    lines = format_html_join("", '<path class="spark__line spark__line--{}" d="{}"/>',
                             ((index, path) for index, path in enumerate(paths) if path))
    return format_html(
        '<svg class="spark" viewBox="0 0 {w} {h}" width="{w}" height="{h}" preserveAspectRatio="none" '
        'aria-hidden="true">{lines}</svg>',
        w=width_px, h=height, lines=lines,
    )
