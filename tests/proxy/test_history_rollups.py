"""Series rollups and pruning (SPEC 9), with frozen time and hand-computed minutes.

Full-resolution rows are written directly (the recorder's job is tested on
its own); every expected minute below was worked out by hand.
"""

from datetime import datetime, timezone

import pytest

from proxy_app.models import InstanceMinute, InstanceSample
from proxy_app.ops.history import INSTANCES
from tests.factories import T0

pytestmark = pytest.mark.django_db

MINUTE = 60


def sample(t, instance_id="i-1", cpu=None, gpu=None, admission="accepting", **figures):
    return InstanceSample.objects.create(instance_id=instance_id, t=t, cpu_util=cpu, gpu_util_avg=gpu,
                                         admission_state=admission, **figures)


def minute(start, instance_id="i-1"):
    return InstanceMinute.objects.get(instance_id=instance_id, minute=datetime.fromtimestamp(start, timezone.utc))


@pytest.fixture
def two_minutes():
    """i-1: minute T0 has cpu 10, 20, 60 and gpu 50, null, null; minute T0+60 has only nulls; i-2 one sample."""
    sample(T0 + 1, cpu=10.0, gpu=50.0)
    sample(T0 + 20, cpu=20.0, gpu=None, admission="degraded")
    sample(T0 + 59.9, cpu=60.0, gpu=None)
    sample(T0 + MINUTE + 5, cpu=None, gpu=None, admission=None)
    sample(T0 + MINUTE + 30, cpu=None, gpu=None, admission=None)
    sample(T0 + 7, instance_id="i-2", cpu=99.0, admission="rejecting")


def test_it_folds_an_ended_minute_into_min_avg_max(two_minutes):
    assert INSTANCES.fold(T0 + 2 * MINUTE + 5) == 3

    first = minute(T0)
    assert first.samples == 3
    assert (first.cpu_util_min, first.cpu_util_avg, first.cpu_util_max) == (10.0, 30.0, 60.0)
    # Nulls are left out of the average, not counted as 0.
    assert (first.gpu_util_avg_min, first.gpu_util_avg_avg, first.gpu_util_avg_max) == (50.0, 50.0, 50.0)
    # The worst state of the minute.
    assert first.admission_state == "degraded"
    assert minute(T0, "i-2").admission_state == "rejecting"


def test_it_keeps_an_all_null_minute_null(two_minutes):
    INSTANCES.fold(T0 + 2 * MINUTE + 5)

    second = minute(T0 + MINUTE)
    assert second.samples == 2
    assert (second.cpu_util_min, second.cpu_util_avg, second.cpu_util_max) == (None, None, None)
    assert second.admission_state is None


def test_it_waits_for_a_minute_to_end_plus_a_grace(two_minutes):
    assert INSTANCES.fold(T0 + MINUTE + 4) == 0  # minute T0 ended 4 s ago: within the 5 s grace
    assert INSTANCES.fold(T0 + MINUTE + 5) == 2  # i-1 and i-2 for minute T0, not the running minute
    assert not InstanceMinute.objects.filter(minute=datetime.fromtimestamp(T0 + MINUTE, timezone.utc)).exists()


def test_it_gives_the_same_rows_when_run_twice(two_minutes):
    INSTANCES.fold(T0 + 2 * MINUTE + 5)
    before = list(InstanceMinute.objects.order_by("pk").values())
    assert INSTANCES.fold(T0 + 2 * MINUTE + 5) == 0
    assert INSTANCES.fold(T0 + 2 * MINUTE + 50) == 0
    assert list(InstanceMinute.objects.order_by("pk").values()) == before


def test_it_never_changes_a_folded_minute(two_minutes):
    INSTANCES.fold(T0 + 2 * MINUTE + 5)
    sample(T0 + 30, cpu=1000.0)  # late: the minute is already folded
    INSTANCES.fold(T0 + 3 * MINUTE + 5)
    assert minute(T0).cpu_util_max == 60.0


def test_it_does_not_write_a_minute_twice_when_two_folds_race(two_minutes, monkeypatch):
    """A second fold that read the same watermark writes nothing new (unique key, conflicts ignored)."""
    INSTANCES.fold(T0 + 2 * MINUTE + 5)
    rows = InstanceMinute.objects.count()
    monkeypatch.setattr(InstanceMinute.objects, "aggregate", lambda **kwargs: {"newest": None})
    INSTANCES.fold(T0 + 2 * MINUTE + 5)
    assert InstanceMinute.objects.count() == rows


def test_it_prunes_each_series_at_its_window_edge(two_minutes, settings):
    settings.FLEETWATCH_HISTORY_FULL_S = 100
    settings.FLEETWATCH_HISTORY_MINUTES_S = 3600
    INSTANCES.fold(T0 + 2 * MINUTE + 5)
    first_minute = datetime.fromtimestamp(T0, timezone.utc)

    # Full resolution: a row exactly 100 s old stays, one older goes.
    assert INSTANCES.prune(T0 + 101) == 0
    assert INSTANCES.prune(T0 + 102) == 1
    assert set(InstanceSample.objects.values_list("t", flat=True)) == {T0 + 7, T0 + 20, T0 + 59.9, T0 + 65, T0 + 90}
    # Minutes: kept while at most an hour old (the full rows are all past theirs by then).
    assert INSTANCES.prune(T0 + 3600) == 5
    assert InstanceMinute.objects.filter(minute=first_minute).count() == 2
    assert INSTANCES.prune(T0 + 3601) == 2
    assert not InstanceMinute.objects.filter(minute=first_minute).exists()
    assert InstanceMinute.objects.filter(minute=datetime.fromtimestamp(T0 + MINUTE, timezone.utc)).exists()


def test_it_prunes_nothing_more_when_run_twice(two_minutes, settings):
    settings.FLEETWATCH_HISTORY_FULL_S = 30
    first = INSTANCES.prune(T0 + 100)
    assert first > 0
    assert INSTANCES.prune(T0 + 100) == 0
