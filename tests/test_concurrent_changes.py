"""A PATCH whose object another request deletes between the PATCH's lookup and its save answers
404 ``not_found``, not 500 (config.changes). The schema fuzzer found it with two workers: a
DELETE of a webhook endpoint landed while a PATCH of it was validating its body. (API keys are
never deleted, only revoked: a revoked key's row stays, so its PATCH cannot meet a missing row.)

Each case takes the interleaving apart: the object is created and read the way the API reads
it, the row is deleted by a second request, and the update service is then called with the
stale object.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from django.db import models

from apikeys.audit import Actor
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


@dataclass(frozen=True)
class Case:
    collection: str  # the API path that creates one
    body: dict[str, Any]
    ref: str  # the field of the created object its path and selector take
    get: Callable[[Workspace, str], models.Model]  # the API's tenant lookup
    update: Callable[[Any], Any]  # the PATCH's service call on the object
    changed: Callable[[Any], bool]  # the stored row shows the update
    model: type[models.Model]
    not_found: str

    def stale(self, api: Api, workspace: Workspace) -> tuple[models.Model, str]:
        """The object as a PATCH has read it, and its API path."""
        created = api.call("POST", self.collection, self.body)
        assert created.status_code == 200, created.content
        ref = created.json()[self.ref]
        return self.get(workspace, ref), f"{self.collection}/{ref}"


CASES = {
    "inbox": Case(
        "inboxes",
        {"local_part": "racing"},
        "id",
        inbox_selectors.inbox_get,
        lambda inbox: inbox_services.inbox_update(inbox=inbox, name="renamed"),
        lambda row: row.name == "renamed",
        Inbox,
        "No such inbox.",
    ),
    "label": Case(
        "labels",
        {"key": "racing", "name": "Racing"},
        "key",
        label_selectors.label_get,
        lambda label: label_services.label_update(
            label=label, name="Renamed", by=Actor.system("tests")
        ),
        lambda row: row.name == "Renamed",
        Label,
        "No such label.",
    ),
    "webhook": Case(
        "webhooks",
        {"url": "https://hooks.example.com/in"},
        "id",
        webhook_selectors.endpoint_get,
        lambda endpoint: webhook_services.endpoint_update(
            endpoint=endpoint, enabled=False, by=Actor.system("tests")
        ),
        lambda row: row.enabled is False,
        Endpoint,
        "No such webhook endpoint.",
    ),
}


@pytest.fixture(autouse=True)
def _public_targets_only(settings: Any) -> None:
    settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = False


@pytest.mark.parametrize("name", CASES)
def test_update_of_a_row_deleted_meanwhile_is_not_found(
    name: str, api: Api, workspace: Workspace
) -> None:
    case = CASES[name]
    stale, path = case.stale(api, workspace)
    deleted = api.call("DELETE", path)
    assert deleted.status_code == 200, deleted.content
    with pytest.raises(ApiError) as raised:
        case.update(stale)
    assert (raised.value.code, raised.value.status, raised.value.message) == (
        "not_found",
        404,
        case.not_found,
    )
    assert not case.model._default_manager.filter(pk=stale.pk).exists()  # not written back


@pytest.mark.parametrize("name", CASES)
def test_update_of_a_row_still_there_is_saved(name: str, api: Api, workspace: Workspace) -> None:
    case = CASES[name]
    stale, _ = case.stale(api, workspace)
    case.update(stale)
    assert case.changed(case.model._default_manager.get(pk=stale.pk))
