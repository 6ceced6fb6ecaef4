"""Credentials: bearer keys (every way to be wrong is 401) and dashboard sessions with CSRF."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from apikeys import tokens
from apikeys.models import Workspace
from tests.conftest import Api, error_of
from tests.factories import MembershipFactory, UserFactory

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "header",
    [
        None,
        "",
        "Bearer",
        "Bearer ",
        "Basic dXNlcjpwdw==",
        "Token pgh_abc",
        "Bearer not-a-key",
        "Bearer pgh_" + "a" * 40,  # right shape, wrong checksum
        # random keys get fixed ids: every process of a parallel run collects the same tests
        pytest.param("Bearer " + tokens.generate(), id="well-formed-unknown-key"),
        pytest.param("Bearer " + tokens.generate() + "x", id="well-formed-key-plus-x"),
    ],
)
def test_bad_credentials_are_401(workspace: Workspace, header: str | None) -> None:
    client = APIClient()
    if header is not None:
        client.credentials(HTTP_AUTHORIZATION=header)
    response = client.get("/api/v1/me")
    assert error_of(response) == (401, "unauthorized")
    assert response["WWW-Authenticate"].startswith("Bearer")


def test_revoked_and_expired_keys_are_401(workspace: Workspace, make_key) -> None:  # type: ignore[no-untyped-def]
    from django.utils import timezone

    from apikeys.models import ApiKey

    revoked, expired = make_key(workspace), make_key(workspace)
    ApiKey.objects.filter(prefix=revoked[:12]).update(revoked_at=timezone.now())
    ApiKey.objects.filter(prefix=expired[:12]).update(expires_at=timezone.now())
    assert error_of(Api(revoked).call("GET", "me")) == (401, "unauthorized")
    assert error_of(Api(expired).call("GET", "me")) == (401, "unauthorized")


def test_key_with_prefix_collision_is_still_checked_by_digest(
    workspace: Workspace, make_key
) -> None:  # type: ignore[no-untyped-def]
    from apikeys.models import ApiKey

    plain = make_key(workspace)
    body = plain[4:12] + tokens.generate()[12:38]
    forged = "pgh_" + body + tokens._checksum(body)
    assert tokens.is_well_formed(forged)
    assert ApiKey.objects.filter(prefix=forged[:12]).exists()
    assert error_of(Api(forged).call("GET", "me")) == (401, "unauthorized")


@pytest.fixture
def owner_session(workspace: Workspace) -> APIClient:
    membership = MembershipFactory(workspace=workspace, role="owner")
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(membership.user)
    return client


def test_session_is_accepted_for_reads(owner_session: APIClient, workspace: Workspace) -> None:
    response = owner_session.get("/api/v1/me")
    assert response.status_code == 200
    body = response.json()
    assert body["type"] == "session"
    assert body["workspace"]["id"] == workspace.pk
    assert body["user"]["role"] == "owner"
    assert body["scopes"] == ["read", "write", "send", "admin"]


def test_session_writes_need_csrf(owner_session: APIClient) -> None:
    response = owner_session.post("/api/v1/keys", {"name": "x"}, format="json")
    assert error_of(response) == (403, "forbidden")
    owner_session.get("/admin/login/")  # any page that sets the CSRF cookie
    token = owner_session.cookies["csrftoken"].value
    response = owner_session.post(
        "/api/v1/keys", {"name": "x"}, format="json", HTTP_X_CSRFTOKEN=token
    )
    assert response.status_code == 200, response.content


def test_member_session_lacks_admin_scope(workspace: Workspace) -> None:
    membership = MembershipFactory(workspace=workspace, role="member")
    client = APIClient()
    client.force_login(membership.user)
    assert client.get("/api/v1/me").json()["scopes"] == ["read", "write", "send"]
    assert error_of(client.get("/api/v1/keys")) == (403, "insufficient_scope")


def test_session_without_workspace_is_forbidden(db: None) -> None:
    client = APIClient()
    client.force_login(UserFactory())
    assert error_of(client.get("/api/v1/me")) == (403, "forbidden")


def test_bad_bearer_wins_over_a_valid_session(owner_session: APIClient) -> None:
    owner_session.credentials(HTTP_AUTHORIZATION="Bearer nope")
    assert error_of(owner_session.get("/api/v1/me")) == (401, "unauthorized")


def test_session_uses_chosen_workspace(workspace: Workspace, other_workspace: Workspace) -> None:
    membership = MembershipFactory(workspace=workspace, role="owner")
    MembershipFactory(workspace=other_workspace, user=membership.user, role="member")
    client = APIClient()
    client.force_login(membership.user)
    assert client.get("/api/v1/me").json()["workspace"]["id"] == workspace.pk
    session = client.session
    session["workspace_id"] = other_workspace.pk
    session.save()
    body = client.get("/api/v1/me").json()
    assert body["workspace"]["id"] == other_workspace.pk and body["user"]["role"] == "member"
