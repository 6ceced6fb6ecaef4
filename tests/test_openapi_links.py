"""OpenAPI links: where one operation's answer feeds another (the schema fuzzer's stateful phase
follows them), and the stream's events as OpenAPI 3.1 tools read them."""

from __future__ import annotations

import pytest
from openapi_spec_validator import validate

from tests.test_openapi_errors import operation, schema  # noqa: F401 (fixture)

pytestmark = pytest.mark.django_db

EXPECTED = {
    ("createInbox", "200"): {
        "getInbox",
        "updateInbox",
        "deleteInbox",
        "sendEmail",
        "listInboxEmails",
        "waitForEmail",
        "streamInbox",
    },
    ("sendEmail", "200"): {"getOutboxItem", "decideOutboxItem"},
    ("sendEmail", "202"): {"getOutboxItem", "decideOutboxItem"},
    ("createLabel", "200"): {"updateLabel", "deleteLabel"},
    ("createWebhook", "200"): {
        "updateWebhook",
        "deleteWebhook",
        "listWebhookDeliveries",
        "testWebhook",
    },
    ("testWebhook", "200"): {"replayWebhookDelivery"},
    ("createKey", "200"): {"updateKey", "revokeKey"},
    ("listInboxEmails", "200"): {"getEmail", "updateEmail", "deleteEmail", "getEmailRaw"},
    ("listEmails", "200"): {"getEmail", "updateEmail", "deleteEmail", "getEmailRaw"},
    ("getEmail", "200"): {"getEmailAttachment"},
    ("waitForEmail", "200"): {"getEmail", "updateEmail"},
}


def test_links_connect_the_operations(schema: dict) -> None:  # noqa: F811
    validate(schema)
    ids = {
        op["operationId"]
        for item in schema["paths"].values()
        for op in item.values()
        if isinstance(op, dict) and "operationId" in op
    }
    for (source, status), targets in EXPECTED.items():
        links = operation(schema, source)["responses"][status]["links"]
        assert {link["operationId"] for link in links.values()} == targets, source
        for link in links.values():
            assert link["operationId"] in ids
            target = operation(schema, link["operationId"])
            path_params = {p["name"] for p in target.get("parameters", []) if p["in"] == "path"}
            assert set(link["parameters"]) == path_params, (source, link)
            assert all(v.startswith("$response.body#/") for v in link["parameters"].values())


def test_the_stream_documents_one_event(schema: dict) -> None:  # noqa: F811
    content = operation(schema, "streamInbox")["responses"]["200"]["content"]
    event = content["text/event-stream"]["schema"]
    assert event["type"] == "object" and event["required"] == ["id", "event", "data"]
    assert "email.received" in event["properties"]["event"]["enum"]
