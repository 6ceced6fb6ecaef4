"""/keys through the HTTP API: create, list, patch, revoke, secrecy of the plain key."""

from __future__ import annotations

from datetime import timedelta

import pytest
import time_machine
from django.utils import timezone

from apikeys import tokens
from apikeys.models import ApiKey
from tests.conftest import Api, error_of

pytestmark = pytest.mark.django_db


def test_create_returns_plain_key_once_and_it_works(api: Api) -> None:
    response = api.call("POST", "keys", {"name": "ci runner", "kind": "ci", "scopes": ["read"]})
    assert response.status_code == 200
    body = response.json()
    plain = body["key"]
    assert plain.startswith("pgh_") and len(plain) == 44 and tokens.is_well_formed(plain)
    assert body["id"].startswith("key_")
    assert body["name"] == "ci runner" and body["kind"] == "ci" and body["scopes"] == ["read"]
    assert body["prefix"] == plain[:12]
    assert body["require_approval"] is False and body["expires_at"] is None

    me = Api(plain).call("GET", "me")
    assert me.status_code == 200
    assert me.json()["key"]["id"] == body["id"]

    listed = api.call("GET", "keys").json()
    assert plain not in str(listed)
    assert body["id"] in [k["id"] for k in listed["data"]]
    patched = api.call("PATCH", f"keys/{body['id']}", {"require_approval": True})
    assert patched.status_code == 200 and "key" not in patched.json()
    assert patched.json()["require_approval"] is True


def test_create_defaults(api: Api) -> None:
    body = api.call("POST", "keys", {"name": "agent"}).json()
    assert body["kind"] == "agent"
    assert body["scopes"] == ["read", "write"]
    assert body["require_approval"] is False


def test_plain_key_is_not_stored(api: Api) -> None:
    plain = api.call("POST", "keys", {"name": "secret"}).json()["key"]
    row = ApiKey.objects.get(prefix=plain[:12])
    for field in ApiKey._meta.concrete_fields:
        assert plain not in str(getattr(row, field.attname))
    assert row.digest == tokens.digest(plain)


@pytest.mark.parametrize(
    ("body", "paths"),
    [
        ({}, ["name"]),
        ({"name": ""}, ["name"]),
        ({"name": "x", "kind": "robot"}, ["kind"]),
        ({"name": "x", "scopes": ["read", "bogus"]}, ["scopes.1"]),
        ({"name": "x", "scopes": []}, ["scopes"]),
        ({"name": "x", "expires_in_days": 0}, ["expires_in_days"]),
        ({"name": "x", "require_approval": "maybe"}, ["require_approval"]),
        ({"kind": "robot", "scopes": "read"}, ["name", "kind", "scopes"]),
    ],
)
def test_create_validation(api: Api, body: dict, paths: list[str]) -> None:
    response = api.call("POST", "keys", body)
    assert error_of(response) == (400, "validation_error")
    assert sorted(i["path"] for i in response.json()["error"]["issues"]) == sorted(paths)
    assert ApiKey.objects.count() == 1  # only the fixture's key


def test_unknown_fields_are_ignored(api: Api) -> None:
    response = api.call(
        "POST", "keys", {"name": "x", "id": "key_forged", "digest": "0" * 64, "revoked_at": "2020"}
    )
    assert response.status_code == 200
    assert response.json()["id"] != "key_forged"
    assert ApiKey.objects.get(pk=response.json()["id"]).revoked_at is None


def test_patch_requires_require_approval(api: Api) -> None:
    key_id = api.call("POST", "keys", {"name": "x"}).json()["id"]
    response = api.call("PATCH", f"keys/{key_id}", {})
    assert error_of(response) == (400, "validation_error")
    assert response.json()["error"]["issues"][0]["path"] == "require_approval"


def test_revoke_makes_key_unauthorized(api: Api) -> None:
    created = api.call("POST", "keys", {"name": "x"}).json()
    other = Api(created["key"])
    assert other.call("GET", "me").status_code == 200
    response = api.call("DELETE", f"keys/{created['id']}")
    assert response.status_code == 200
    assert response.json() == {"deleted": True, "id": created["id"]}
    assert error_of(other.call("GET", "me")) == (401, "unauthorized")
    assert created["id"] not in [k["id"] for k in api.call("GET", "keys").json()["data"]]
    assert error_of(api.call("DELETE", f"keys/{created['id']}")) == (404, "not_found")


def test_expired_key_is_unauthorized(api: Api) -> None:
    created = api.call("POST", "keys", {"name": "x", "expires_in_days": 1}).json()
    assert created["expires_at"] is not None
    with time_machine.travel(timezone.now() + timedelta(days=1, seconds=1)):
        response = Api(created["key"]).call("GET", "me")
    assert error_of(response) == (401, "unauthorized")
    assert "expired" in response.json()["error"]["message"]


def test_keys_of_another_workspace_are_invisible(api: Api, other_api: Api) -> None:
    theirs = other_api.call("POST", "keys", {"name": "bob's"}).json()
    assert theirs["id"] not in str(api.call("GET", "keys").json())
    assert error_of(api.call("PATCH", f"keys/{theirs['id']}", {"require_approval": True})) == (
        404,
        "not_found",
    )
    assert error_of(api.call("DELETE", f"keys/{theirs['id']}")) == (404, "not_found")
    row = ApiKey.objects.get(pk=theirs["id"])
    assert row.revoked_at is None and row.require_approval is False
    assert Api(theirs["key"]).call("GET", "me").status_code == 200


def test_last_used_is_recorded(api: Api) -> None:
    created = api.call("POST", "keys", {"name": "x"}).json()
    assert created["last_used_at"] is None
    Api(created["key"]).call("GET", "me")
    assert ApiKey.objects.get(pk=created["id"]).last_used_at is not None


def test_admin_never_shows_plain_key(api: Api, django_user_model) -> None:  # type: ignore[no-untyped-def]
    plain = api.call("POST", "keys", {"name": "x"}).json()["key"]
    admin = django_user_model.objects.create_superuser("root@example.com", "root@example.com", "pw")
    client = Api()
    client.force_login(admin)
    key = ApiKey.objects.get(prefix=plain[:12])
    for url in ["/admin/apikeys/apikey/", f"/admin/apikeys/apikey/{key.pk}/change/"]:
        page = client.get(url)
        assert page.status_code == 200
        assert plain not in page.content.decode()
        assert key.digest not in page.content.decode()
