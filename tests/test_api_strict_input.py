"""Request bodies are taken at their JSON type: no quiet coercion of numbers into strings,
0/1/"yes" into booleans or "5"/5.0 into integers (found by the schema fuzzer's
negative_data_rejection check), and free-form JSON that PostgreSQL cannot store is refused."""

from __future__ import annotations

import json

import pytest

from apikeys.models import ApiKey
from inboxes.models import Inbox
from labels.models import Label
from tests.conftest import Api, error_of
from webhooks.models import Endpoint

pytestmark = pytest.mark.django_db


def issue_paths(response) -> list[str]:  # type: ignore[no-untyped-def]
    assert error_of(response) == (400, "validation_error"), response.content
    return [issue["path"] for issue in response.json()["error"]["issues"]]


@pytest.mark.parametrize(
    ("body", "path"),
    [
        ({"name": 0}, "name"),
        ({"name": "k", "require_approval": 0}, "require_approval"),
        ({"name": "k", "require_approval": "yes"}, "require_approval"),
        ({"name": "k", "expires_in_days": "5"}, "expires_in_days"),
        ({"name": "k", "expires_in_days": 5.0}, "expires_in_days"),
        ({"name": "k", "expires_in_days": True}, "expires_in_days"),
        ({"name": "k", "scopes": "read"}, "scopes"),
        ({"name": "k", "scopes": [1]}, "scopes.0"),
        ({"name": ["k"]}, "name"),
    ],
)
def test_create_key_refuses_wrong_json_types(api: Api, body: dict, path: str) -> None:
    before = ApiKey.objects.count()
    assert issue_paths(api.call("POST", "keys", body)) == [path]
    assert ApiKey.objects.count() == before


def test_inbox_fields_keep_their_types(api: Api) -> None:
    inbox = api.call("POST", "inboxes", {"local_part": "typed", "ttl_minutes": 60}).json()
    assert issue_paths(api.call("PATCH", f"inboxes/{inbox['id']}", {"tags": [0, "ok", 1.5]})) == [
        "tags.0",
        "tags.2",
    ]
    assert issue_paths(api.call("POST", "inboxes", {"ttl_minutes": "60"})) == ["ttl_minutes"]
    assert issue_paths(api.call("POST", "inboxes", {"max_emails": 10.0})) == ["max_emails"]
    assert issue_paths(api.call("PATCH", f"inboxes/{inbox['id']}", {"name": 7})) == ["name"]
    assert Inbox.objects.get(pk=inbox["id"]).tags == []
    ok = api.call("PATCH", f"inboxes/{inbox['id']}", {"tags": ["a"], "name": "N", "max_emails": 3})
    assert ok.status_code == 200 and ok.json()["tags"] == ["a"]


def test_labels_webhooks_and_send_refuse_wrong_types(api: Api) -> None:
    assert issue_paths(
        api.call("POST", "labels", {"key": "k1", "name": 0, "threshold": "0.5"})
    ) == ["name", "threshold"]
    assert issue_paths(api.call("POST", "labels", {"key": "k1", "name": "K", "enabled": 1})) == [
        "enabled"
    ]
    # a number is a number, integer or not
    assert api.call("POST", "labels", {"key": "k1", "name": "K", "threshold": 0}).status_code == 200
    assert issue_paths(
        api.call("POST", "webhooks", {"url": "https://example.org/h", "enabled": 0})
    ) == ["enabled"]
    assert not Endpoint.objects.exists()
    inbox = api.call("POST", "inboxes", {"local_part": "from"}).json()
    body = {"to": ["a@example.org"], "subject": "s", "text": "t", "reason": 0}
    assert issue_paths(api.call("POST", f"inboxes/{inbox['id']}/send", body)) == ["reason"]
    assert issue_paths(api.call("POST", "labels/test", {"subject": 5})) == ["subject"]
    assert issue_paths(api.call("POST", "labels/test", {"label": []})) == ["label"]


@pytest.mark.parametrize("bad", ["\x00", "\ud800"])
def test_rules_json_refuses_unstorable_text(api: Api, bad: str) -> None:
    rules = {"match": "any", "conditions": [{"field": "subject", "op": "contains", "value": bad}]}
    body = json.dumps({"key": "k2", "name": "K", "rules": rules})  # \u escapes, valid JSON
    response = api.post("/api/v1/labels", body, content_type="application/json")
    assert issue_paths(response) == ["rules"]
    assert not Label.objects.filter(key="k2").exists()


def test_max_length_applies_to_the_value_as_sent(api: Api) -> None:
    """DRF trims surrounding white space before measuring; the document's maxLength is on the
    value as sent (found by the schema fuzzer: 2,000+ characters ending in spaces passed)."""
    padded = "q" * 1990 + " " * 20
    response = api.call("POST", "labels", {"key": "long", "name": "L", "instructions": padded})
    assert issue_paths(response) == ["instructions"]
    inbox = api.call("POST", "inboxes", {"local_part": "pad"}).json()
    response = api.call("PATCH", f"inboxes/{inbox['id']}", {"tags": ["t" * 60 + " " * 10]})
    assert issue_paths(response) == ["tags.0"]
    ok = api.call("POST", "labels", {"key": "long", "name": "L", "instructions": " q "})
    assert ok.status_code == 200 and ok.json()["instructions"] == "q"  # still trimmed
