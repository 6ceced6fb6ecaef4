"""``pigeonhole mcp``: the client package's stdio bridge to a live instance's ``/mcp``, started
and driven by the official MCP client's stdio transport (``stdio_client`` + ``ClientSession``),
the way Claude Desktop starts it: no checkout on the client's side, only the package, a URL and
a key. The mail arrives over real SMTP."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from typing import TYPE_CHECKING, Any

from apikeys import services as key_services
from apikeys.audit import Actor
from apikeys.models import Workspace
from inboxes import services as inbox_services
from tests.client.conftest import client_env, send_mail
from tests.live import ROOT, Stack
from tests.outbox.mcp.conftest import error_of, stdio_params, stdio_session

if TYPE_CHECKING:
    from mcp.client.stdio import StdioServerParameters


def bridge(stack: Stack, key: str, *args: str) -> StdioServerParameters:
    """``pigeonhole mcp`` as a client's configuration names it (``python -m pigeonhole_client``
    is what the console script runs), URL and key from the environment."""
    return stdio_params(
        command=sys.executable,
        args=["-m", "pigeonhole_client", "mcp", *args],
        env=client_env(stack, key),
        cwd=str(ROOT),
    )


def key_of(workspace: Workspace, *scopes: str) -> str:
    return key_services.api_key_create(
        workspace=workspace, name="agent", scopes=scopes, by=Actor.system("tests")
    ).plain


def test_tools_inbox_and_the_code_through_the_bridge(
    stack: Stack, transactional_db: None, workspace: Workspace
) -> None:
    params = bridge(stack, key_of(workspace, "read", "write"))
    progress: list[tuple[float, float | None, str | None]] = []

    async def noted(value: float, total: float | None, note: str | None) -> None:
        progress.append((value, total, note))

    async def run() -> tuple[Any, ...]:
        async with stdio_session(params) as client:
            await client.initialize()
            names = {tool.name for tool in (await client.list_tools()).tools}
            created = await client.call_tool("create_inbox", {"local_part": "bridged"})
            address = created.structured_content["address"]
            quiet = await client.call_tool(
                "wait_for_email", {"inbox": address, "timeout": 6}, progress_callback=noted
            )
            getting = asyncio.create_task(
                client.call_tool("get_verification_code", {"inbox": address, "timeout": 30})
            )
            await asyncio.sleep(0.5)
            body = "Welcome!\n\nYour sign-up code is 630418.\n"
            await asyncio.to_thread(send_mail, stack, address, "Confirm your sign-up", body)
            code = await getting
            waited = await client.call_tool(
                "wait_for_email",
                {"inbox": address, "timeout": 5, "since": "2000-01-01T00:00:00Z"},
            )
            return names, created, quiet, code, waited

    names, created, quiet, code, waited = asyncio.run(run())
    assert {"create_inbox", "wait_for_email", "get_verification_code", "send_email"} <= names
    assert not created.is_error, created
    assert created.structured_content["address"].startswith("bridged@")
    assert quiet.structured_content["found"] is False
    assert progress, "no progress notification came through the bridge"
    assert progress[0][1] == 6 and "bridged@" in (progress[0][2] or "")
    assert not code.is_error, code
    assert code.structured_content["found"] is True
    assert code.structured_content["code"] == "630418"
    assert waited.structured_content["email"]["code"] == "630418"


def test_a_read_key_sending_is_forbidden_and_approval_is_pending(
    stack: Stack, transactional_db: None, workspace: Workspace
) -> None:
    inbox_services.inbox_create(workspace=workspace, local_part="booker")
    workspace.require_approval = True
    workspace.save(update_fields=["require_approval"])
    mail = {
        "inbox": "booker@pigeonhole.test",
        "to": ["hotel@example.com"],
        "subject": "Can you confirm?",
        "text": "Please confirm the booking.",
    }

    async def call(key: str) -> Any:
        params = bridge(stack, key)
        async with stdio_session(params) as client:
            await client.initialize()
            return await client.call_tool("send_email", mail)

    refused = asyncio.run(call(key_of(workspace, "read")))
    error = error_of(refused)
    assert (error["kind"], error["code"], error["status"]) == (
        "forbidden",
        "insufficient_scope",
        403,
    )
    pending = asyncio.run(call(key_of(workspace, "read", "send")))
    assert not pending.is_error, pending
    assert pending.structured_content["status"] == "pending"
    assert pending.structured_content["approval_required"] is True
    assert pending.structured_content["approval_url"].startswith(stack.base_url + "/approvals/")


def test_a_wrong_key_ends_the_command_with_the_servers_reason(stack: Stack) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "pigeonhole_client", "mcp", "--key", "pgh_not_a_key"],
        cwd=ROOT,
        env=client_env(stack, "pgh_unused"),
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 2 and result.stdout == ""
    assert "/mcp" in result.stderr and "HTTP 401" in result.stderr
    assert "unauthorized" in result.stderr


def test_without_the_extra_the_command_says_how_to_install_it(stack: Stack) -> None:
    # ``mcp`` made unimportable, as in an environment where only pigeonhole-client is installed
    hide = (
        "import sys; sys.modules['mcp'] = None; "
        "from pigeonhole_client.cli import main; sys.exit(main())"
    )
    result = subprocess.run(
        [sys.executable, "-c", hide, "mcp"],
        cwd=ROOT,
        env=client_env(stack, "pgh_unused"),
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 2 and result.stdout == ""
    assert "pip install 'pigeonhole-client[mcp]'" in result.stderr
