"""The route lane's gate (issue 30): a bucket of route time per web process, filled at FLEETWATCH_ROUTE_SHARE."""

from controlplane.api.route_gate import RouteGate


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def gate(share=0.5, burst_s=0.05):
    clock = Clock()
    return RouteGate(share, burst_s=burst_s, clock=clock), clock


def test_it_admits_while_the_bucket_holds_time_and_refuses_once_it_is_spent():
    lane, _ = gate()
    assert lane.enter()
    lane.spend(0.03)
    assert lane.enter()
    lane.spend(0.03)
    assert not lane.enter()


def test_it_refills_at_the_share_and_never_above_the_burst():
    lane, clock = gate(share=0.5, burst_s=0.05)
    lane.spend(0.06)  # 10 ms owed
    clock.now += 0.019  # 9.5 ms back
    assert not lane.enter()
    clock.now += 0.002
    assert lane.enter()
    clock.now += 3600
    assert lane.enter() and lane.tokens == 0.05


def test_it_owes_at_most_one_burst_after_a_slow_answer():
    lane, clock = gate(share=0.5, burst_s=0.05)
    lane.spend(2.0)  # a board's full read
    assert lane.tokens == -0.05
    clock.now += 0.099  # burst / share, less a millisecond
    assert not lane.enter()
    clock.now += 0.002
    assert lane.enter()


def test_it_is_open_at_a_share_of_one():
    lane, _ = gate(share=1)
    lane.spend(60.0)
    assert lane.enter()


def test_it_charges_an_admitted_request_all_its_time_in_the_process(settings):
    """Not only its placement: the floor before it (the lane, the token, the JSON) costs as much or more."""
    import time

    from controlplane.api import route_gate

    settings.FLEETWATCH_ROUTE_SHARE = 0.5
    lane = route_gate.gate()
    lane.tokens = lane.burst_s

    def application(environ, start_response):
        time.sleep(0.02)  # what the request cost before it reached the gate
        return route_gate.admitted(lambda data, grant: [b"answer"], {}, None)

    assert route_gate.stamp_arrival(application)({}, None) == [b"answer"]
    assert lane.tokens < lane.burst_s - 0.015


def test_it_tells_the_refused_to_wait_one_two_or_three_seconds_in_turn():
    lane, _ = gate()
    lane.spend(1.0)
    waits = []
    for _ in range(6):
        assert not lane.enter()
        waits.append(lane.retry_after_s())
    assert waits == [2, 3, 1, 2, 3, 1]
