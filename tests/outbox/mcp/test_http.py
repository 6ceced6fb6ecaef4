"""The MCP server over streamable HTTP at ``/mcp``, driven by the official MCP client against a
live web process and SMTP receiver (PostgreSQL, Redis): tools and schemas, the sign-up loop, and
the rules the REST API applies to the same key (scopes, workspace, approval)."""

from __future__ import annotations

import asyncio

import httpx

from apikeys import services as key_services
from apikeys.models import Workspace
from inboxes import services as inbox_services
from tests.live import Stack
from tests.mail.messages import message
from tests.outbox.mcp.conftest import session, smtp_send

TOOLS = {
    "create_inbox",
    "list_inboxes",
    "delete_inbox",
    "wait_for_email",
    "get_verification_code",
    "search_emails",
    "read_email",
    "mark_email",
    "send_email",
    "get_outbox_item",
    "list_labels",
    "test_labels",
}


def mcp_url(stack: Stack) -> str:
    return stack.base_url + "/mcp"


def key_of(workspace: Workspace, *scopes: str, **kwargs: object) -> str:
    return key_services.api_key_create(
        workspace=workspace, name="agent", scopes=list(scopes), **kwargs
    ).plain


def test_tools_are_listed_with_schemas_and_annotations(
    stack: Stack, transactional_db: None, workspace: Workspace
) -> None:
    key = key_of(workspace, "read")

    async def run() -> dict:
        async with session(mcp_url(stack), key) as client:
            return {tool.name: tool for tool in (await client.list_tools()).tools}

    tools = asyncio.run(run())
    assert set(tools) == TOOLS
    for tool in tools.values():
        assert tool.description and tool.input_schema["type"] == "object"
        assert tool.output_schema is not None and tool.output_schema["type"] == "object"
        assert tool.annotations is not None and tool.annotations.read_only_hint is not None
    wait = tools["wait_for_email"]
    assert {"inbox", "from", "subject", "since", "timeout"} <= set(wait.input_schema["properties"])
    assert wait.input_schema["properties"]["timeout"]["maximum"] == 120
    assert wait.annotations.read_only_hint is True
    assert tools["delete_inbox"].annotations.destructive_hint is True
    assert tools["send_email"].annotations.read_only_hint is False
    email = tools["read_email"].output_schema
    assert "untrusted_content" in email["properties"]


def test_missing_or_bad_key_is_401_in_the_envelope(stack: Stack, transactional_db: None) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    headers = {"Accept": "application/json, text/event-stream"}
    missing = httpx.post(mcp_url(stack), json=body, headers=headers)
    assert missing.status_code == 401
    assert missing.json()["error"]["code"] == "unauthorized"
    assert missing.headers["www-authenticate"].startswith("Bearer")
    bad = httpx.post(
        mcp_url(stack), json=body, headers={**headers, "Authorization": "Bearer pgh_nope"}
    )
    assert bad.status_code == 401 and bad.json()["error"]["code"] == "unauthorized"


def test_sign_up_loop_create_inbox_then_wait_for_the_code(
    stack: Stack, transactional_db: None, workspace: Workspace
) -> None:
    key = key_of(workspace, "write")

    async def run() -> tuple:
        async with session(mcp_url(stack), key) as client:
            created = await client.call_tool("create_inbox", {"agent_name": "signup-bot"})
            assert not created.is_error, created
            address = created.structured_content["address"]
            inbox_id = created.structured_content["id"]
            waiting = asyncio.create_task(
                client.call_tool("wait_for_email", {"inbox": inbox_id, "timeout": 30})
            )
            await asyncio.sleep(0.5)
            raw = message(to=address, subject="Welcome", text="Your code is 482913.")
            await asyncio.to_thread(smtp_send, stack, raw, address)
            waited = await waiting
            return created.structured_content, waited

    inbox, waited = asyncio.run(run())
    assert not waited.is_error, "\n".join(stack.web.logs)[-4000:]
    result = waited.structured_content
    assert result["found"] is True
    assert result["email"]["code"] == "482913"
    assert result["email"]["inbox_id"] == inbox["id"]
    from inboxes.models import Inbox

    assert Inbox.objects.get(pk=inbox["id"]).source == "agent"


def test_get_verification_code_in_one_call(
    stack: Stack, transactional_db: None, workspace: Workspace
) -> None:
    inbox = inbox_services.inbox_create(workspace=workspace, local_part="signup")
    key = key_of(workspace, "read")

    async def run() -> dict:
        async with session(mcp_url(stack), key) as client:
            getting = asyncio.create_task(
                client.call_tool("get_verification_code", {"inbox": inbox.address, "timeout": 30})
            )
            await asyncio.sleep(0.5)
            raw = message(to=inbox.address, subject="Verify", text="Use 771204 to verify.")
            await asyncio.to_thread(smtp_send, stack, raw, inbox.address)
            result = await getting
            assert not result.is_error, result
            return result.structured_content

    result = asyncio.run(run())
    assert result["found"] is True and result["code"] == "771204" and result["email_id"]
