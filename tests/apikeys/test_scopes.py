"""Every operation x every single scope: 403 insufficient_scope exactly where the tables say."""

from __future__ import annotations

import pytest

from apikeys.models import Workspace, effective_scopes
from apikeys.principal import Principal
from inboxes import services as inbox_services
from labels.models import Label
from mail import pipeline
from mail.models import Attachment
from outbox import services as outbox_services
from tests.conftest import Api, error_of
from tests.mail.messages import PDF, message
from webhooks import services as webhook_services

pytestmark = pytest.mark.django_db

# (method, path, required scope), from the spec's tables. Grows with every issue.
OPERATIONS = [
    ("GET", "keys", "admin"),
    ("POST", "keys", "admin"),
    ("PATCH", "keys/{key}", "admin"),
    ("DELETE", "keys/{key}", "admin"),
    ("GET", "me", "read"),
    ("GET", "domains", "read"),
    ("GET", "stats", "read"),
    ("GET", "inboxes", "read"),
    ("POST", "inboxes", "write"),
    ("GET", "inboxes/{inbox}", "read"),
    ("PATCH", "inboxes/{inbox}", "write"),
    ("DELETE", "inboxes/{inbox}", "write"),
    ("GET", "inboxes/{inbox}/emails", "read"),
    ("GET", "emails", "read"),
    ("GET", "emails/{email}", "read"),
    ("PATCH", "emails/{email}", "write"),
    ("DELETE", "emails/{email}", "write"),
    ("GET", "emails/{email}/raw", "read"),
    ("GET", "emails/{email}/attachments/{attachment}", "read"),
    ("GET", "labels", "read"),
    ("POST", "labels", "admin"),
    ("PATCH", "labels/{label}", "admin"),
    ("DELETE", "labels/{label}", "admin"),
    ("POST", "labels/test", "read"),
    ("GET", "webhooks", "read"),
    ("POST", "webhooks", "admin"),
    ("PATCH", "webhooks/{webhook}", "admin"),
    ("DELETE", "webhooks/{webhook}", "admin"),
    ("GET", "webhooks/{webhook}/deliveries", "read"),
    ("POST", "webhooks/{webhook}/deliveries/{delivery}/replay", "admin"),
    ("POST", "webhooks/{webhook}/test", "admin"),
    ("POST", "inboxes/{inbox}/send", "send"),
    ("GET", "outbox", "read"),
    ("GET", "outbox/{outbox}", "read"),
]
# POST /outbox/{id}/decision refuses every key (403 forbidden): tests/outbox/test_send.py.
SESSION_ONLY = {("POST", "outbox/{item_id}/decision")}
BODIES = {
    ("POST", "keys"): {"name": "x"},
    ("PATCH", "keys/{key}"): {"require_approval": True},
    ("POST", "inboxes"): {},
    ("PATCH", "inboxes/{inbox}"): {"name": "x"},
    ("PATCH", "emails/{email}"): {"starred": True},
    ("POST", "labels"): {"key": "new", "name": "New"},
    ("PATCH", "labels/{label}"): {"name": "Renamed"},
    ("POST", "labels/test"): {"subject": "hi"},
    ("POST", "webhooks"): {"url": "https://hooks.example.com/x"},
    ("PATCH", "webhooks/{webhook}"): {"enabled": False},
    ("POST", "inboxes/{inbox}/send"): {"to": ["bob@example.com"], "subject": "s", "text": "t"},
}


def test_implication_rules() -> None:
    assert effective_scopes(["admin"]) == {"admin", "write", "read", "send"}
    assert effective_scopes(["write"]) == {"write", "read"}
    assert effective_scopes(["send"]) == {"send"}
    assert effective_scopes(["read"]) == {"read"}
    assert effective_scopes(["send", "read"]) == {"send", "read"}


@pytest.fixture
def ids(workspace: Workspace, make_key) -> dict[str, str]:  # type: ignore[no-untyped-def]
    inbox = inbox_services.inbox_create(workspace=workspace, local_part="scoped")
    raw = message(to=inbox.address, attachments=[("a.pdf", "application/pdf", PDF)])
    email_id = pipeline.receive_one(raw, to=inbox.address).email_id
    target = Api(make_key(workspace, ("read",)))
    Label.objects.create(workspace=workspace, key="existing", name="Existing")
    endpoint, _ = webhook_services.endpoint_create(
        workspace=workspace,
        url="https://hooks.example.com/x",
        events=["inbox.created"],
        inbox_ids=[],
        label_keys=[],
    )
    item, _ = outbox_services.send(
        principal=Principal(workspace=workspace, scopes=frozenset({"send"})),
        inbox=inbox,
        to=["x@example.com"],
        subject="s",
        text="t",
    )
    return {
        "outbox": item.pk,
        "webhook": endpoint.pk,
        "delivery": webhook_services.send_test(endpoint=endpoint).pk,
        "label": "existing",
        "inbox": inbox.pk,
        "email": str(email_id),
        "attachment": Attachment.objects.get(email_id=email_id).pk,
        "key": target.call("GET", "me").json()["key"]["id"],
    }


@pytest.mark.parametrize("granted", ["read", "write", "send", "admin"])
@pytest.mark.parametrize(("method", "path", "required"), OPERATIONS)
def test_scope_matrix(
    workspace: Workspace,
    make_key,  # type: ignore[no-untyped-def]
    ids: dict[str, str],
    granted: str,
    method: str,
    path: str,
    required: str,
) -> None:
    client = Api(make_key(workspace, (granted,)))
    response = client.call(method, path.format(**ids), BODIES.get((method, path)))
    if required in effective_scopes([granted]):
        assert response.status_code == 200, response.content
    else:
        assert error_of(response) == (403, "insufficient_scope")
        assert required in response.json()["error"]["message"]


def test_every_documented_operation_is_in_the_matrix(client) -> None:  # type: ignore[no-untyped-def]
    schema = client.get("/api/openapi.json").json()
    documented = {
        (method.upper(), path.removeprefix("/api/v1/"))
        for path, item in schema["paths"].items()
        for method in item
        if method in {"get", "post", "patch", "delete"}
    }
    normalise = {
        "{inbox}": "{inbox_id}",
        "{email}": "{email_id}",
        "{key}": "{key_id}",
        "{attachment}": "{attachment_id}",
        "{label}": "{key}",  # after "{key}", which names an API key id
        "{webhook}": "{endpoint_id}",
        "{delivery}": "{delivery_id}",
        "{outbox}": "{item_id}",
    }
    covered = set()
    for method, path, _ in OPERATIONS:
        for short, full in normalise.items():
            path = path.replace(short, full)
        covered.add((method, path))
    streaming = {("GET", "inboxes/{inbox_id}/wait"), ("GET", "inboxes/{inbox_id}/stream")}
    assert (
        documented - streaming - SESSION_ONLY == covered
    )  # wait and stream: tests/mail/test_realtime.py
