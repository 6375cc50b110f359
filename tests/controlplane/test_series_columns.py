"""Every series declares the columns its figures need: a point has each figure, a minute rollup its three."""

import pytest

from controlplane.series.history import AGGREGATES
from proxy_app.models import InstanceMinute, InstanceSample, PoolResource, PoolResourceMinute
from scheduler_app.models import PoolResourceSample, ProxyPoolMinute


def columns(model):
    return {field.name for field in model._meta.concrete_fields}


@pytest.mark.parametrize("point, rollup", [
    (InstanceSample, InstanceMinute), (PoolResource, PoolResourceMinute), (PoolResourceSample, ProxyPoolMinute),
])
def test_it_declares_each_figure_of_a_point_and_its_minimum_mean_and_maximum_in_a_rollup(point, rollup):
    assert rollup.FIGURES == point.FIGURES and rollup.ADMISSION == point.ADMISSION
    assert {*point.FIGURES, point.ADMISSION} <= columns(point)
    rolled = {f"{name}_{aggregate}" for name in point.FIGURES for aggregate in AGGREGATES}
    assert rolled | {rollup.ADMISSION} <= columns(rollup)
    # Nothing else of a figure's name: a column declared but not folded would stay null for ever.
    figure_columns = {name for name in columns(rollup) if name.rsplit("_", 1)[-1] in AGGREGATES}
    assert figure_columns == rolled
