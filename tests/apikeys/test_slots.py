"""Open-stream slots and cancellation (``apikeys.throttling.settled``): a request cancelled while
its slot is being taken in a thread — its client left, an MCP call's task group was cancelled —
must not keep the slot. Before ``settled`` such a slot stayed held and renewed for the life of
the process, so the key's cap shrank by one per unlucky disconnect."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time

import pytest

from apikeys import services as key_services
from apikeys import throttling
from apikeys.audit import Actor
from apikeys.gate import principal_for_key
from apikeys.models import Workspace
from config.api.errors import RateLimited


def _take_again(principal: object, tries: int = 100) -> throttling.Lease:
    """The key's one slot, once it has come back (the give-back runs in a thread of its own)."""
    for _ in range(tries):
        try:
            return throttling.open_slot(principal)  # type: ignore[arg-type]
        except RateLimited:
            time.sleep(0.05)
    raise AssertionError("the cancelled caller's slot never came back")


@pytest.mark.django_db
def test_a_caller_cancelled_while_its_slot_is_taken_gives_it_back(
    workspace: Workspace, settings
) -> None:  # type: ignore[no-untyped-def]
    settings.MAX_OPEN_STREAMS_PER_KEY = 1
    plain = key_services.api_key_create(
        workspace=workspace, name="k", scopes=["read"], by=Actor.system("tests")
    ).plain
    principal = principal_for_key(plain)
    started, cancelled, returned = threading.Event(), threading.Event(), threading.Event()
    taken: list[throttling.Lease] = []

    def take_after_the_cancel() -> throttling.Lease:
        started.set()
        assert cancelled.wait(10)
        taken.append(throttling.open_slot(principal))
        returned.set()
        return taken[-1]

    async def run() -> None:
        call = asyncio.to_thread(take_after_the_cancel)
        caller = asyncio.ensure_future(throttling.settled(call, lambda lease: lease))
        # The caller is awaiting the thread once the thread runs (not a guess by the clock).
        assert await asyncio.to_thread(started.wait, 10)
        caller.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await caller
        assert caller.cancelled()
        cancelled.set()  # now the thread takes the slot, for nobody
        assert await asyncio.to_thread(returned.wait, 10)
        # Taken again while this loop runs on, as a server's does: the give-back is one of its
        # callbacks (a loop that ended first would cancel the thread's task with it).
        for _ in range(100):
            try:
                throttling.close_slot(throttling.open_slot(principal))
                return
            except RateLimited:
                await asyncio.sleep(0.05)
        raise AssertionError("the cancelled caller's slot never came back")

    asyncio.run(run())
    assert len(taken) == 1  # the slot was taken after the caller had gone


@pytest.mark.django_db
def test_a_settled_call_that_is_not_cancelled_keeps_its_slot(
    workspace: Workspace, settings
) -> None:  # type: ignore[no-untyped-def]
    settings.MAX_OPEN_STREAMS_PER_KEY = 1
    plain = key_services.api_key_create(
        workspace=workspace, name="k", scopes=["read"], by=Actor.system("tests")
    ).plain
    principal = principal_for_key(plain)

    async def run() -> throttling.Lease:
        return await throttling.settled(
            asyncio.to_thread(throttling.open_slot, principal), lambda lease: lease
        )

    lease = asyncio.run(run())
    try:
        with pytest.raises(RateLimited):
            throttling.open_slot(principal)
    finally:
        throttling.close_slot(lease)
    throttling.close_slot(_take_again(principal))
