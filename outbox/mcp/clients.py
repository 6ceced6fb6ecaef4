"""Configuration snippets for the common MCP clients, for an instance's ``/mcp`` URL and a key:
the dashboard's "Connect an agent" page shows them, docs/agents.md shows the same shapes."""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass


@dataclass(frozen=True)
class ClientConfig:
    client: str
    where: str  # where the snippet goes
    text: str


def client_configs(url: str, key: str) -> list[ClientConfig]:
    """Claude Code, Claude Desktop, Cursor and VS Code, each connected to ``url`` with ``key``."""
    bearer = f"Bearer {key}"
    claude_code = " ".join(
        [
            "claude mcp add --transport http pigeonhole",
            shlex.quote(url),
            "--header",
            shlex.quote(f"Authorization: {bearer}"),
        ]
    )
    # Claude Desktop starts commands only: the Python client's stdio bridge (pigeonhole mcp)
    desktop = {
        "mcpServers": {
            "pigeonhole": {
                "command": "pigeonhole",
                "args": ["mcp"],
                "env": {"PIGEONHOLE_URL": url.removesuffix("/mcp"), "PIGEONHOLE_API_KEY": key},
            }
        }
    }
    cursor = {"mcpServers": {"pigeonhole": {"url": url, "headers": {"Authorization": bearer}}}}
    vscode = {
        "servers": {
            "pigeonhole": {"type": "http", "url": url, "headers": {"Authorization": bearer}}
        }
    }
    return [
        ClientConfig("Claude Code", "Run in a terminal.", claude_code),
        ClientConfig(
            "Claude Desktop",
            "claude_desktop_config.json (Settings → Developer → Edit Config); needs "
            "pip install 'pigeonhole-client[mcp]' (docs/client.md).",
            json.dumps(desktop, indent=2),
        ),
        ClientConfig("Cursor", "~/.cursor/mcp.json", json.dumps(cursor, indent=2)),
        ClientConfig("VS Code", ".vscode/mcp.json", json.dumps(vscode, indent=2)),
    ]
