"""The OpenAPI document tells the truth about errors: every status and code an operation really
answers is documented for that operation (found by the schema fuzzer, tests/security)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from apikeys.models import Workspace
from tests.conftest import Api, error_of

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def schema(django_db_blocker) -> dict:  # type: ignore[no-untyped-def]
    with django_db_blocker.unblock():
        response = Api().get("/api/openapi.json")
    assert response.status_code == 200
    return response.json()


def operation(schema: dict, operation_id: str) -> dict:
    for item in schema["paths"].values():
        for op in item.values():
            if isinstance(op, dict) and op.get("operationId") == operation_id:
                return op
    raise AssertionError(f"no operation {operation_id}")


def documented_codes(schema: dict, operation_id: str, status: int) -> list[str]:
    """The error codes the document lists for ``status`` of the operation ([] if undocumented)."""
    response = operation(schema, operation_id)["responses"].get(str(status))
    if response is None:
        return []
    parts = response["content"]["application/json"]["schema"]["allOf"]
    assert parts[0] == {"$ref": "#/components/schemas/ErrorOut"}
    return parts[1]["properties"]["error"]["properties"]["code"]["enum"]


def test_the_decision_operation_is_documented(schema: dict) -> None:
    op = operation(schema, "decideOutboxItem")
    body = op["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    assert body == "#/components/schemas/DecisionInRequest"
    assert op["responses"]["200"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/OutboxOut"
    }
    assert "invalid_state" in documented_codes(schema, "decideOutboxItem", 409)
    assert "forbidden" in documented_codes(schema, "decideOutboxItem", 403)


def test_every_operation_documents_the_common_errors(schema: dict) -> None:
    for item in schema["paths"].values():
        for method, op in item.items():
            if method not in {"get", "post", "patch", "delete"}:
                continue
            name = op["operationId"]
            assert "unauthorized" in documented_codes(schema, name, 401), name
            assert "insufficient_scope" in documented_codes(schema, name, 403), name
            assert "rate_limited" in documented_codes(schema, name, 429), name
            if "requestBody" in op:
                assert "invalid_json" in documented_codes(schema, name, 400), name
                assert "unsupported_media_type" in documented_codes(schema, name, 415), name
            if any(p["in"] == "path" for p in op.get("parameters", [])):
                assert "not_found" in documented_codes(schema, name, 404), name


def test_real_errors_are_documented_for_their_operation(
    schema: dict, api: Api, workspace: Workspace, make_key: Callable[..., str]
) -> None:
    """Each request below really gets its error; the document lists that status and code."""
    api.call("POST", "inboxes", {"local_part": "taken"})
    api.call("POST", "labels", {"key": "dup", "name": "Dup"})
    no_permanent = Workspace.objects.create(name="No permanent", allow_permanent_inboxes=False)
    cases = [
        ("createInbox", api.call("POST", "inboxes", {"local_part": "taken"})),
        ("listEmails", api.call("GET", "emails", {"inbox": "nobody@nowhere.test"})),
        ("createLabel", api.call("POST", "labels", {"key": "dup", "name": "Dup"})),
        (
            "createWebhook",
            api.call("POST", "webhooks", {"url": "https://example.org/h", "label_keys": ["nope"]}),
        ),
        ("createKey", api.post("/api/v1/keys", "name=x", content_type="text/plain")),
        (
            "createInbox",
            Api(make_key(no_permanent)).call("POST", "inboxes", {"ttl_minutes": None}),
        ),
        ("decideOutboxItem", api.call("POST", "outbox/out_x/decision", {"decision": "approve"})),
        ("testLabels", api.call("POST", "labels/test", {"email_id": "eml_nope"})),
    ]
    seen = []
    for operation_id, response in cases:
        status, code = error_of(response)
        seen.append((operation_id, status, code))
        assert code in documented_codes(schema, operation_id, status), (operation_id, status, code)
    assert [s[1:] for s in seen] == [
        (409, "address_taken"),
        (404, "not_found"),
        (409, "label_exists"),
        (400, "unknown_label"),
        (415, "unsupported_media_type"),
        (403, "feature_disabled"),
        (403, "forbidden"),
        (404, "not_found"),
    ]
