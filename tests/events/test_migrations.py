"""The event log changed apps (webhooks -> events) in Django's state only: a database migrated at
the old state keeps its table, its rows and their ids, and ``events.Event`` reads them."""

from __future__ import annotations

import pytest
from django.contrib.contenttypes.models import ContentType
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from events.models import Event

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("webhooks", "0003_lz4"), ("events", None)]  # main's migrations: the log in webhooks


def _leaves(executor: MigrationExecutor) -> list[tuple[str, str]]:
    return executor.loader.graph.leaf_nodes()


def test_an_event_recorded_before_the_move_is_read_after_it() -> None:
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    old = MigrationExecutor(connection).loader.project_state(BEFORE[:1]).apps
    assert ("webhooks", "event") in {
        (m._meta.app_label, m._meta.model_name) for m in old.get_models()
    }
    OldEvent = old.get_model("webhooks", "Event")
    recorded = OldEvent.objects.create(
        workspace_id="ws_before", inbox_id="inb_before", type="email.received", data={"n": 1}
    )
    ContentType.objects.get_or_create(app_label="webhooks", model="event")
    ContentType.objects.filter(app_label="events", model="event").delete()

    executor = MigrationExecutor(connection)
    executor.migrate(_leaves(executor))

    kept = Event.objects.unscoped().get(pk=recorded.pk)
    assert (kept.workspace_id, kept.inbox_id, kept.type, kept.data) == (
        "ws_before",
        "inb_before",
        "email.received",
        {"n": 1},
    )
    new = MigrationExecutor(connection).loader.project_state(_leaves(executor)).apps
    labels = {(m._meta.app_label, m._meta.model_name) for m in new.get_models()}
    assert ("events", "event") in labels and ("webhooks", "event") not in labels
    assert ContentType.objects.filter(app_label="events", model="event").exists()
    assert not ContentType.objects.filter(app_label="webhooks", model="event").exists()
    # The sequence went on where it was: the next event follows the one recorded before.
    assert Event.objects.create(workspace_id="ws_after", type="inbox.created").pk > recorded.pk
