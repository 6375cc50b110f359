"""The Proxy's API as the simulator speaks it (SPEC 3): the paths it posts to, how it reads an answer."""

from dataclasses import dataclass

import orjson

from simulator import stats as outcomes

REGISTER_PATH = "/v1/instance/register"
HEARTBEAT_PATH = "/v1/instance/heartbeat"
SNAPSHOT_PATH = "/v1/instance/resource_snapshot"
UNREGISTER_PATH = "/v1/instance/unregister"
PATHS = (REGISTER_PATH, HEARTBEAT_PATH, SNAPSHOT_PATH, UNREGISTER_PATH)
USER_AGENT = "fleetwatch-simulator"
CAPABILITY_ERRORS = {"capability_fingerprint_mismatch", "capability_fingerprint_unknown"}


@dataclass
class Answer:
    outcome: str
    data: object = None

    @property
    def ok(self):
        return self.outcome == outcomes.OK


def classify_answer(request, status, raw) -> Answer:
    """The outcome of one HTTP answer from the Proxy (SPEC 3's answers)."""
    try:
        data = orjson.loads(raw) if raw else None
    except orjson.JSONDecodeError:
        data = None
    if not 200 <= status < 300:
        return Answer(outcomes.http_status(status), data)
    if not isinstance(data, dict):
        return Answer(outcomes.BAD_ANSWER, data)
    if request == "register":
        ok = isinstance(data.get("instance_id"), str)
        return Answer(outcomes.OK if ok else outcomes.BAD_ANSWER, data)
    if data.get("ok") is True:
        return Answer(outcomes.OK, data)
    error = data.get("error")
    if error == outcomes.UNKNOWN_INSTANCE or (request == "unregister" and data.get("ok") is False and not error):
        return Answer(outcomes.UNKNOWN_INSTANCE, data)
    if error in CAPABILITY_ERRORS:
        return Answer(outcomes.CAPABILITY_RESYNC, data)
    return Answer(outcomes.REJECTED, data)
