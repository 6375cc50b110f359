"""Every 4xx in the SPEC 1 envelope, with a flat ``{field: [message]}`` detail."""

import pytest

from controlplane.api.errors import flatten_detail

pytestmark = pytest.mark.django_db


def test_it_names_a_bad_list_item_by_its_index(api):
    response = api.post("/v1/instance/register", {"instance_id": "i-1", "host": "h", "port": 1, "tags": ["ok", 7]})
    assert response.status_code == 400
    assert response.json() == {"ok": False, "error": "validation_error", "detail": {"tags[1]": ["Not a valid string."]}}


def test_it_names_a_bad_list_item_the_same_way_on_the_scheduler(api):
    response = api.post("/v1/proxy/register", {"proxy_id": "p", "host": "h", "port": 1, "endpoints": [None]})
    assert response.status_code == 400
    assert list(response.json()["detail"]) == ["endpoints[0]"]


def test_it_flattens_nested_details_into_paths():
    nested = {"a": {"b": ["bad"], 2: ["worse"]}, "c": ["plain"], "d": [{}, {"e": ["deep"]}], "f": {"": ["root"]}}
    assert flatten_detail(nested) == {
        "a.b": ["bad"], "a[2]": ["worse"], "c": ["plain"], "d[1].e": ["deep"], "f": ["root"],
    }


def test_it_puts_a_bare_message_under_body():
    assert flatten_detail(["Expected an object."]) == {"body": ["Expected an object."]}


def test_it_answers_an_unknown_path_with_a_json_404(api):
    response = api.get("/no/such/path")
    assert response.status_code == 404
    assert response.json() == {"ok": False, "error": "not_found"}


@pytest.mark.parametrize("path", ["/v1/instance/list", "/pool/", "/healthz"])
def test_it_answers_a_disallowed_host_in_the_envelope_and_logs_one_warning_line(client, caplog, path):
    with caplog.at_level("INFO"):
        response = client.get(path, HTTP_HOST="evil.example")
    assert response.status_code == 400
    assert response.json() == {"ok": False, "error": "validation_error",
                               "detail": {"Host": ["Not a name this server answers to (DJANGO_ALLOWED_HOSTS)."]}}
    records = [record for record in caplog.records if record.name == "django.security.DisallowedHost"]
    assert [(record.levelname, record.exc_info) for record in records] == [("WARNING", None)]
    assert "evil.example" in records[0].getMessage()
    assert [record.name for record in caplog.records if record.levelno >= 30] == ["django.security.DisallowedHost"]
