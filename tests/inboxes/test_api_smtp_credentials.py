"""/inboxes/{id}/smtp-credentials through the API: the password once and only its digest stored,
lists without secrets, revocation, the scopes, another workspace's inbox, the cap and bad
input."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.test import override_settings

from apikeys import tokens
from apikeys.models import Workspace
from inboxes import services as inbox_services
from inboxes.models import Inbox, SmtpCredential
from inboxes.services import MAX_SMTP_CREDENTIALS
from tests.conftest import Api, error_of

pytestmark = pytest.mark.django_db


@pytest.fixture
def inbox(workspace: Workspace) -> Inbox:
    return inbox_services.inbox_create(workspace=workspace, local_part="Sign.Up_Tests")


def path(inbox: Inbox, *rest: str) -> str:
    return "/".join([f"inboxes/{inbox.pk}/smtp-credentials", *rest])


@override_settings(
    SMTP_HOSTNAME="mx.example.net",
    SMTP_PORT=587,
    SMTPS_PORT=465,
    SMTP_TLS_CERT="/etc/ssl/smtp.crt",
    SMTP_AUTH_ALLOW_PLAINTEXT=False,
)
def test_create_shows_the_password_once_with_the_app_settings(api: Api, inbox: Inbox) -> None:
    response = api.call("POST", path(inbox), {"name": "checkout app"})
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["id"].startswith("smc_")
    assert body["inbox_id"] == inbox.pk and body["name"] == "checkout app"
    assert body["username"].startswith("sign-up-tests-") and len(body["username"]) == 24
    assert tokens.is_well_formed(body["password"], "pgs_")
    assert body["smtp"] == {
        "host": "mx.example.net",
        "port": 587,
        "starttls": True,
        "smtps_port": 465,
        "plaintext_auth": False,
        "mechanisms": ["PLAIN", "LOGIN"],
    }
    assert body["last_used_at"] is None
    row = SmtpCredential.objects.get(workspace=inbox.workspace, pk=body["id"])
    assert row.digest == tokens.digest(body["password"]) and body["password"] not in row.digest
    # The list (and the inbox address as the path) shows it without any secret.
    listed = api.call("GET", f"inboxes/{inbox.address}/smtp-credentials").json()
    assert [c["id"] for c in listed["data"]] == [body["id"]]
    assert "password" not in listed["data"][0]
    assert body["password"] not in str(listed)
    assert listed["next_cursor"] is None


def test_usernames_are_unique_and_revocation_lists_them_no_more(api: Api, inbox: Inbox) -> None:
    first = api.call("POST", path(inbox), {}).json()
    second = api.call("POST", path(inbox), {}).json()
    assert first["username"] != second["username"] and first["name"] == ""
    listed = [c["id"] for c in api.call("GET", path(inbox)).json()["data"]]
    assert listed == [second["id"], first["id"]]  # newest first
    response = api.call("DELETE", path(inbox, first["id"]))
    assert response.json() == {"deleted": True, "id": first["id"]}
    assert [c["id"] for c in api.call("GET", path(inbox)).json()["data"]] == [second["id"]]
    assert error_of(api.call("DELETE", path(inbox, first["id"]))) == (404, "not_found")
    row = SmtpCredential.objects.get(workspace=inbox.workspace, pk=first["id"])
    assert row.revoked_at is not None


def test_scopes(workspace: Workspace, inbox: Inbox, make_key: Callable[..., str]) -> None:
    reader = Api(make_key(workspace, ("read",)))
    sender = Api(make_key(workspace, ("send",)))
    writer = Api(make_key(workspace, ("write",)))
    assert error_of(reader.call("POST", path(inbox), {})) == (403, "insufficient_scope")
    assert error_of(sender.call("POST", path(inbox), {})) == (403, "insufficient_scope")
    assert error_of(sender.call("GET", path(inbox))) == (403, "insufficient_scope")
    assert not SmtpCredential.objects.filter(workspace=workspace).exists()
    created = writer.call("POST", path(inbox), {}).json()
    assert reader.call("GET", path(inbox)).status_code == 200
    assert error_of(reader.call("DELETE", path(inbox, created["id"]))) == (
        403,
        "insufficient_scope",
    )
    assert writer.call("DELETE", path(inbox, created["id"])).status_code == 200


def test_another_workspace_gets_not_found(api: Api, other_api: Api, inbox: Inbox) -> None:
    created = api.call("POST", path(inbox), {}).json()
    assert error_of(other_api.call("GET", path(inbox))) == (404, "not_found")
    assert error_of(other_api.call("POST", path(inbox), {})) == (404, "not_found")
    assert error_of(other_api.call("DELETE", path(inbox, created["id"]))) == (404, "not_found")
    # Their own inbox does not reach ours either.
    theirs = other_api.call("POST", "inboxes", {"local_part": "theirs"}).json()
    response = other_api.call("DELETE", f"inboxes/{theirs['id']}/smtp-credentials/{created['id']}")
    assert error_of(response) == (404, "not_found")
    assert SmtpCredential.objects.filter(workspace=inbox.workspace, revoked_at=None).count() == 1


def test_the_cap_and_bad_input(api: Api, inbox: Inbox) -> None:
    assert error_of(api.call("POST", path(inbox), {"name": 5})) == (400, "validation_error")
    assert error_of(api.call("POST", path(inbox), {"name": "a\nb"})) == (400, "validation_error")
    assert error_of(api.call("POST", path(inbox), {"name": "x" * 201})) == (400, "validation_error")
    for _ in range(MAX_SMTP_CREDENTIALS):
        assert api.call("POST", path(inbox), {}).status_code == 200
    assert error_of(api.call("POST", path(inbox), {})) == (429, "limit_reached")
    revoked = api.call("GET", path(inbox)).json()["data"][0]["id"]
    assert api.call("DELETE", path(inbox, revoked)).status_code == 200
    assert api.call("POST", path(inbox), {}).status_code == 200  # room again
