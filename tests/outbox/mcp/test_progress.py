"""Whether a call asked for progress (``outbox.mcp.tools.asked_for_progress``), read through the
official SDK's request context: a parked wait arms its progress timer only when it did, so the
hundreds of waits of clients that never ask do not each wake every few seconds for nothing.

The SDK is imported in the test, not at the top: it takes about a second to import, and every
pytest-xdist worker imports every test module while it collects (``make test-fast`` runs this one
test of the MCP server's, so only the worker that runs it pays). No ``from __future__ import
annotations`` here: the SDK reads the probe tool's ``ctx: Context`` annotation as an object."""

import asyncio


def test_a_call_asks_for_progress_only_with_a_progress_token() -> None:
    from mcp.client.client import Client
    from mcp.server.mcpserver import Context, MCPServer

    from outbox.mcp.tools import asked_for_progress

    server = MCPServer("probe")

    async def probe(ctx: Context) -> bool:
        """Whether this call asked for progress."""
        return asked_for_progress(ctx)

    server.add_tool(probe)

    async def on_progress(value: float, total: float | None, note: str | None) -> None:
        pass

    async def run() -> tuple[bool, bool]:
        # "legacy": the handshake versions' JSON-RPC over memory streams, as clients speak it over
        # HTTP and stdio (the in-process modern path calls a progress callback directly).
        async with Client(server, mode="legacy") as client:
            without = await client.call_tool("probe", {})
            with_token = await client.call_tool("probe", {}, progress_callback=on_progress)
        return without.structured_content["result"], with_token.structured_content["result"]

    assert asyncio.run(run()) == (False, True)
