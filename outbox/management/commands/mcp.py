"""``manage.py mcp --key pgh_…``: the MCP server over stdio, for clients that only speak stdio
(the client starts this command and talks JSON-RPC on its stdin and stdout).

The same server object and tools as ``/mcp`` (``outbox.mcp.server``); the key is checked at
start (a clear error on stderr instead of a silent client) and then on every tool call through
``outbox.mcp.auth.authenticate``, so its scopes, workspace, approval requirement and rate limit
apply as on the REST API, and a key revoked meanwhile stops working here too. It lives in the
outbox app with the rest of the MCP server (``outbox.mcp``).
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from config.api.errors import ApiError
from outbox.mcp.auth import STDIO_SCOPE, authenticate, bearer_scope


class Command(BaseCommand):
    help = "Serve the MCP server over stdio with an API key (docs/agents.md)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--key",
            default=os.environ.get("PIGEONHOLE_API_KEY", ""),
            help="The API key (pgh_…); default: $PIGEONHOLE_API_KEY.",
        )
        parser.add_argument(
            "--base-url",
            default=os.environ.get("PIGEONHOLE_URL", "http://localhost:8000"),
            help="This instance's URL, for links in results (approval pages, attachments); "
            "default: $PIGEONHOLE_URL, else http://localhost:8000.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        from outbox.mcp.server import server

        if not options["key"]:
            raise CommandError("Give the API key: --key pgh_… (or PIGEONHOLE_API_KEY).")
        scope = bearer_scope(options["key"]) | {"base_url": options["base_url"].rstrip("/")}
        try:
            asyncio.run(authenticate(scope))
        except ApiError as error:
            raise CommandError(f"{error.code}: {error.message}") from None
        STDIO_SCOPE.set(scope)  # the tools' credential (copied into the server's tasks)
        server.run("stdio")
