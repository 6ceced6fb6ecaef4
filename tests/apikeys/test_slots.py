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
    cancelled = threading.Event()

    def take_after_the_cancel() -> throttling.Lease:
        assert cancelled.wait(10)
        return throttling.open_slot(principal)

    async def run() -> None:
        call = asyncio.to_thread(take_after_the_cancel)
        caller = asyncio.ensure_future(throttling.settled(call, lambda lease: lease))
        await asyncio.sleep(0.05)  # the caller is awaiting the thread
        caller.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await caller
        assert caller.cancelled()
        cancelled.set()  # now the thread takes the slot, for nobody
        await asyncio.sleep(0.2)

    asyncio.run(run())
    throttling.close_slot(_take_again(principal))


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
