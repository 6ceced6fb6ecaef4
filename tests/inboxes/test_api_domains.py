"""GET /domains: shared domains, the workspace's own, never another workspace's."""

from __future__ import annotations

import pytest

from apikeys.audit import Actor
from apikeys.models import Workspace
from inboxes import services
from tests.conftest import Api
from tests.dns_server import verified_domain

pytestmark = pytest.mark.django_db


def test_domains_list(settings, api: Api, workspace: Workspace, other_workspace: Workspace) -> None:  # type: ignore[no-untyped-def]
    settings.INBOX_DOMAINS = ["shared.test", "second.test"]
    mine = services.domain_add(
        workspace=workspace, domain="Mail.Mine.test", catch_all=True, by=Actor.system("tests")
    )
    services.domain_add(workspace=other_workspace, domain="theirs.test", by=Actor.system("tests"))
    body = api.call("GET", "domains").json()
    shared = {"catch_all": False, "verified": True, "verification": None, "shared": True}
    assert body == {
        "data": [
            {"domain": "shared.test", "default": True, **shared},
            {"domain": "second.test", "default": False, **shared},
            {
                "domain": "mail.mine.test",
                "shared": False,
                "catch_all": True,
                "default": False,
                "verified": False,
                "verification": {
                    "name": "_pigeonhole.mail.mine.test",
                    "type": "TXT",
                    "value": f"pigeonhole-verification={mine.verification_token}",
                    "verified_at": None,
                    "checked_at": None,
                    "result": None,
                    "detail": "",
                },
            },
        ],
        "next_cursor": None,
    }


def test_only_verified_custom_domain_becomes_default(
    settings, api: Api, workspace: Workspace
) -> None:  # type: ignore[no-untyped-def]
    settings.INBOX_DOMAINS = []
    assert api.call("GET", "domains").json()["data"] == []
    services.domain_add(workspace=workspace, domain="pending.test", by=Actor.system("tests"))
    verified_domain(workspace, "own.test")
    rows = api.call("GET", "domains").json()["data"]
    assert [(r["domain"], r["verified"], r["default"]) for r in rows] == [
        ("pending.test", False, False),
        ("own.test", True, True),
    ]
