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
    assert lane.enter() and lane.tokens == 0.05 - lane.expected  # full, less the admitted one's reservation


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


def test_a_wave_admitted_together_is_charged_as_it_enters_not_after():
    """Routers refused together come back together: once the gate knows what a request costs, it admits only as
    many of a wave as the bucket holds, before any of them has ended."""
    lane, _ = gate(share=0.5, burst_s=0.05)
    for _ in range(5):
        assert lane.enter()
        lane.spend(0.01)
    assert abs(lane.expected - 0.01) < 0.0035
    lane.tokens = lane.burst_s
    admitted = 0
    while lane.enter():
        admitted += 1
    assert 5 <= admitted <= 8  # about burst / expected, not every caller of the wave


def test_settling_gives_back_the_reservation_and_takes_the_real_time():
    lane, _ = gate(share=0.5, burst_s=0.05)
    lane.expected = 0.01
    assert lane.enter()
    assert abs(lane.tokens - 0.04) < 1e-9
    lane.spend(0.002)
    assert abs(lane.tokens - 0.048) < 1e-9


def test_an_admitted_route_request_waits_for_the_writes_in_flight():
    import threading

    lane, _ = gate(share=0.5)
    lane.yield_s = 60.0  # far longer than the test: only the end of the write lets it through
    lane.write_started()
    lane.write_started()
    through = threading.Event()
    waiter = threading.Thread(target=lambda: (lane.after_writes(), through.set()))
    waiter.start()
    lane.write_ended()
    assert not through.wait(0.05)  # one write still in flight
    lane.write_ended()
    assert through.wait(10)
    waiter.join()


def test_a_stream_of_writes_delays_routing_by_yield_s_at_most():
    lane, _ = gate(share=0.5)
    lane.yield_s = 0.0
    lane.write_started()
    lane.after_writes()  # returns: the write lane goes first, it does not stop the route lane
    assert lane.writes == 1


def test_an_open_gate_neither_counts_writes_nor_waits(settings):
    from controlplane.api import route_gate

    settings.FLEETWATCH_ROUTE_SHARE = 1
    assert route_gate.writing(lambda data, grant: "answer", {}, None) == "answer"
    assert route_gate.gate().writes == 0
