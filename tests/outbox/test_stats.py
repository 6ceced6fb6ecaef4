"""GET /stats: counts from the counters and the log, scoped to the workspace."""

from __future__ import annotations

from datetime import timedelta

import pytest
import time_machine
from django.utils import timezone

from apikeys.models import Workspace
from inboxes import services as inbox_services
from mail import pipeline
from mail.models import Email
from tests.conftest import Api
from tests.mail.messages import message

pytestmark = pytest.mark.django_db


def test_stats(api: Api, workspace: Workspace, other_workspace: Workspace) -> None:
    box = inbox_services.inbox_create(workspace=workspace, local_part="s1")
    inbox_services.inbox_create(workspace=workspace, local_part="s2", ttl_minutes=1)
    theirs = inbox_services.inbox_create(workspace=other_workspace, local_part="t1")
    ids = [pipeline.receive_one(message(to=box.address), to=box.address).email_id for _ in range(3)]
    pipeline.receive_one(message(to=theirs.address), to=theirs.address)
    Email.objects.filter(pk=ids[0]).update(received_at=timezone.now() - timedelta(days=2))
    api.call("PATCH", f"emails/{ids[1]}", {"read": True})
    with time_machine.travel(timezone.now() + timedelta(minutes=5)):
        body = api.call("GET", "stats").json()
    assert body["inboxes"] == {"total": 2, "active": 1, "expired": 1}
    assert body["emails"] == {"total": 3, "last_24h": 2, "unread": 2}
    assert body["outbox"] == {"pending": 0, "sent": 0, "rejected": 0, "failed": 0, "expired": 0}
    assert body["webhooks"] == {"deliveries_24h": 0, "failed_24h": 0}
    kinds = [event["type"] for event in body["recent_events"]]
    assert kinds[0] == "email.updated" and kinds.count("email.received") == 3
    assert theirs.pk not in str(body)


def test_stats_query_count_is_constant(
    api: Api, workspace: Workspace, django_assert_max_num_queries
) -> None:  # type: ignore[no-untyped-def]
    for i in range(5):
        box = inbox_services.inbox_create(workspace=workspace, local_part=f"q{i}")
        pipeline.receive_one(message(to=box.address), to=box.address)
    with django_assert_max_num_queries(9):  # 9: the largest inboxes (storage)
        assert api.call("GET", "stats").status_code == 200
