"""Real time without gaps (small size; ``make chaos`` runs the large one): waiters answer within
1 s of the DATA 250, and an SSE client across 5 kill -9 restarts of the web process gets every
event exactly once."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.chaos import realtime_gaps
from tests.live import Stack


@pytest.fixture(scope="module")
def stack(django_db_setup: None, django_db_blocker: Any) -> Iterator[Stack]:
    from django.db import connection

    running = Stack(connection.settings_dict["NAME"]).start()
    yield running
    running.stop()


def test_waiters_answer_within_a_second_of_the_250(stack: Stack, transactional_db: None) -> None:
    lanes, _ = realtime_gaps.setup("waiters", lanes=8)
    figures = realtime_gaps.run_waiters(stack, lanes, trials=200)
    print(figures)
    assert figures.wrong == 0, figures.details[:10]
    # At least 99.9 % within 1 s: of 200 trials, that is every one.
    assert figures.within_1s >= 0.999 * figures.trials, figures


def test_stream_across_web_restarts_has_no_gaps_and_no_duplicates(
    stack: Stack, transactional_db: None
) -> None:
    _, inbox = realtime_gaps.setup("stream", lanes=0)
    figures = realtime_gaps.run_stream(stack, inbox, events=150, restarts=5)
    print(figures)
    assert figures.restarts == 5 and figures.connections >= 6, figures
    assert figures.accepted == 135 and figures.refused == 15, figures.details[:10]
    assert figures.logged == figures.events == 150, figures.details[:10]
    assert figures.received == 150, figures.details[:10]
    assert figures.missing == figures.duplicates == figures.out_of_order == 0, figures.details
    assert figures.wrong_payload == 0, figures.details[:10]
