"""A client that leaves in the middle of ``wait_for_email`` gives its wait's slot back: with
``MAX_OPEN_STREAMS_PER_KEY=1`` the key's next wait is served, not refused as ``rate_limited``.
Both answers are covered: a call without a progress token is answered with JSON, one with a
progress token with an event stream (its progress notifications), and ``outbox.mcp.asgi``
watches the connection itself on both paths."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import pytest

from apikeys import services as key_services
from apikeys.audit import Actor
from apikeys.models import Workspace
from inboxes import services as inbox_services
from tests.live import Stack
from tests.outbox.mcp.conftest import session


@pytest.fixture(scope="module")
def one_slot_stack(django_db_setup: None, django_db_blocker) -> Iterator[Stack]:  # type: ignore[no-untyped-def]
    from django.db import connection

    running = Stack(connection.settings_dict["NAME"])
    running.env["MAX_OPEN_STREAMS_PER_KEY"] = "1"
    running.start()
    yield running
    running.stop()


@pytest.mark.parametrize("progress", [False, True], ids=["json", "event-stream"])
def test_a_client_that_leaves_mid_wait_frees_its_slot(
    one_slot_stack: Stack, transactional_db: None, workspace: Workspace, progress: bool
) -> None:
    inbox = inbox_services.inbox_create(workspace=workspace, local_part="leaver")
    key = key_services.api_key_create(
        workspace=workspace, name="k", scopes=["read"], by=Actor.system("tests")
    ).plain
    url = one_slot_stack.base_url + "/mcp"
    arguments = {"inbox": inbox.pk, "timeout": 1}

    async def run() -> tuple:
        # The leaver speaks plain JSON-RPC over one HTTP connection it closes itself, so the
        # test knows the connection is gone (an SDK client may keep it in a pool).
        params: dict = {"name": "wait_for_email", "arguments": {"inbox": inbox.pk, "timeout": 120}}
        if progress:
            params["_meta"] = {"progressToken": "leaver"}
        call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
        headers = {
            "Authorization": f"Bearer {key}",
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
        }

        async def leaver() -> None:
            async with (
                httpx.AsyncClient(timeout=None) as raw,
                raw.stream("POST", url, json=call, headers=headers) as response,
            ):
                expected = "text/event-stream" if progress else "application/json"
                assert response.headers["content-type"].startswith(expected)
                async for _ in response.aiter_bytes():
                    pass

        async with session(url, key) as other:
            leaving: asyncio.Task | None = None
            for _ in range(30):  # until the leaver's wait holds the one slot
                if leaving is None or leaving.done():
                    leaving = asyncio.create_task(leaver())
                    await asyncio.sleep(0.5)
                busy = await other.call_tool("wait_for_email", arguments)
                if busy.is_error:
                    break
                await asyncio.sleep(0.3)  # the slot is free: the leaver's next try takes it
            assert leaving is not None

            leaving.cancel()  # closes the leaver's connection
            await asyncio.wait([leaving], timeout=10)
            for _ in range(300):  # the server notices the disconnect and ends the wait
                after = await other.call_tool("wait_for_email", arguments)
                if not after.is_error:
                    break
                await asyncio.sleep(0.1)
            return busy, after

    busy, after = asyncio.run(run())
    assert busy.structured_content["error"]["code"] == "rate_limited"
    assert not after.is_error, after
    assert after.structured_content["found"] is False
