"""The "Connect an agent" page in a real browser on the live stack: it shows this instance's
``/mcp`` URL, an owner creates an agent key with one click (approval on by default), the page
shows the key once inside copyable client configurations, and the key works on ``/mcp`` at once
(the official MCP client). A member sees the page without the button and cannot post to it."""

from __future__ import annotations

import asyncio
import json
import threading

from apikeys.models import ApiKey
from tests.dashboard.conftest import Team, login
from tests.outbox.mcp.conftest import session


def _tools_with(url: str, key: str) -> set[str]:
    """The tool names the MCP server lists for ``key`` (from a thread: Playwright owns this
    thread's event loop)."""
    found: set[str] = set()

    async def run() -> None:
        async with session(url, key) as client:
            found.update(tool.name for tool in (await client.list_tools()).tools)

    thread = threading.Thread(target=lambda: asyncio.run(run()))
    thread.start()
    thread.join(60)
    return found


def test_an_owner_connects_an_agent(page, stack, team: Team) -> None:  # type: ignore[no-untyped-def]
    login(page, "owner@acme.test")
    page.get_by_role("link", name="Connect an agent").click()
    mcp_url = f"{stack.base_url}/mcp"
    assert page.locator("[data-mcp-url]").inner_text() == mcp_url
    assert page.get_by_label("A person approves every message the agent sends").is_checked()
    page.get_by_role("button", name="Create agent key").click()
    plain = page.locator("[data-plain-key]").inner_text()
    assert plain.startswith("pgh_")
    claude = page.locator('[data-client-config="Claude Code"]').inner_text()
    assert claude == (
        f"claude mcp add --transport http pigeonhole {mcp_url} "
        f"--header 'Authorization: Bearer {plain}'"
    )
    for client in ("Claude Desktop", "Cursor", "VS Code"):
        assert plain in page.locator(f'[data-client-config="{client}"]').inner_text()
    desktop = json.loads(page.locator('[data-client-config="Claude Desktop"]').inner_text())
    bridge = desktop["mcpServers"]["pigeonhole"]  # pigeonhole mcp, the client's stdio bridge
    assert (bridge["command"], bridge["args"]) == ("pigeonhole", ["mcp"])
    assert bridge["env"] == {"PIGEONHOLE_URL": stack.base_url, "PIGEONHOLE_API_KEY": plain}

    key = ApiKey.objects.get(workspace=team.workspace, name="mcp-agent")
    assert key.kind == "agent" and key.require_approval is True
    assert key.scopes == ["read", "write"]
    assert "create_inbox" in _tools_with(mcp_url, plain)

    page.reload()  # shown once
    assert page.locator("[data-plain-key]").count() == 0
    assert "pgh_YOUR_KEY" in page.locator('[data-client-config="Cursor"]').inner_text()


def test_a_member_sees_the_page_but_creates_no_key(page, stack, team: Team) -> None:  # type: ignore[no-untyped-def]
    login(page, "member@acme.test")
    page.goto("/connect/")
    assert page.locator("[data-mcp-url]").inner_text() == f"{stack.base_url}/mcp"
    assert page.get_by_role("button", name="Create agent key").count() == 0
    token = page.evaluate("document.cookie.match(/csrftoken=([^;]+)/)[1]")
    response = page.request.post(
        "/connect/key/",
        form={"csrfmiddlewaretoken": token, "name": "sneaky", "scopes": "read"},
    )
    assert response.status == 403
    assert not ApiKey.objects.filter(workspace=team.workspace, name="sneaky").exists()
