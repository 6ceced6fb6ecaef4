"""``bootstrap --key-file`` and ``--superuser``, what ``make run`` runs on every start (issue 25,
items 2 and 3): one admin key shown again while it is valid, a new one when it is not."""

from __future__ import annotations

import json
import stat
from io import StringIO
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from apikeys import services
from apikeys.audit import Actor
from apikeys.models import ApiKey

pytestmark = pytest.mark.django_db


def _bootstrap(key_file: Path, *extra: str, workspace: str = "Demo") -> dict:
    out = StringIO()
    call_command(
        "bootstrap",
        "--workspace",
        workspace,
        "--owner",
        "demo@pigeonhole.test",
        "--password",
        "pigeonhole-demo",
        "--key-file",
        str(key_file),
        "--json",
        *extra,
        stdout=out,
    )
    return json.loads(out.getvalue())


def test_a_second_run_shows_the_same_key_and_mints_none(tmp_path: Path) -> None:
    key_file = tmp_path / "var" / "demo-admin-key"
    first = _bootstrap(key_file)
    second = _bootstrap(key_file)
    assert first["key_new"] is True and second["key_new"] is False
    assert second["api_key"] == first["api_key"] and second["key_id"] == first["key_id"]
    assert ApiKey.objects.count() == 1
    assert key_file.read_text().strip() == first["api_key"]
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600


def test_a_wider_key_file_is_narrowed_to_its_owner(tmp_path: Path) -> None:
    key_file = tmp_path / "demo-admin-key"
    _bootstrap(key_file)
    key_file.chmod(0o644)
    _bootstrap(key_file)
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600


def test_a_revoked_key_is_replaced(tmp_path: Path) -> None:
    key_file = tmp_path / "demo-admin-key"
    first = _bootstrap(key_file)
    services.api_key_revoke(key=ApiKey.objects.get(pk=first["key_id"]), by=Actor.system("tests"))
    second = _bootstrap(key_file)
    assert second["key_new"] is True and second["api_key"] != first["api_key"]
    assert key_file.read_text().strip() == second["api_key"]


def test_another_workspaces_key_is_never_shown(tmp_path: Path) -> None:
    key_file = tmp_path / "demo-admin-key"
    other = _bootstrap(key_file, workspace="Other")
    demo = _bootstrap(key_file)
    assert demo["key_new"] is True and demo["workspace_id"] != other["workspace_id"]


def test_a_narrowed_key_is_not_an_admin_key(tmp_path: Path) -> None:
    key_file = tmp_path / "demo-admin-key"
    first = _bootstrap(key_file)
    ApiKey.objects.filter(pk=first["key_id"]).update(scopes=["read"])
    assert _bootstrap(key_file)["key_new"] is True


def test_without_a_key_file_every_run_mints(tmp_path: Path) -> None:
    out = StringIO()
    args = ["--workspace", "Demo", "--owner", "o@x.test", "--password", "pw-12345678", "--json"]
    call_command("bootstrap", *args, stdout=out)
    call_command("bootstrap", *args, stdout=out)
    assert ApiKey.objects.count() == 2


def test_superuser_lets_the_owner_into_the_admin(tmp_path: Path) -> None:
    _bootstrap(tmp_path / "k")
    owner = get_user_model().objects.get(username="demo@pigeonhole.test")
    assert not owner.is_staff and not owner.is_superuser
    _bootstrap(tmp_path / "k", "--superuser")
    owner.refresh_from_db()
    assert owner.is_staff and owner.is_superuser
