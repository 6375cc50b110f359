"""``integers_within``: the one check of a list of bounded integers (token ids, block keys) as a whole."""

import pytest

from proxy_app.api.serializers import integers_within


@pytest.mark.parametrize("minimum, maximum", [(0, 2**32 - 1), (-(2**63), 2**63 - 1), (-5, 5)])
def test_it_takes_ints_within_the_bounds_and_nothing_else(minimum, maximum):
    assert integers_within([minimum, 0, maximum], minimum, maximum)
    assert not integers_within([0, minimum - 1], minimum, maximum)
    assert not integers_within([maximum + 1, 0], minimum, maximum)
    for stranger in (True, False, 1.0, "1", None, [1]):
        assert not integers_within([0, stranger], minimum, maximum)
