"""The constant answers, built once at import from the serializers the schema publishes
(``RowShape.answer_builder``), are the bytes clients have always read."""

from controlplane.api import renderers
from controlplane.api.hot_path import OK_BODY
from proxy_app.api.reports import STALE_ANSWER, UNKNOWN_INSTANCE_ANSWER
from scheduler_app.views import NOT_REGISTERED


def test_the_pre_rendered_ok_is_its_declarations_rendering():
    assert OK_BODY == b'{"ok":true}'


def test_the_compat_bodies_are_their_declarations():
    assert renderers.dumps(UNKNOWN_INSTANCE_ANSWER) == b'{"ok":false,"error":"unknown_instance"}'
    assert renderers.dumps(STALE_ANSWER) == b'{"ok":true,"stale":true}'
    assert renderers.dumps(NOT_REGISTERED) == b'{"detail":"proxy_id not registered"}'
