"""Acknowledged mail survives smtpd crashes (small size; ``make chaos`` runs the large one)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from apikeys.models import Workspace
from inboxes import services as inbox_services
from tests.chaos import smtp_crash


@pytest.fixture
def addresses(transactional_db: None, workspace: Workspace) -> Iterator[list[str]]:
    inboxes = [
        inbox_services.inbox_create(workspace=workspace, local_part=f"chaos{n}", ttl_minutes=None)
        for n in range(10)
    ]
    yield [inbox.address for inbox in inboxes]


def test_acknowledged_mail_survives_kill_9(addresses: list[str]) -> None:
    from django.db import connection

    figures = smtp_crash.run(connection.settings_dict["NAME"], addresses, messages=500)
    assert figures.kills >= 3, figures  # the chaos loop really ran during the load
    assert figures.acked == figures.sent, figures.details[:10]
    assert figures.lost == 0, figures.details[:10]
    assert figures.duplicates == 0, figures.details[:10]
    assert figures.hash_mismatches == 0, figures.details[:10]
