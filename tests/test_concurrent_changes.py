"""A PATCH whose object another request deletes between the PATCH's lookup and its save answers
404 ``not_found``, not 500 (config.changes). (API keys are never deleted, only revoked: a
revoked key's row stays, so its PATCH cannot meet a missing row.) The schema fuzzer found it with two workers: a
DELETE of a webhook endpoint landed while a PATCH of it was validating its body.

Each case takes the interleaving apart: the object is read the way the API reads it, the row
is deleted by a second request, and the update service is then called with the stale object.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from apikeys.models import Workspace
from config.api.errors import ApiError
from inboxes import selectors as inbox_selectors
from inboxes import services as inbox_services
from inboxes.models import Inbox
from labels import selectors as label_selectors
from labels import services as label_services
from labels.models import Label
from tests.conftest import Api
from webhooks import selectors as webhook_selectors
from webhooks import services as webhook_services
from webhooks.models import Endpoint

pytestmark = pytest.mark.django_db


def _inbox(api: Api, workspace: Workspace) -> tuple[Any, str, Callable[[Any], Any]]:
    created = api.call("POST", "inboxes", {"local_part": "racing"}).json()
    stale = inbox_selectors.inbox_get(workspace, created["id"])
    return (
        stale,
        f"inboxes/{created['id']}",
        lambda inbox: inbox_services.inbox_update(inbox=inbox, name="renamed"),
    )


def _label(api: Api, workspace: Workspace) -> tuple[Any, str, Callable[[Any], Any]]:
    assert api.call("POST", "labels", {"key": "racing", "name": "Racing"}).status_code == 200
    stale = label_selectors.label_get(workspace, "racing")
    return (
        stale,
        "labels/racing",
        lambda label: label_services.label_update(label=label, name="Renamed"),
    )


def _webhook(api: Api, workspace: Workspace) -> tuple[Any, str, Callable[[Any], Any]]:
    created = api.call("POST", "webhooks", {"url": "https://hooks.example.com/in"}).json()
    stale = webhook_selectors.endpoint_get(workspace, created["id"])
    return (
        stale,
        f"webhooks/{created['id']}",
        lambda endpoint: webhook_services.endpoint_update(endpoint=endpoint, enabled=False),
    )


CASES = {
    "inbox": (_inbox, Inbox, "No such inbox."),
    "label": (_label, Label, "No such label."),
    "webhook": (_webhook, Endpoint, "No such webhook endpoint."),
}


@pytest.mark.parametrize("case", CASES)
def test_update_of_a_row_deleted_meanwhile_is_not_found(
    case: str, api: Api, workspace: Workspace, settings: Any
) -> None:
    settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = False
    make, model, message = CASES[case]
    stale, path, update = make(api, workspace)
    deleted = api.call("DELETE", path)
    assert deleted.status_code == 200, deleted.content
    with pytest.raises(ApiError) as raised:
        update(stale)
    assert (raised.value.code, raised.value.status, raised.value.message) == (
        "not_found",
        404,
        message,
    )
    assert not model.objects.filter(pk=stale.pk).exists()  # not written back by the update


@pytest.mark.parametrize("case", CASES)
def test_update_of_a_row_still_there_is_saved(case: str, api: Api, workspace: Workspace) -> None:
    make, model, _ = CASES[case]
    stale, _, update = make(api, workspace)
    update(stale)
    row = model.objects.get(pk=stale.pk)
    changed = {
        "inbox": lambda r: r.name == "renamed",
        "label": lambda r: r.name == "Renamed",
        "webhook": lambda r: r.enabled is False,
    }
    assert changed[case](row)
