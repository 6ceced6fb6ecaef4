"""An endpoint's ``events``, ``inbox_ids`` and ``label_keys`` are read as JSON lists by every
path that decides a delivery.

A create takes one of two paths (``inboxes.services.inbox_create``): one statement, where SQL
decides that no endpoint wants the event (``events @> [type]``), or a transaction where
``webhooks.services._wants`` decides in Python. A list stored as a JSON string (the admin edits
these fields as raw JSON) once read as a subscription in Python (a substring test) and as none in
SQL, so whether an endpoint got ``inbox.created`` depended on the path. Both now read a string
as no subscription, and ``Endpoint.clean`` (the admin's form) refuses one.
"""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from apikeys import services as key_services
from apikeys.audit import Actor
from apikeys.models import Workspace
from events.models import Event
from inboxes import services as inbox_services
from webhooks import services as webhook_services
from webhooks.models import Delivery, Endpoint

pytestmark = pytest.mark.django_db


def _endpoint(workspace: Workspace, **stored: object) -> Endpoint:
    endpoint, _ = webhook_services.endpoint_create(
        workspace=workspace,
        url="https://hooks.example.com/lists",
        events=["inbox.created"],
        inbox_ids=[],
        label_keys=[],
        by=Actor.system("tests"),
    )
    Endpoint.objects.filter(pk=endpoint.pk).update(**stored)  # as a raw JSON edit stores it
    endpoint.refresh_from_db()
    return endpoint


def _deliveries_of_a_create(workspace: Workspace, *, capped: bool) -> int:
    """Deliveries made for one new inbox; ``capped`` takes the transaction (a workspace with a
    cap on inboxes), else the one statement where the database allows it."""
    Workspace.objects.filter(pk=workspace.pk).update(max_inboxes=1000 if capped else None)
    workspace.refresh_from_db()
    inbox = inbox_services.inbox_create(workspace=workspace)
    return Delivery.objects.filter(
        workspace_id=workspace.pk, event="inbox.created", body__contains=inbox.pk
    ).count()


@pytest.mark.parametrize(
    "stored",
    [
        {"events": "inbox.created"},
        {"events": "inbox.created,email.received"},
    ],
    ids=["events-string", "events-joined"],
)
def test_a_list_stored_as_a_string_subscribes_to_nothing_on_either_path(stored: dict) -> None:
    workspace = key_services.workspace_get_or_create(name=f"Lists {sorted(stored)}")
    _endpoint(workspace, **stored)
    assert _deliveries_of_a_create(workspace, capped=True) == 0
    assert _deliveries_of_a_create(workspace, capped=False) == 0


def test_a_list_stays_a_subscription_on_both_paths() -> None:
    """The control: the same endpoint with real lists gets the event on each path."""
    workspace = key_services.workspace_get_or_create(name="Lists control")
    inbox = inbox_services.inbox_create(workspace=workspace)
    _endpoint(workspace, inbox_ids=["inb_other", inbox.pk, "x"])  # a filter, not this create's
    assert _deliveries_of_a_create(workspace, capped=True) == 0
    Endpoint.objects.filter(workspace=workspace).update(inbox_ids=[])
    assert _deliveries_of_a_create(workspace, capped=True) == 1
    assert _deliveries_of_a_create(workspace, capped=False) == 1


def test_filters_as_strings_match_nothing() -> None:
    """An inbox filter or a label filter stored as a string matched by substring (an id inside
    ``"inb_a,inb_b"``; any label with a letter of ``"abc"``); now it matches no event."""
    workspace = key_services.workspace_get_or_create(name="Lists filters")
    received = Event(workspace_id=workspace.pk, inbox_id="inb_a", type="email.received", data={})
    endpoint = _endpoint(workspace, events=["email.received"], inbox_ids="inb_a,inb_b")
    assert webhook_services._wants(endpoint, received) is False
    endpoint.inbox_ids = ["inb_a", "inb_b"]
    assert webhook_services._wants(endpoint, received) is True
    received.data = {"email": {"labels": [{"key": "b"}]}}
    endpoint.label_keys = "abc"
    assert webhook_services._wants(endpoint, received) is False
    endpoint.label_keys = ["b"]
    assert webhook_services._wants(endpoint, received) is True
    # An empty value that is not a list is no "all": the endpoint gets nothing, of any type.
    created = Event(workspace_id=workspace.pk, inbox_id="inb_a", type="inbox.created", data={})
    endpoint.events = ["email.received", "inbox.created"]
    for name, value in (("inbox_ids", ""), ("inbox_ids", None), ("label_keys", {})):
        setattr(endpoint, name, value)
        assert webhook_services._wants(endpoint, received) is False, (name, value)
        assert webhook_services._wants(endpoint, created) is False, (name, value)
        setattr(endpoint, name, [])
        assert webhook_services._wants(endpoint, created) is True, (name, value)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("events", "inbox.created", "A JSON list of event types"),
        ("events", [], "A JSON list of event types"),
        ("events", ["inbox.created", 3], "A JSON list of event types"),
        ("events", ["inbox.created", "inbox.renamed"], "Unknown event type(s): inbox.renamed."),
        ("inbox_ids", "inb_", "A JSON list of strings"),
        ("label_keys", {"a": 1}, "A JSON list of strings"),
        ("inbox_ids", ["inb_a", None], "A JSON list of strings"),
    ],
)
def test_clean_refuses_what_is_not_a_list_of_strings(
    field: str, value: object, message: str
) -> None:
    workspace = key_services.workspace_get_or_create(name="Lists clean")
    endpoint = _endpoint(workspace)
    setattr(endpoint, field, value)
    with pytest.raises(ValidationError) as refused:
        endpoint.clean()
    assert list(refused.value.message_dict) == [field]
    assert message in refused.value.message_dict[field][0]


def test_clean_accepts_what_the_api_stores() -> None:
    workspace = key_services.workspace_get_or_create(name="Lists ok")
    endpoint = _endpoint(workspace, inbox_ids=["inb_a"], label_keys=["invoices"])
    endpoint.clean()  # raises on failure
    assert endpoint.events == ["inbox.created"]
