"""Operator entry points: /healthz, bootstrap, createkey."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from apikeys.models import ApiKey, Membership, Workspace
from tests.conftest import Api

pytestmark = pytest.mark.django_db


def test_healthz_ok() -> None:
    response = Api().get("/healthz")
    assert response.status_code == 200
    assert response.json()["status"] == "ok"


def test_healthz_503_when_redis_is_down(settings) -> None:  # type: ignore[no-untyped-def]
    settings.REDIS_URL = "redis://127.0.0.1:1/0"
    response = Api().get("/healthz")
    assert response.status_code == 503
    assert response.json()["checks"]["redis"] == "error"


def _bootstrap(*extra: str) -> dict:
    out = StringIO()
    call_command(
        "bootstrap",
        "--workspace",
        "Acme",
        "--owner",
        "Owner@Acme.test",
        "--password",
        "s3cret-pass",
        "--json",
        *extra,
        stdout=out,
    )
    return json.loads(out.getvalue())


def test_bootstrap_creates_workspace_owner_and_admin_key(settings) -> None:  # type: ignore[no-untyped-def]
    result = _bootstrap()
    assert {"workspace_id", "api_key", "domain", "owner"} <= set(result)
    assert result["owner"] == "owner@acme.test"
    assert result["domain"] == settings.INBOX_DOMAINS[0]
    me = Api(result["api_key"]).call("GET", "me").json()
    assert me["workspace"]["id"] == result["workspace_id"]
    assert me["scopes"] == ["read", "write", "send", "admin"]
    membership = Membership.objects.get(workspace_id=result["workspace_id"])
    assert membership.role == "owner" and membership.user.check_password("s3cret-pass")


def test_bootstrap_reuses_workspace_and_owner() -> None:
    first, second = _bootstrap(), _bootstrap("--require-approval", "--domain", "mail.acme.test")
    assert first["workspace_id"] == second["workspace_id"]
    assert first["api_key"] != second["api_key"]
    assert Workspace.objects.count() == 1 and Membership.objects.count() == 1
    assert Workspace.objects.get().require_approval is True
    assert second["domain"] == "mail.acme.test"
    domains = Api(second["api_key"]).call("GET", "domains").json()["data"]
    custom = next(d for d in domains if d["domain"] == "mail.acme.test")
    assert {k: custom[k] for k in ("shared", "catch_all", "default", "verified")} == {
        "shared": False,
        "catch_all": False,
        "default": False,
        "verified": False,  # receives mail once its TXT record is verified
    }
    record = custom["verification"]
    assert second["domain_verification"] == f"{record['name']} TXT {record['value']}"


def test_createkey_prints_a_working_key(workspace: Workspace) -> None:
    out = StringIO()
    call_command("createkey", workspace.pk, "deploy bot", "--scopes", "read,send", stdout=out)
    plain = out.getvalue().strip()
    me = Api(plain).call("GET", "me").json()
    assert me["key"]["name"] == "deploy bot" and me["scopes"] == ["read", "send"]
    assert ApiKey.objects.filter(workspace=workspace).count() == 1


def test_createkey_rejects_bad_input(workspace: Workspace) -> None:
    with pytest.raises(CommandError):
        call_command("createkey", "ws_nope", "x", stdout=StringIO())
    with pytest.raises(CommandError):
        call_command("createkey", workspace.pk, "x", "--scopes", "root", stdout=StringIO())
