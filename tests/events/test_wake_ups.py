"""Which events publish a wake-up, heard by a real Redis subscriber of the channel layer's inbox
groups: a new inbox's ``inbox.created`` publishes none (nobody can be listening to an inbox
before it exists: ``events.services._unheard``), on either way a create takes (the one statement
and the transaction), while the inbox's next event does."""

from __future__ import annotations

import time

import pytest
import redis
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import connection
from django.test.utils import CaptureQueriesContext

from apikeys.models import Workspace
from tests.conftest import Api

pytestmark = pytest.mark.topology_production  # embedded mode has no Redis: the in-memory layer


def _wakes_until_deleted(pubsub: redis.client.PubSub, inbox_id: str) -> list[str]:
    """The types of the wake-ups heard for ``inbox_id``'s group, up to its ``inbox.deleted``."""
    layer = get_channel_layer()
    heard: list[str] = []
    deadline = time.monotonic() + 10
    while "inbox.deleted" not in heard:
        assert time.monotonic() < deadline, f"no inbox.deleted heard; heard {heard}"
        message = pubsub.get_message(timeout=1.0)
        if message is None or not message["channel"].endswith(f"inbox.{inbox_id}".encode()):
            continue  # other tests' inboxes
        heard.append(layer.deserialize(message["data"])["event"])
    return heard


@pytest.mark.parametrize("capped", [False, True], ids=["one statement", "transaction"])
@pytest.mark.django_db(transaction=True)
def test_a_new_inbox_publishes_no_wake_up_and_its_next_event_does(
    workspace: Workspace, api: Api, capped: bool
) -> None:
    if capped:  # counted under the workspace's lock: the transactional way
        workspace.max_inboxes = 100
        workspace.save(update_fields=["max_inboxes"])
    prefix = settings.CHANNEL_LAYERS["default"]["CONFIG"]["prefix"]
    pubsub = redis.Redis.from_url(settings.REDIS_URL).pubsub(ignore_subscribe_messages=False)
    pubsub.psubscribe(f"{prefix}__group__inbox.*")
    assert pubsub.get_message(timeout=5)["type"] == "psubscribe"  # subscribed before the create
    try:
        with CaptureQueriesContext(connection) as captured:
            response = api.call("POST", "inboxes", {})
        assert response.status_code == 200, response.content
        first = next(q["sql"] for q in captured.captured_queries if "INSERT" in q["sql"])
        assert first.startswith('INSERT INTO "inboxes_inbox"' if capped else 'WITH "a" AS')
        inbox_id = response.json()["id"]
        assert api.call("DELETE", f"inboxes/{inbox_id}").status_code == 200
        # Published in order from this thread: a wake-up of the create would come first.
        assert _wakes_until_deleted(pubsub, inbox_id) == ["inbox.deleted"]
    finally:
        pubsub.close()
