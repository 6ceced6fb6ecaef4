"""The dashboard sign-in of the operations contract: /login/ with e-mail and password."""

from __future__ import annotations

import pytest
from django.test import Client

from apikeys import services

pytestmark = pytest.mark.django_db


def test_login_with_email_and_password() -> None:
    workspace, _owner, _, _ = services.bootstrap(
        workspace_name="Acme", owner_email="Owner@Acme.test", password="s3cret-pass-9"
    )
    client = Client()
    page = client.get("/login/")
    assert page.status_code == 200 and b'name="username"' in page.content
    bad = client.post("/login/", {"username": "owner@acme.test", "password": "nope"})
    assert bad.status_code == 200 and b"didn't match" in bad.content
    good = client.post("/login/", {"username": "owner@acme.test", "password": "s3cret-pass-9"})
    assert good.status_code == 302 and good["Location"] == "/"
    home = client.get("/")
    assert b"owner@acme.test" in home.content and b"Acme" in home.content
    me = client.get("/api/v1/me").json()
    assert me["type"] == "session" and me["workspace"]["id"] == workspace.pk
    client.post("/logout/")
    assert client.get("/").status_code == 302
