"""250 only after commit: faults in the raw write, the event write and the COMMIT itself."""

from __future__ import annotations

from apikeys.models import Workspace
from inboxes import services as inbox_services
from tests.chaos import commit_faults


def test_no_250_and_nothing_left_behind_when_storing_fails(
    transactional_db: None, workspace: Workspace
) -> None:
    from django.db import connection

    inbox = inbox_services.inbox_create(workspace=workspace, local_part="faults", ttl_minutes=None)
    results = commit_faults.run(
        connection.settings_dict["NAME"], inbox.pk, inbox.address, attempts=50
    )
    assert [r.fault for r in results] == ["raw write", "event write", "commit"]
    for r in results:
        assert r.answered_4xx == r.attempts and r.answered_250 == 0 and not r.other, r
        assert r.leftover_rows == {"emails": 0, "raw": 0, "attachments": 0, "events": 0}, r
        assert r.counters == (0, 0), r
        assert r.stored_after_retry == 1, r
