"""GET /domains: shared domains, the workspace's own, never another workspace's."""

from __future__ import annotations

import pytest

from apikeys.models import Workspace
from inboxes import services
from tests.conftest import Api

pytestmark = pytest.mark.django_db


def test_domains_list(settings, api: Api, workspace: Workspace, other_workspace: Workspace) -> None:  # type: ignore[no-untyped-def]
    settings.INBOX_DOMAINS = ["shared.test", "second.test"]
    services.domain_add(workspace=workspace, domain="Mail.Mine.test", catch_all=True)
    services.domain_add(workspace=other_workspace, domain="theirs.test")
    body = api.call("GET", "domains").json()
    assert body == {
        "data": [
            {"domain": "shared.test", "shared": True, "catch_all": False, "default": True},
            {"domain": "second.test", "shared": True, "catch_all": False, "default": False},
            {"domain": "mail.mine.test", "shared": False, "catch_all": True, "default": False},
        ],
        "next_cursor": None,
    }


def test_only_custom_domain_becomes_default(settings, api: Api, workspace: Workspace) -> None:  # type: ignore[no-untyped-def]
    settings.INBOX_DOMAINS = []
    assert api.call("GET", "domains").json()["data"] == []
    services.domain_add(workspace=workspace, domain="own.test")
    assert api.call("GET", "domains").json()["data"][0]["default"] is True
