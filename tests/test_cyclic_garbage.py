"""Validating a request leaves nothing for the garbage collector.

A DRF serializer and its bound fields point at each other (``fields`` and each field's
``parent``, a list field and its child), so every serializer a request validated was garbage
that only a collection could free: about 180 objects for the wait's query. A web process holding
hundreds of parked waits paid for it in collections that stalled every answer
(``config.api.inputs.release``). Each case validates once first (whatever a first use caches),
then counts what ``gc.collect()`` finds unreachable after validating again with the collector
off: nothing, for a valid input and for the refusals below. (A value refused by one of Django's
validators is left to the collector: Django's ``ValidationError`` lists itself in its own
``error_list``.)
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator

import pytest
from rest_framework import serializers

from config.api.query import validate_query
from inboxes.serializers import InboxCreateIn
from mail.waiting import EmailsWaitQuery, WaitQuery
from outbox.mcp.tools import valid


@pytest.fixture
def collector_off() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def garbage_of(work: Callable[[], object]) -> int:
    """Objects ``work`` left unreachable but not freed (reference cycles), after a first run."""
    work()
    gc.collect()
    for _ in range(3):
        work()
    return gc.collect()


def refused(work: Callable[[], object]) -> Callable[[], None]:
    def run() -> None:
        with pytest.raises(serializers.ValidationError):
            work()

    return run


WAIT = [("timeout", "5"), ("subject", "code"), ("header", "X-A: b"), ("header", "X-C: d")]
BODY = {
    "name": "n",
    "tags": ["a", "b"],
    "smtp_faults": [{"stage": "rcpt", "reply": "451 4.7.1 Try again later"}],
}


@pytest.mark.parametrize(
    "work",
    [
        pytest.param(lambda: validate_query(WaitQuery, WAIT), id="wait query"),
        pytest.param(
            lambda: validate_query(EmailsWaitQuery, [*WAIT, ("to", "a@b.example")]),
            id="emails wait query",
        ),
        pytest.param(
            refused(lambda: validate_query(WaitQuery, [("since", "yesterday")])), id="bad query"
        ),
        pytest.param(lambda: InboxCreateIn(data=BODY).is_valid(), id="body"),
        pytest.param(lambda: InboxCreateIn(data={"tags": [1]}).is_valid(), id="bad body"),
        pytest.param(lambda: valid(WaitQuery, {"subject": "x", "timeout": 3}), id="mcp arguments"),
        pytest.param(
            refused(lambda: valid(WaitQuery, {"since": "yesterday"})), id="bad mcp arguments"
        ),
    ],
)
def test_validation_leaves_no_cyclic_garbage(
    work: Callable[[], object], collector_off: None
) -> None:
    assert garbage_of(work) == 0
