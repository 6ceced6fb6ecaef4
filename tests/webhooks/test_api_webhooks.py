"""/webhooks through the API: endpoints, secrets, validation, SSRF refusals, tenancy."""

from __future__ import annotations

import pytest

from apikeys.models import Workspace
from inboxes import services as inbox_services
from labels.models import Label
from tests.conftest import Api, error_of
from webhooks.models import Delivery, Endpoint

pytestmark = pytest.mark.django_db

URL = "https://hooks.example.com/pigeonhole"


@pytest.fixture(autouse=True)
def _public_targets_only(settings) -> None:  # type: ignore[no-untyped-def]
    settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = False


def test_create_shows_secret_once(api: Api) -> None:
    body = api.call("POST", "webhooks", {"url": URL}).json()
    assert body["id"].startswith("whk_") and body["secret"].startswith("whsec_")
    assert body["events"] == ["email.received"] and body["enabled"] is True
    assert body["inbox_ids"] == [] and body["label_keys"] == []
    secret = body["secret"]
    listed = api.call("GET", "webhooks").json()
    assert secret not in str(listed) and listed["data"][0]["id"] == body["id"]
    patched = api.call("PATCH", f"webhooks/{body['id']}", {"enabled": False})
    assert patched.json()["enabled"] is False and secret not in patched.content.decode()
    row = Endpoint.objects.get(pk=body["id"])
    assert all(secret not in str(getattr(row, f.attname)) for f in Endpoint._meta.concrete_fields)


def test_filters_are_resolved_and_checked(
    api: Api, workspace: Workspace, other_workspace: Workspace
) -> None:
    mine = inbox_services.inbox_create(workspace=workspace, local_part="mine")
    theirs = inbox_services.inbox_create(workspace=other_workspace, local_part="theirs")
    Label.objects.create(workspace=workspace, key="vip", name="VIP")
    Label.objects.create(workspace=other_workspace, key="secret", name="S")
    body = api.call(
        "POST",
        "webhooks",
        {
            "url": URL,
            "events": ["email.labeled", "inbox.expired", "email.labeled"],
            "inbox_ids": [mine.address],
            "label_keys": ["vip"],
        },
    ).json()
    assert body["events"] == ["email.labeled", "inbox.expired"]
    assert body["inbox_ids"] == [mine.pk] and body["label_keys"] == ["vip"]
    response = api.call("POST", "webhooks", {"url": URL, "inbox_ids": [mine.pk, theirs.pk]})
    assert error_of(response) == (400, "validation_error")
    assert response.json()["error"]["issues"] == [
        {"path": "inbox_ids.1", "message": f"No inbox '{theirs.pk}'."}
    ]
    response = api.call("POST", "webhooks", {"url": URL, "label_keys": ["secret"]})
    assert error_of(response) == (400, "unknown_label")
    assert Endpoint.objects.count() == 1


@pytest.mark.parametrize(
    ("body", "path"),
    [
        ({}, "url"),
        ({"url": "ftp://example.com/x"}, "url"),
        ({"url": "not a url"}, "url"),
        ({"url": URL, "events": ["email.sent"]}, "events.0"),
        ({"url": URL, "events": []}, "events"),
        ({"url": URL, "enabled": "yes please"}, "enabled"),
        ({"url": "http://127.0.0.1:8080/hook"}, "url"),
        ({"url": "http://localhost/hook"}, "url"),
        ({"url": "http://10.0.0.7/hook"}, "url"),
        ({"url": "http://169.254.169.254/latest/meta-data"}, "url"),
        ({"url": "http://[::1]/hook"}, "url"),
        ({"url": "http://[::ffff:127.0.0.1]/hook"}, "url"),
        ({"url": "http://user:pw@hooks.example.com/x"}, "url"),
    ],
)
def test_create_validation(api: Api, body: dict, path: str) -> None:
    response = api.call("POST", "webhooks", body)
    assert error_of(response) == (400, "validation_error")
    assert [issue["path"] for issue in response.json()["error"]["issues"]] == [path]


def test_private_targets_allowed_when_configured(settings, api: Api) -> None:  # type: ignore[no-untyped-def]
    settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = True
    assert api.call("POST", "webhooks", {"url": "http://127.0.0.1:9/hook"}).status_code == 200


def test_other_workspace_sees_nothing(api: Api, other_api: Api) -> None:
    endpoint = api.call("POST", "webhooks", {"url": URL}).json()
    delivery = api.call("POST", f"webhooks/{endpoint['id']}/test").json()
    assert other_api.call("GET", "webhooks").json()["data"] == []
    for method, path, body in [
        ("PATCH", f"webhooks/{endpoint['id']}", {"enabled": False}),
        ("DELETE", f"webhooks/{endpoint['id']}", None),
        ("GET", f"webhooks/{endpoint['id']}/deliveries", None),
        ("POST", f"webhooks/{endpoint['id']}/deliveries/{delivery['id']}/replay", None),
        ("POST", f"webhooks/{endpoint['id']}/test", None),
    ]:
        assert error_of(other_api.call(method, path, body)) == (404, "not_found"), path
    assert Endpoint.objects.get(pk=endpoint["id"]).enabled is True
    assert Delivery.objects.count() == 1


def test_delete_removes_deliveries(api: Api) -> None:
    endpoint = api.call("POST", "webhooks", {"url": URL}).json()
    api.call("POST", f"webhooks/{endpoint['id']}/test")
    assert api.call("DELETE", f"webhooks/{endpoint['id']}").json() == {
        "deleted": True,
        "id": endpoint["id"],
    }
    assert Delivery.objects.count() == 0
