"""``pigeonhole mcp``: a local stdio MCP server that is a bridge to a Pigeonhole instance's
streamable-HTTP ``/mcp``, for MCP clients that only start commands (Claude Desktop and others).

Both ends are the official ``mcp`` SDK's transports: ``mcp.server.stdio.stdio_server()`` faces
the local client, ``mcp.client.streamable_http.streamable_http_client()`` the instance (with the
key as ``Authorization: Bearer``). The bridge moves the SDK's ``SessionMessage`` objects between
them unchanged, both ways; it never parses or builds JSON-RPC itself, so every tool, its schemas,
structured results, tool errors and the progress notifications of a parked
``wait_for_email`` arrive exactly as the server sent them. The one thing it adds is what an HTTP
hop needs and a stdio hop has no place for: the ``MCP-Protocol-Version`` header (the version the
``initialize`` exchange agreed, or the one a request's own ``_meta`` names) and, for requests
that carry their envelope in ``_meta``, the ``Mcp-Method`` and ``Mcp-Name`` headers the
transport checks against the body.

Before it serves, the bridge checks the URL and the key with one ``initialize`` of its own (the
SDK's ``ClientSession``), so a wrong key or URL ends the command at once with the server's
reason on stderr and a non-zero exit status, instead of a client that fails on its first call.

``mcp`` is an optional extra (``pip install 'pigeonhole-client[mcp]'``, Python 3.10+); without
it the command says how to install it and exits with status 2.
"""

from __future__ import annotations

import json
import logging
import sys
from dataclasses import dataclass, field
from typing import Any

from ._core import Config
from .errors import PigeonholeError

INSTALL_HINT = (
    "the 'mcp' command needs the MCP SDK: pip install 'pigeonhole-client[mcp]' "
    "(Python 3.10 or newer)"
)
CONNECT_TIMEOUT = 30.0  # seconds to connect, send a request or wait for a pool slot
READ_TIMEOUT = 300.0  # a wait parks up to 120 s and sends progress meanwhile; generous

logger = logging.getLogger("pigeonhole_client.mcp")


class MissingExtra(PigeonholeError):
    """The ``mcp`` extra is not installed."""


class BridgeRefused(PigeonholeError):
    """The instance refused the bridge's first request (bad key or URL, not an MCP server)."""


def mcp_url(config: Config) -> str:
    """``/mcp`` of the instance (``--url`` may name the instance root or ``/mcp`` itself)."""
    base = config.base_url
    return base if base.endswith("/mcp") else base + "/mcp"


@dataclass
class _Refusal:
    """The last HTTP error ``/mcp`` answered with, in words (the API's error envelope): the
    transport turns it into an anonymous JSON-RPC error, this keeps the server's reason."""

    status: int = 0
    text: str = ""
    serving: bool = False  # once serving, each refusal is also logged to stderr

    def describe(self) -> str:
        return f"HTTP {self.status}: {self.text}" if self.status else ""

    async def hook(self, response: Any) -> None:
        """httpx2 response hook on every request of the bridge."""
        if response.status_code < 400:
            return
        await response.aread()
        text = response.text.strip()
        try:
            error = json.loads(text)["error"]
            text = f"{error['code']}: {error['message']}"
        except (ValueError, KeyError, TypeError):
            text = text[:300] or response.reason_phrase
        self.status, self.text = response.status_code, text
        if self.serving:
            logger.warning("%s answered %s", response.request.url, self.describe())


@dataclass
class _Stamper:
    """The HTTP headers each client-to-server message needs on the hop to ``/mcp``.

    Handshake protocol versions: the version agreed by ``initialize`` (read from the server's
    answer as it passes) on every later message. Versions that put the protocol envelope in each
    request's ``_meta``: that version, the method, and the name of a tool, prompt or resource,
    which the server checks against the body."""

    version: str | None = None
    initialize_ids: set[Any] = field(default_factory=set)

    def to_server(self, message: Any) -> Any:
        from mcp.shared.inbound import (
            MCP_METHOD_HEADER,
            MCP_NAME_HEADER,
            MCP_PROTOCOL_VERSION_HEADER,
            NAME_BEARING_METHODS,
            encode_header_value,
        )
        from mcp.shared.message import ClientMessageMetadata, SessionMessage
        from mcp_types import PROTOCOL_VERSION_META_KEY

        inner = message.message
        method = getattr(inner, "method", None)
        params = getattr(inner, "params", None) or {}
        meta = params.get("_meta") if isinstance(params, dict) else None
        envelope = meta.get(PROTOCOL_VERSION_META_KEY) if isinstance(meta, dict) else None
        headers: dict[str, str] = {}
        if isinstance(envelope, str):
            headers[MCP_PROTOCOL_VERSION_HEADER] = envelope
            headers[MCP_METHOD_HEADER] = str(method)
            name = params.get(NAME_BEARING_METHODS.get(str(method), ""))
            if isinstance(name, str):
                headers[MCP_NAME_HEADER] = encode_header_value(name)
        elif method == "initialize":
            self.initialize_ids.add(inner.id)
        elif self.version:
            headers[MCP_PROTOCOL_VERSION_HEADER] = self.version
        if not headers:
            return message
        return SessionMessage(inner, metadata=ClientMessageMetadata(headers=headers))

    def from_server(self, message: Any) -> None:
        inner = message.message
        request_id = getattr(inner, "id", None)
        if request_id is not None and request_id in self.initialize_ids:
            self.initialize_ids.discard(request_id)
            result = getattr(inner, "result", None)
            if isinstance(result, dict) and isinstance(result.get("protocolVersion"), str):
                self.version = result["protocolVersion"]


async def _check(http: Any, url: str, refusal: _Refusal) -> None:
    """One ``initialize`` through the SDK's client: the key and the URL work."""
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared.exceptions import MCPError

    try:
        async with (
            streamable_http_client(url, http_client=http) as (read, write),
            ClientSession(read, write) as probe,
        ):
            await probe.initialize()
    except MCPError as exc:
        reason = refusal.describe() or str(exc)
        raise BridgeRefused(f"{url} refused the key or is not an MCP server ({reason})") from exc
    except Exception as exc:  # connect errors arrive wrapped in the SDK's task groups
        reason = refusal.describe() or _innermost(exc)
        raise BridgeRefused(f"cannot use {url}: {reason}") from exc


def _innermost(exc: BaseException) -> str:
    """The first leaf of an exception group (anyio's task groups wrap what they raise)."""
    while getattr(exc, "exceptions", None):
        exc = exc.exceptions[0]  # type: ignore[attr-defined]
    return f"{type(exc).__name__}: {exc}"


async def _pipe(source: Any, sink: Any, on_message: Any) -> None:
    """Every message from ``source`` into ``sink`` (``on_message`` may swap it for a copy with
    transport metadata); a transport's parse error is logged, not forwarded."""
    async with sink:
        async for message in source:
            if isinstance(message, Exception):
                logger.warning("dropped an unreadable message: %s", message)
                continue
            await sink.send(on_message(message) or message)


async def serve(config: Config) -> None:
    """Checks the key, then serves stdio until the local client closes it."""
    import anyio
    import httpx2
    from mcp.client.streamable_http import streamable_http_client
    from mcp.server.stdio import stdio_server

    url = mcp_url(config)
    refusal = _Refusal()
    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {config.api_key}"},
        timeout=httpx2.Timeout(CONNECT_TIMEOUT, read=READ_TIMEOUT),
        event_hooks={"response": [refusal.hook]},
    )
    async with http:
        await _check(http, url, refusal)
        refusal.serving = True
        stamper = _Stamper()
        async with (
            stdio_server() as (local_read, local_write),
            streamable_http_client(url, http_client=http) as (remote_read, remote_write),
            anyio.create_task_group() as group,
        ):

            async def client_to_server() -> None:
                await _pipe(local_read, remote_write, stamper.to_server)
                group.cancel_scope.cancel()  # the local client left: so does the bridge

            group.start_soon(client_to_server)
            group.start_soon(_pipe, remote_read, local_write, stamper.from_server)


def main(config: Config) -> int:
    """``pigeonhole mcp``: 0 when the local client closed stdin; raises
    :class:`MissingExtra` or :class:`BridgeRefused` otherwise."""
    try:
        import anyio
        import mcp.server.stdio  # noqa: F401  (the extra is there)
    except ImportError as exc:
        raise MissingExtra(INSTALL_HINT, code="missing_extra") from exc
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    anyio.run(serve, config)
    return 0
