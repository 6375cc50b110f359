"""The OpenAPI schema at /api/schema/ (SPEC 11): generated without a warning, and covering every endpoint."""

import pytest
from django.core.management import call_command
from drf_spectacular.generators import SchemaGenerator

# Every API operation of both roles (SPEC 3, 6, 9), /healthz and /readyz.
OPERATIONS = {
    ("get", "/healthz"),
    ("get", "/readyz"),
    ("post", "/v1/instance/register"),
    ("post", "/v1/instance/heartbeat"),
    ("post", "/v1/instance/resource_snapshot"),
    ("post", "/v1/instance/unregister"),
    ("get", "/v1/instance/list"),
    ("get", "/v1/instance/history"),
    ("get", "/debug/status"),
    ("get", "/debug/instance_resources"),
    ("get", "/debug/instance_loads"),
    ("get", "/debug/pool_resource"),
    ("get", "/debug/pool_resource/history"),
    ("get", "/debug/pool_resource_sources"),
    ("post", "/v1/proxy/register"),
    ("post", "/v1/proxy/heartbeat"),
    ("post", "/v1/proxy/unregister"),
    ("get", "/v1/proxy/list"),
    ("get", "/v1/proxy/history"),
    ("get", "/debug/proxy_pool_resources"),
}
API_OPERATIONS = OPERATIONS - {("get", "/healthz"), ("get", "/readyz")}


@pytest.fixture(scope="module")
def schema():
    return SchemaGenerator().get_schema(request=None, public=True)


def operations(schema):
    return {(method, path): operation for path, item in schema["paths"].items() for method, operation in item.items()}


def test_it_generates_and_validates_the_schema_without_a_warning(tmp_path):
    # --fail-on-warn turns any warning or error of drf-spectacular into a failure;
    # --validate checks the result against the OpenAPI 3 meta-schema.
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "schema.yaml"))
    assert (tmp_path / "schema.yaml").read_text().startswith("openapi: 3.")


def test_it_describes_every_endpoint_of_both_roles(schema):
    assert OPERATIONS <= set(operations(schema))


def test_it_documents_the_error_answers_of_every_api_operation(schema):
    for key, operation in operations(schema).items():
        if key not in API_OPERATIONS:
            continue
        expected = {"200", "400", "401", "403", "405", "413"} | ({"415", "429"} if key[0] == "post" else set())
        assert expected <= set(operation["responses"]), key
        assert "WWW-Authenticate" in operation["responses"]["401"]["headers"], key
        if key[0] == "post":
            assert "Retry-After" in operation["responses"]["429"]["headers"], key


def test_it_asks_writes_for_a_token_and_takes_a_staff_session_for_reads(schema):
    found = operations(schema)
    for method, path in API_OPERATIONS:
        security = found[method, path]["security"]
        if method == "post":
            assert security == [{"bearerAuth": []}], path
            scope = "proxy" if path.startswith("/v1/proxy/") else "instance"
            assert found[method, path]["x-token-scope"] == scope
        else:
            assert security == [{"bearerAuth": []}, {"staffSession": []}], path
    assert "security" not in found["get", "/healthz"]
    assert schema["components"]["securitySchemes"]["bearerAuth"] == {
        **schema["components"]["securitySchemes"]["bearerAuth"], "type": "http", "scheme": "bearer"}


def test_it_documents_the_compat_answers(schema):
    found = operations(schema)
    refs = {
        (method, path): [variant["$ref"].rsplit("/", 1)[1] for variant in
                         schema["components"]["schemas"][
                             found[method, path]["responses"]["200"]["content"]["application/json"]["schema"][
                                 "$ref"].rsplit("/", 1)[1]]["oneOf"]]
        for method, path in [("post", "/v1/instance/heartbeat"), ("post", "/v1/instance/resource_snapshot")]
    }
    assert refs["post", "/v1/instance/heartbeat"] == ["OkBody", "UnknownInstance", "CapabilityFingerprintRejected"]
    assert refs["post", "/v1/instance/resource_snapshot"] == ["SnapshotAccepted", "UnknownInstance"]
    not_registered = found["post", "/v1/proxy/heartbeat"]["responses"]["404"]["content"]["application/json"]
    assert not_registered["schema"] == {"$ref": "#/components/schemas/ProxyNotRegistered"}


def test_it_declares_the_snapshot_body_checked_by_hand(schema):
    components = schema["components"]["schemas"]
    body = components["SnapshotRequest"]
    assert body["required"] == ["instance_id", "snapshot"]
    assert body["properties"]["snapshot"] == {"$ref": "#/components/schemas/ResourceSnapshot"}
    snapshot, metadata = components["ResourceSnapshot"], components["ReportMetadata"]
    assert snapshot["type"] == "object" and metadata["type"] == "object" and metadata["nullable"] is True
    # Where the Proxy reads, any JSON is still accepted: no member has a type.
    assert "type" not in snapshot["properties"]["devices"]["properties"]["cpu"]["properties"]["utilization_pct"]
    assert set(metadata["properties"]) == {"reported_instance_id", "report_monotonic_ms", "report_wall_time_ms",
                                           "agent_snapshot_timestamp_ms", "report_seq"}


def test_it_declares_the_resources_json_columns_as_the_lists_they_answer(schema):
    # engine_loras was a string here (the model's text column) while every answer has a list.
    properties = schema["components"]["schemas"]["InstanceResourceFigures"]["properties"]
    for key in ("engine_models", "engine_loras"):
        assert properties[key]["type"] == "array" and properties[key]["items"] == {"type": "string"}, key
        assert properties[key]["nullable"] is True, key


def test_it_serves_the_schema_and_the_docs_page_without_a_cdn(client):
    schema = client.get("/api/schema/", {"format": "json"})
    assert schema.status_code == 200
    assert OPERATIONS <= {(method, path) for path, item in schema.json()["paths"].items() for method in item}
    docs = client.get("/api/docs/")
    assert docs.status_code == 200
    page = docs.content.decode()
    assert "swagger-ui" in page and "cdn" not in page.lower()


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/api/schema/", "/api/docs/"])
def test_it_takes_no_http_basic_password_for_the_schema_or_the_docs(client, path):
    # DRF's default authentication (session and HTTP Basic) applied here: any user's password was checked, a
    # PBKDF2 hash per try with no rate limit. The API's own authentication applies: a Basic header is not a token.
    import base64

    from django.contrib.auth.models import User

    User.objects.create_user("operator", password="right-password")
    basic = "Basic " + base64.b64encode(b"operator:right-password").decode()
    answer = client.get(path, HTTP_AUTHORIZATION=basic)
    assert (answer.status_code, answer.json()["error"]) == (401, "unauthorized")
    assert answer["WWW-Authenticate"] == "Bearer"
    assert client.get(path).status_code == 200  # open without a header, as before
