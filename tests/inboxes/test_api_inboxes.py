"""/inboxes through the HTTP API: create, read, update, list, delete, expiry."""

from __future__ import annotations

import re
from datetime import datetime, timedelta

import pytest
import time_machine
from django.utils import timezone

from apikeys.models import Workspace
from events.models import Event
from inboxes import services
from inboxes.models import Inbox
from tests.conftest import Api, error_of
from tests.dns_server import verified_domain

pytestmark = pytest.mark.django_db

RECORD_FIELDS = {
    "id",
    "address",
    "local_part",
    "domain",
    "name",
    "agent_name",
    "tags",
    "status",
    "permanent",
    "ttl_minutes",
    "expires_at",
    "max_emails",
    "overflow",
    "allow_senders",
    "block_senders",
    "forward_to",
    "smtp_faults",
    "injected_faults",
    "email_count",
    "unread_count",
    "last_email_at",
    "created_at",
    "updated_at",
}


def _at(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def test_create_with_empty_body(settings, api: Api) -> None:  # type: ignore[no-untyped-def]
    response = api.call("POST", "inboxes", {})
    assert response.status_code == 200
    body = response.json()
    assert set(body) == RECORD_FIELDS
    assert body["id"].startswith("inb_")
    assert re.fullmatch(r"[a-z]+-[a-z]+-\d{2}", body["local_part"])
    assert body["domain"] == settings.INBOX_DOMAINS[0]
    assert body["address"] == f"{body['local_part']}@{body['domain']}"
    assert body["permanent"] is True and body["status"] == "active"
    assert body["ttl_minutes"] is None and body["expires_at"] is None
    assert body["overflow"] == "drop_oldest" and body["email_count"] == 0
    event = Event.objects.get(type="inbox.created", inbox_id=body["id"])
    assert event.data == {"inbox": {"id": body["id"], "address": body["address"]}, "source": "api"}


def test_create_with_every_field(api: Api) -> None:
    before = timezone.now()
    body = api.call(
        "POST",
        "inboxes",
        {
            "local_part": "Signup.Test",
            "name": "Sign-up flow",
            "ttl_minutes": 30,
            "agent_name": "crawler",
            "tags": ["ci", "signup"],
            "max_emails": 10,
            "overflow": "reject",
            "allow_senders": ["example.com", "bob@other.org"],
            "block_senders": ["@spam.example.com"],
            "forward_to": "me@elsewhere.test",
        },
    ).json()
    assert body["local_part"] == "signup.test"
    assert body["permanent"] is False and body["ttl_minutes"] == 30
    expires = _at(body["expires_at"])
    assert before + timedelta(minutes=30) <= expires <= timezone.now() + timedelta(minutes=30)
    assert body["tags"] == ["ci", "signup"] and body["agent_name"] == "crawler"
    assert body["max_emails"] == 10 and body["overflow"] == "reject"
    assert body["allow_senders"] == ["example.com", "bob@other.org"]
    assert body["forward_to"] == "me@elsewhere.test"


@pytest.mark.parametrize(
    ("body", "path"),
    [
        ({"local_part": "a..b"}, "local_part"),
        ({"local_part": ".ab"}, "local_part"),
        ({"local_part": "a+b"}, "local_part"),
        ({"local_part": "x" * 65}, "local_part"),
        ({"local_part": "has space"}, "local_part"),
        ({"local_part": ""}, "local_part"),
        ({"ttl_minutes": 0}, "ttl_minutes"),
        ({"ttl_minutes": 525601}, "ttl_minutes"),
        ({"ttl_minutes": "soon"}, "ttl_minutes"),
        ({"overflow": "explode"}, "overflow"),
        ({"max_emails": 0}, "max_emails"),
        ({"tags": "ci"}, "tags"),
        ({"tags": ["ok", ""]}, "tags.1"),
        ({"allow_senders": ["not a domain"]}, "allow_senders.0"),
        ({"block_senders": ["ok.com", "@"]}, "block_senders.1"),
        ({"forward_to": "nope"}, "forward_to"),
    ],
)
def test_create_validation(api: Api, body: dict, path: str) -> None:
    response = api.call("POST", "inboxes", body)
    assert error_of(response) == (400, "validation_error")
    assert [i["path"] for i in response.json()["error"]["issues"]] == [path]
    assert Inbox.objects.count() == 0


def test_address_taken_case_insensitive_and_across_workspaces(api: Api, other_api: Api) -> None:
    assert api.call("POST", "inboxes", {"local_part": "bob"}).status_code == 200
    assert error_of(api.call("POST", "inboxes", {"local_part": "BOB"})) == (409, "address_taken")
    assert error_of(other_api.call("POST", "inboxes", {"local_part": "bob"})) == (
        409,
        "address_taken",
    )
    assert Inbox.objects.count() == 1


def test_domains(settings, api: Api, workspace: Workspace, other_workspace: Workspace) -> None:  # type: ignore[no-untyped-def]
    verified_domain(workspace, "mine.test")
    verified_domain(other_workspace, "theirs.test")
    assert api.call("POST", "inboxes", {"domain": "Mine.Test"}).json()["domain"] == "mine.test"
    assert error_of(api.call("POST", "inboxes", {"domain": "theirs.test"})) == (
        400,
        "invalid_domain",
    )
    assert error_of(api.call("POST", "inboxes", {"domain": "nowhere.test"})) == (
        400,
        "invalid_domain",
    )
    settings.INBOX_DOMAINS = []
    assert api.call("POST", "inboxes", {}).json()["domain"] == "mine.test"


def test_no_domain(settings, api: Api) -> None:  # type: ignore[no-untyped-def]
    settings.INBOX_DOMAINS = []
    assert error_of(api.call("POST", "inboxes", {})) == (409, "no_domain")


def test_permanent_entitlement(api: Api, workspace: Workspace) -> None:
    workspace.allow_permanent_inboxes = False
    workspace.save()
    assert error_of(api.call("POST", "inboxes", {"ttl_minutes": None})) == (
        403,
        "feature_disabled",
    )
    body = api.call("POST", "inboxes", {}).json()
    assert body["permanent"] is False and body["ttl_minutes"] == 60
    assert error_of(api.call("PATCH", f"inboxes/{body['id']}", {"ttl_minutes": None})) == (
        403,
        "feature_disabled",
    )


def test_max_inboxes(api: Api, workspace: Workspace) -> None:
    workspace.max_inboxes = 2
    workspace.save()
    assert [api.call("POST", "inboxes", {}).status_code for _ in range(2)] == [200, 200]
    assert error_of(api.call("POST", "inboxes", {})) == (429, "limit_reached")
    assert Inbox.objects.filter(workspace=workspace).count() == 2


def test_get_by_id_and_address(api: Api, other_api: Api) -> None:
    body = api.call("POST", "inboxes", {"local_part": "Lookup"}).json()
    assert api.call("GET", f"inboxes/{body['id']}").json() == body
    assert api.call("GET", f"inboxes/{body['address'].upper()}").json()["id"] == body["id"]
    assert error_of(other_api.call("GET", f"inboxes/{body['id']}")) == (404, "not_found")
    assert error_of(other_api.call("GET", f"inboxes/{body['address']}")) == (404, "not_found")
    assert error_of(api.call("GET", "inboxes/inb_doesnotexist")) == (404, "not_found")


def test_patch(api: Api) -> None:
    inbox = api.call("POST", "inboxes", {"ttl_minutes": 10, "tags": ["a"]}).json()
    body = api.call(
        "PATCH", f"inboxes/{inbox['id']}", {"name": "Renamed", "tags": ["b"], "id": "inb_x"}
    ).json()
    assert body["name"] == "Renamed" and body["tags"] == ["b"] and body["id"] == inbox["id"]
    assert body["expires_at"] == inbox["expires_at"]  # untouched fields stay
    extended = api.call("PATCH", f"inboxes/{inbox['id']}", {"extend_minutes": 600}).json()
    assert _at(extended["expires_at"]) > timezone.now() + timedelta(minutes=599)
    permanent = api.call("PATCH", f"inboxes/{inbox['id']}", {"ttl_minutes": None}).json()
    assert permanent["permanent"] is True and permanent["expires_at"] is None
    response = api.call("PATCH", f"inboxes/{inbox['id']}", {"extend_minutes": 5})
    assert error_of(response) == (400, "validation_error")
    assert response.json()["error"]["issues"][0]["path"] == "extend_minutes"
    response = api.call("PATCH", f"inboxes/{inbox['id']}", {"extend_minutes": 525601})
    assert error_of(response) == (400, "validation_error")


def test_patch_other_workspace_is_404_and_changes_nothing(api: Api, other_api: Api) -> None:
    inbox = api.call("POST", "inboxes", {"name": "mine"}).json()
    assert error_of(other_api.call("PATCH", f"inboxes/{inbox['id']}", {"name": "x"})) == (
        404,
        "not_found",
    )
    assert error_of(other_api.call("DELETE", f"inboxes/{inbox['address']}")) == (404, "not_found")
    assert Inbox.objects.get(pk=inbox["id"]).name == "mine"


def test_expiry_and_extension(api: Api) -> None:
    inbox = api.call("POST", "inboxes", {"ttl_minutes": 1}).json()
    with time_machine.travel(timezone.now() + timedelta(minutes=2)):
        assert api.call("GET", f"inboxes/{inbox['id']}").json()["status"] == "expired"
        ids = [i["id"] for i in api.call("GET", "inboxes").json()["data"]]
        assert inbox["id"] not in ids
        listed = api.call("GET", "inboxes", {"include_expired": "true"}).json()["data"]
        assert inbox["id"] in [i["id"] for i in listed]
        assert services.inboxes_expire_due() == 1
        assert services.inboxes_expire_due() == 0
        assert Event.objects.filter(type="inbox.expired", inbox_id=inbox["id"]).count() == 1
        revived = api.call("PATCH", f"inboxes/{inbox['id']}", {"extend_minutes": 5}).json()
        assert revived["status"] == "active"
    with time_machine.travel(timezone.now() + timedelta(minutes=10)):
        assert services.inboxes_expire_due() == 1  # the new expiry is announced again
    assert Event.objects.filter(type="inbox.expired", inbox_id=inbox["id"]).count() == 2


def test_list_filters_and_pages(api: Api, other_api: Api) -> None:
    a = api.call("POST", "inboxes", {"local_part": "alpha", "tags": ["ci"], "agent_name": "Bot"})
    b = api.call("POST", "inboxes", {"local_part": "beta", "name": "Alpha team", "tags": ["x"]})
    c = api.call("POST", "inboxes", {"local_part": "gamma", "agent_name": "other"})
    other_api.call("POST", "inboxes", {"local_part": "alphabet", "tags": ["ci"]})
    ids = {name: r.json()["id"] for name, r in {"a": a, "b": b, "c": c}.items()}

    def listed(**query: object) -> list[str]:
        return [i["id"] for i in api.call("GET", "inboxes", query).json()["data"]]

    assert listed() == [ids["c"], ids["b"], ids["a"]]
    assert listed(q="ALPHA") == [ids["b"], ids["a"]]
    assert listed(tag="ci") == [ids["a"]]
    assert listed(agent="bot") == [ids["a"]]
    first = api.call("GET", "inboxes", {"limit": 2}).json()
    second = api.call("GET", "inboxes", {"limit": 2, "cursor": first["next_cursor"]}).json()
    assert [i["id"] for i in first["data"] + second["data"]] == [ids["c"], ids["b"], ids["a"]]
    assert second["next_cursor"] is None
    assert error_of(api.call("GET", "inboxes", {"limit": 201})) == (400, "validation_error")


def test_delete(api: Api) -> None:
    inbox = api.call("POST", "inboxes", {}).json()
    response = api.call("DELETE", f"inboxes/{inbox['address']}")
    assert response.json() == {"deleted": True, "id": inbox["id"]}
    assert error_of(api.call("GET", f"inboxes/{inbox['id']}")) == (404, "not_found")
    # Its log goes with it; inbox.deleted, emitted after, is the one event that outlives it.
    left = Event.objects.filter(inbox_id=inbox["id"])
    assert [(e.type, e.data["reason"]) for e in left] == [("inbox.deleted", "request")]
