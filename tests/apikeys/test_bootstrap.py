"""``manage.py bootstrap`` is the operator's command line: it creates a new owner with the given
password, and never replaces an existing account's password unless told to (issue 23)."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from apikeys import services as key_services
from apikeys.audit import Actor
from apikeys.models import Membership

pytestmark = pytest.mark.django_db


def _bootstrap(*extra: str) -> dict:
    out = StringIO()
    call_command(
        "bootstrap",
        "--workspace",
        "Fresh Co",
        "--owner",
        "Kim@Example.com",
        "--password",
        "operator-typed-pass-1",
        "--json",
        *extra,
        stdout=out,
    )
    return json.loads(out.getvalue())


def test_bootstrap_keeps_an_existing_accounts_password() -> None:
    elsewhere = key_services.workspace_get_or_create(name="Elsewhere")
    kim = key_services.user_get_or_create(email="kim@example.com", password="kims-own-password")
    key_services.membership_set(
        workspace=elsewhere, user=kim, role="member", by=Actor.system("tests")
    )
    result = _bootstrap()
    kim.refresh_from_db()
    assert kim.check_password("kims-own-password")
    assert not kim.check_password("operator-typed-pass-1")
    assert result["owner"] == "kim@example.com" and result["password_set"] is False
    out = StringIO()
    call_command(
        "bootstrap", "--workspace", "Fresh Co", "--owner", "kim@example.com",
        "--password", "x-other-pass-2", stdout=out,
    )  # fmt: skip
    assert "password   unchanged" in out.getvalue()


def test_bootstrap_sets_a_new_owners_password_and_resets_only_when_asked() -> None:
    first = _bootstrap()
    assert first["password_set"] is True
    owner = Membership.objects.get(workspace_id=first["workspace_id"]).user
    assert owner.check_password("operator-typed-pass-1")
    out = StringIO()
    call_command(
        "bootstrap", "--workspace", "Fresh Co", "--owner", "kim@example.com",
        "--password", "replaced-by-operator-3", "--reset-password", "--json", stdout=out,
    )  # fmt: skip
    assert json.loads(out.getvalue())["password_set"] is True
    owner.refresh_from_db()
    assert owner.check_password("replaced-by-operator-3")


@pytest.mark.parametrize(
    "password", ["-leading-dash-pw1", "--looks-like-an-option", "plain-pw-123"]
)
def test_the_servers_first_start_bootstraps_whatever_its_generated_password_begins_with(
    password: str, tmp_path: Path
) -> None:
    """``pigeonhole-server`` makes its first password with ``token_urlsafe``, which begins with
    ``-`` once in 64 starts; that start failed with "argument --password: expected one argument"
    (seen in CI). The account gets exactly that password."""
    from django.contrib.auth import get_user_model

    from config.server import bootstrap

    created = bootstrap("admin@dash.test", password, tmp_path / "admin-key")
    assert created["password_set"] is True
    assert created["api_key"].startswith("pgh_")
    owner = get_user_model().objects.get(email="admin@dash.test")
    assert owner.check_password(password)
