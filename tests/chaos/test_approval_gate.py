"""Approval is a hard gate under worker kills (small size; ``make chaos`` runs the large one)."""

from __future__ import annotations

import pytest

from tests.chaos import approval_gate


@pytest.mark.topology_production  # Celery workers killed, tasks forged on the broker
def test_nothing_leaves_unapproved_and_approved_mail_leaves_once(transactional_db: None) -> None:
    from django.db import connection

    figures = approval_gate.run(connection.settings_dict["NAME"], per_kind=30)
    print({k: v for k, v in figures.__dict__.items() if k != "details"})
    details = figures.details[:20]
    assert figures.kills >= 3, figures  # the chaos loop really ran while mail was moving
    assert figures.fates == {"expire": 6, "reject": 12, "pending": 6, "approve": 36}, figures
    assert figures.held_while_pending == figures.swept_while_pending == 0, details
    assert figures.leaked == 0 and figures.early == 0, details
    assert figures.approve_requests == 36 * approval_gate.APPROVERS, figures
    assert figures.approve_200 == 36 and figures.approve_409 == 36 * 9, details
    assert figures.late_decisions == figures.late_409 == 6 + 12, details
    assert figures.delivered_once + figures.delivered_again == 36, details
    assert figures.missing == 0, details
    # A second copy only where a worker died between DATA and recording the relay's 250 (no
    # SMTP client can know whether the relay kept it; it sends again rather than lose it), and
    # such a death needs a kill.
    assert figures.duplicates == 0, details
    assert figures.explained_duplicates <= figures.interrupted_handovers <= figures.kills, details
    assert figures.content_mismatches == 0 and figures.unknown_messages == 0, details
    assert figures.wrong_status == 0, details
    assert figures.sink_messages == 36 + figures.explained_duplicates, details
