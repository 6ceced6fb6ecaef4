"""Webhooks at least once, never twice at the same time, under worker kills (small size;
``make chaos`` runs the large one)."""

from __future__ import annotations

import pytest

from tests.chaos import webhook_kills


# Celery workers killed every 3 s while they deliver; embedded mode has none (its one process
# killed mid-delivery is tests/webhooks/test_workers.py, which runs in both configurations).
@pytest.mark.topology_production
def test_every_delivery_answered_2xx_without_overlap(transactional_db: None) -> None:
    from django.db import connection

    figures = webhook_kills.run(connection.settings_dict["NAME"], events=200, min_kills=4)
    print({k: v for k, v in figures.__dict__.items() if k != "details"})
    details = figures.details[:20]
    assert figures.kills >= 4, figures  # the chaos loop really ran while deliveries moved
    assert figures.deliveries == 200, details
    assert figures.lost == 0, details
    assert figures.overlaps == 0, details
    assert figures.pending_at_end == 0, details
    assert figures.statuses == {"succeeded": 200}, details
    assert figures.unlogged_requests == 0, details
    # Every delivery's first request was answered 500 (or cut by a kill), a later one 200.
    assert figures.answered_500 + figures.answered_2xx + figures.unanswered == figures.requests
    assert figures.requests <= figures.attempts_logged, details
    # A second 2xx only where a worker died after the receiver answered and before the outcome
    # was recorded (at least once, as webhooks promise); a kill cuts one attempt at most.
    assert figures.second_2xx <= figures.interrupted_attempts <= figures.kills, details
    assert not details, details
