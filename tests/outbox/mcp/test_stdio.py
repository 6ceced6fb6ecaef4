"""``manage.py mcp --key …``: the MCP server over stdio, started and driven by the official MCP
client's stdio transport, against the test database and a live SMTP receiver."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from datetime import timedelta
from typing import TYPE_CHECKING

from django.db import connection
from django.utils import timezone

from apikeys import services as key_services
from apikeys.audit import Actor
from apikeys.models import Workspace
from inboxes import services as inbox_services
from tests.live import ROOT, Stack, child_env
from tests.mail.messages import message
from tests.outbox.mcp.conftest import error_of, smtp_send, stdio_params, stdio_session

if TYPE_CHECKING:
    from mcp.client.stdio import StdioServerParameters


def server_params(key: str) -> StdioServerParameters:
    env = child_env(connection.settings_dict["NAME"])
    return stdio_params(
        command=sys.executable,
        args=["manage.py", "mcp", "--key", key, "--base-url", "http://pigeonhole.example"],
        env=env,
        cwd=str(ROOT),
    )


def test_stdio_tools_and_the_code_in_one_call(
    stack: Stack, transactional_db: None, workspace: Workspace
) -> None:
    inbox = inbox_services.inbox_create(workspace=workspace, local_part="stdio")
    key = key_services.api_key_create(
        workspace=workspace, name="agent", scopes=["read"], by=Actor.system("tests")
    ).plain
    params = server_params(key)

    async def run() -> tuple:
        async with stdio_session(params) as client:
            await client.initialize()
            names = {tool.name for tool in (await client.list_tools()).tools}
            getting = asyncio.create_task(
                client.call_tool("get_verification_code", {"inbox": inbox.address, "timeout": 30})
            )
            await asyncio.sleep(0.5)
            raw = message(to=inbox.address, subject="Your code", text="Code: 905512")
            await asyncio.to_thread(smtp_send, stack, raw, inbox.address)
            code = await getting
            refused = await client.call_tool(
                "create_inbox", {"local_part": "not-allowed"}
            )  # a read key
            return names, code, refused

    names, code, refused = asyncio.run(run())
    assert {"create_inbox", "get_verification_code", "send_email"} <= names
    assert not code.is_error, code
    assert code.structured_content["code"] == "905512"
    assert error_of(refused)["code"] == "insufficient_scope"


def test_stdio_refuses_a_bad_key_at_start(transactional_db: None, workspace: Workspace) -> None:
    created = key_services.api_key_create(
        workspace=workspace, name="old", scopes=["read"], by=Actor.system("tests")
    )
    created.key.expires_at = timezone.now() - timedelta(days=1)
    created.key.save()
    params = server_params(created.plain)
    result = subprocess.run(
        [params.command, *params.args],
        cwd=params.cwd,
        env=params.env,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode != 0
    assert "unauthorized" in result.stderr and result.stdout == ""


def test_the_keys_rate_limit_is_a_rate_limited_tool_error_with_the_retry_time(
    transactional_db: None, workspace: Workspace
) -> None:
    key = key_services.api_key_create(
        workspace=workspace, name="busy", scopes=["read"], by=Actor.system("tests")
    ).plain
    params = server_params(key)
    params.env["RATE_LIMIT_PER_MINUTE"] = "3"  # the start-up check is the first

    async def run() -> list:
        async with stdio_session(params) as client:
            await client.initialize()
            # six: even if a minute window ends in between, one window sees more than three
            return [await client.call_tool("list_inboxes", {}) for _ in range(6)]

    calls = asyncio.run(run())
    assert not calls[0].is_error
    refused = [call for call in calls if call.is_error]
    assert refused, "the rate limit never answered"
    error = error_of(refused[0])
    assert error["code"] == "rate_limited" and error["kind"] == "rate_limited"
    assert error["status"] == 429 and 1 <= error["retry_after_seconds"] <= 60
    assert f"{error['retry_after_seconds']} s" in error["message"]  # said to the model too
