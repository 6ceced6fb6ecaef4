"""Fixtures of the MCP server tests: a live stack and the official MCP client (``mcp``'s
``ClientSession`` over its streamable HTTP client) talking to ``/mcp`` with a bearer key, and
the same client over stdio.

The SDK is imported where a session opens, not at the top: it takes about a second to import, and
every pytest-xdist worker imports every test module while it collects, while ``make test-fast``
runs none of these live tests."""

from __future__ import annotations

import contextlib
import json
import smtplib
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any

import pytest

from tests.live import Stack

if TYPE_CHECKING:
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters


@pytest.fixture(scope="module")
def stack(django_db_setup: None, django_db_blocker) -> Iterator[Stack]:  # type: ignore[no-untyped-def]
    from django.db import connection

    running = Stack(connection.settings_dict["NAME"]).start()
    yield running
    running.stop()


@contextlib.asynccontextmanager
async def session(url: str, key: str | None) -> AsyncIterator[ClientSession]:
    """An initialized MCP client session on ``url`` (``…/mcp``) with ``key`` as bearer."""
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with (
        create_mcp_http_client(headers=headers) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as client,
    ):
        await client.initialize()
        yield client


def stdio_params(**kwargs: Any) -> StdioServerParameters:
    """How the official client starts a stdio server (command, args, env, cwd)."""
    from mcp.client.stdio import StdioServerParameters

    return StdioServerParameters(**kwargs)


@contextlib.asynccontextmanager
async def stdio_session(params: StdioServerParameters) -> AsyncIterator[ClientSession]:
    """A client session (not yet initialized) on the stdio server ``params`` starts."""
    from mcp.client.session import ClientSession
    from mcp.client.stdio import stdio_client

    async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
        yield client


def smtp_send(stack: Stack, raw: bytes, to: str, mail_from: str = "sender@example.org") -> None:
    with smtplib.SMTP("127.0.0.1", stack.smtp_port, timeout=30) as smtp:
        smtp.sendmail(mail_from, [to], raw)


def error_of(result: Any) -> dict:
    """The API envelope's ``error`` of a tool error result (also in its text content)."""
    assert result.is_error, result
    from_text = json.loads(result.content[0].text)
    assert from_text == result.structured_content
    return result.structured_content["error"]
