"""A web process keeps each workspace's custom domains under the credentials epoch
(inboxes.selectors.domain_list): a request authenticated by a cached key reads no domain row,
and every kind of write to a domain — save, queryset update, delete — is seen by the next request.

Embedded mode (no Redis) caches nothing: there, every request reads the rows.
"""

from __future__ import annotations

import pytest
from django.conf import settings as django_settings
from django.db import connection
from django.test.utils import CaptureQueriesContext

from apikeys.audit import Actor
from apikeys.models import Workspace
from inboxes import services
from inboxes.models import Domain
from tests.conftest import Api

pytestmark = pytest.mark.django_db


def _domain_reads(api: Api, method: str, path: str, data: object = None) -> tuple[object, int]:
    with CaptureQueriesContext(connection) as captured:
        response = api.call(method, path, data)
    assert response.status_code == 200, response.content
    reads = [q for q in captured.captured_queries if 'FROM "inboxes_domain"' in q["sql"]]
    return response.json(), len(reads)


def test_creates_after_the_first_read_no_domain_row(settings, api: Api) -> None:  # type: ignore[no-untyped-def]
    settings.INBOX_DOMAINS = ["shared.test"]
    _, first = _domain_reads(api, "POST", "inboxes", {})
    body, second = _domain_reads(api, "POST", "inboxes", {})
    assert first == 1
    assert body["domain"] == "shared.test"
    assert second == (0 if django_settings.REDIS_URL else 1)


def test_every_write_is_seen_by_the_next_request(settings, api: Api, workspace: Workspace) -> None:  # type: ignore[no-untyped-def]
    settings.INBOX_DOMAINS = []
    assert api.call("GET", "domains").json()["data"] == []
    assert api.call("POST", "inboxes", {}).json()["error"]["code"] == "no_domain"

    # save(): a new claim shows at once, unverified, and takes no inbox yet.
    row = services.domain_add(workspace=workspace, domain="own.test", by=Actor.system("tests"))
    rows = api.call("GET", "domains").json()["data"]
    assert [(r["domain"], r["verified"]) for r in rows] == [("own.test", False)]
    assert api.call("POST", "inboxes", {}).json()["error"]["code"] == "no_domain"

    # A queryset update (as an operator's bulk action or the re-check sweep writes).
    assert Domain.objects.filter(workspace=workspace, pk=row.pk).update(verified=True) == 1
    created = api.call("POST", "inboxes", {})
    assert created.status_code == 200, created.content
    assert created.json()["domain"] == "own.test"
    assert api.call("GET", "domains").json()["data"][0]["default"] is True

    # delete(): gone for the next request (its inboxes first: a domain in use is refused).
    services.inbox_delete(inbox=workspace.inboxes.get(), by=Actor.system("tests"))
    services.domain_remove(workspace=workspace, domain="own.test", by=Actor.system("tests"))
    assert api.call("GET", "domains").json()["data"] == []
    assert api.call("POST", "inboxes", {}).json()["error"]["code"] == "no_domain"


def test_another_workspaces_domains_are_never_served(
    settings, api: Api, other_api: Api, workspace: Workspace, other_workspace: Workspace
) -> None:  # type: ignore[no-untyped-def]
    settings.INBOX_DOMAINS = []
    services.domain_add(workspace=workspace, domain="mine.test", by=Actor.system("tests"))
    services.domain_add(workspace=other_workspace, domain="theirs.test", by=Actor.system("tests"))
    for _ in range(2):  # the second time from the cache
        assert [r["domain"] for r in api.call("GET", "domains").json()["data"]] == ["mine.test"]
        theirs = other_api.call("GET", "domains").json()["data"]
        assert [r["domain"] for r in theirs] == ["theirs.test"]
