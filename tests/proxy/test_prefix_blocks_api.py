"""``POST /v1/instance/prefix_blocks`` through the API (SPEC 15.3), on both databases and both entry points."""

import pytest

from controlplane.api.tokens import ApiToken
from proxy_app.models import PrefixBlock, PrefixChange, PrefixEngine
from proxy_app.prefix.keeper import PREFIX
from tests.factories import T0

pytestmark = [pytest.mark.django_db, pytest.mark.both_entry_points]

PATH = "/v1/instance/prefix_blocks"


def body(**fields):
    return {"instance_id": "i-1", "engine": "http://127.0.0.1:8001", "epoch": 7, "seq": 0, "block_tokens": 16,
            **fields}


def held(instance_id="i-1"):
    return set(PrefixBlock.objects.filter(instance_id=instance_id).values_list("key", flat=True))


def stored():
    """Everything a body may write, to show a refused one wrote nothing."""
    return (sorted(PrefixBlock.objects.values_list("slot", "key")),
            sorted(PrefixEngine.objects.values_list("instance_id", "engine", "epoch", "seq", "blocks")),
            PrefixChange.objects.count())


@pytest.fixture
def known(register_instance, frozen):
    register_instance("i-1")
    return "i-1"


def test_it_applies_a_reset_then_deltas_in_sequence(api, known):
    answer = api.post(PATH, body(reset=True, added=[1, 2, 3, -(2**63), 2**63 - 1]))
    assert (answer.status_code, answer.json()) == (200, {"ok": True, "resync": False})
    assert api.post(PATH, body(seq=1, added=[4], removed=[2])).json() == {"ok": True, "resync": False}
    assert held() == {1, 3, 4, -(2**63), 2**63 - 1}
    assert PrefixEngine.objects.get().blocks == 5


def test_it_takes_the_same_seq_again_as_a_retry(api, known):
    api.post(PATH, body(reset=True, added=[1]))
    api.post(PATH, body(seq=1, added=[2]))
    assert api.post(PATH, body(seq=1, added=[2])).json() == {"ok": True, "resync": False}
    assert held() == {1, 2} and PrefixEngine.objects.get().blocks == 2


@pytest.mark.parametrize("case, fields", [
    ("a seq gap", {"seq": 3}),
    ("an older seq", {"seq": 0, "epoch": 7}),
    ("another epoch without reset", {"epoch": 8, "seq": 1}),
])
def test_it_asks_for_a_resync_and_applies_nothing(api, known, case, fields):
    api.post(PATH, body(reset=True, added=[1]))
    api.post(PATH, body(seq=1, added=[2]))
    before = stored()
    answer = api.post(PATH, body(added=[9], **fields))
    assert (answer.status_code, answer.json()) == (200, {"ok": True, "resync": True})
    assert stored() == before


def test_it_asks_for_a_resync_of_a_stream_it_never_saw(api, known):
    assert api.post(PATH, body(seq=5, added=[1])).json() == {"ok": True, "resync": True}
    assert stored() == ([], [], 0)


def test_it_forgets_the_old_set_on_a_reset(api, known):
    api.post(PATH, body(reset=True, added=[1, 2]))
    api.post(PATH, body(epoch=8, seq=0, reset=True, added=[3], removed=[3]))
    assert held() == {3}
    assert PrefixEngine.objects.values_list("epoch", "seq", "blocks").get() == (8, 0, 1)


def test_it_answers_an_unknown_instance_and_stores_nothing(api, frozen):
    answer = api.post(PATH, body(instance_id="ghost", reset=True, added=[1]))
    assert (answer.status_code, answer.json()) == (200, {"ok": False, "error": "unknown_instance"})
    assert stored() == ([], [], 0)


def test_it_refuses_another_block_size_naming_the_pool_s(api, known, settings):
    settings.FLEETWATCH_PREFIX_BLOCK_TOKENS = 32
    answer = api.post(PATH, body(reset=True, added=[1]))
    assert answer.status_code == 400
    assert answer.json()["error"] == "validation_error"
    assert "expected 32" in answer.json()["detail"]["block_tokens"][0]
    assert stored() == ([], [], 0)


@pytest.mark.parametrize("field, value", [
    ("added", [1, "2"]), ("added", [True]), ("added", [1.5]), ("added", [2**63]), ("removed", [-(2**63) - 1]),
    ("added", list(range(16_385))), ("added", "1,2"), ("epoch", -1), ("seq", "one"), ("seq", None),
    ("engine", ""), ("engine", "x" * 257), ("instance_id", 5), ("reset", "yes"), ("block_tokens", 0),
])
def test_it_refuses_bad_input_in_the_envelope_and_applies_nothing(api, known, field, value):
    api.post(PATH, body(reset=True, added=[1]))
    before = stored()
    answer = api.post(PATH, body(**{"seq": 1, field: value}))
    assert answer.status_code == 400
    assert answer.json()["ok"] is False and answer.json()["error"] == "validation_error"
    assert field in answer.json()["detail"]
    assert stored() == before


def test_it_takes_16384_keys_in_one_body(api, known):
    keys = list(range(-8192, 8192))
    assert api.post(PATH, body(reset=True, added=keys)).json() == {"ok": True, "resync": False}
    assert len(held()) == 16_384


def test_it_holds_a_bound_token_to_its_own_instances(api, known, register_instance):
    register_instance("i-2", host="10.0.0.2")
    token = ApiToken.objects.issue("bound", "instance", ["i-1"])[1]
    bearer = {"HTTP_AUTHORIZATION": f"Bearer {token}"}
    assert api.post(PATH, body(reset=True, added=[1]), **bearer).status_code == 200
    refused = api.post(PATH, body(instance_id="i-2", reset=True, added=[1]), **bearer)
    assert refused.status_code == 403 and not held("i-2")
    read = ApiToken.objects.issue("reader", "read")[1]
    assert api.post(PATH, body(reset=True), HTTP_AUTHORIZATION=f"Bearer {read}").status_code == 403


def test_its_keys_leave_with_an_unregistered_instance(api, known, frozen):
    api.post(PATH, body(reset=True, added=[1, 2]))
    assert PREFIX.hits("events", [1, 2], T0) == {"i-1": 2}
    assert api.post("/v1/instance/unregister", {"instance_id": "i-1"}).json() == {"ok": True}
    assert stored() == ([], [], 1)  # the change row stays until pruned; it names no live stream
    frozen.shift(1)
    assert PREFIX.hits("events", [1, 2], T0 + 1) == {}


def test_its_keys_leave_with_an_expired_instance(api, known, frozen, settings):
    from controlplane import clock
    from proxy_app.models import Instance

    api.post(PATH, body(reset=True, added=[1, 2]))
    assert PREFIX.hits("events", [1], T0) == {"i-1": 1}
    frozen.shift(settings.FLEETWATCH_RETENTION_S + 60)
    assert Instance.objects.delete_expired(clock.now(), settings.FLEETWATCH_RETENTION_S) == 1
    assert held() == set() and not PrefixEngine.objects.exists()
    assert PREFIX.hits("events", [1], clock.now()) == {}


def test_it_takes_the_largest_body_the_lists_allow(api, known):
    keys = [-(2**63) + n for n in range(16_384)]
    api.post(PATH, body(reset=True, added=keys))
    answer = api.post(PATH, body(seq=1, added=[2**63 - 1 - n for n in range(16_384)], removed=keys))
    assert answer.json() == {"ok": True, "resync": False}
    assert len(held()) == 16_384
