"""The web process: daphne's command line (``python -m config.web`` takes daphne's arguments),
with the access log never showing a key.

Browsers' ``EventSource`` cannot send headers, so the stream accepts the API key as
``?access_token=`` (docs/api.md). daphne's access log writes every request's full URI, and
a stream that ends at once (a wrong inbox id, a revoked key) or any stream that finishes would put
the plain key into the process's output. The access log is kept; the value of every
``access_token`` parameter in it is replaced by ``[redacted]``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import unquote_plus

from daphne.cli import CommandLineInterface
from daphne.server import Server

SECRET_PARAMETERS = frozenset({"access_token"})
REDACTED = "[redacted]"


def redact(uri: str) -> str:
    """``uri`` with the values of secret query parameters replaced; names are compared decoded
    (``access%5Ftoken`` is what the application reads as ``access_token`` too)."""
    path, question, query = uri.partition("?")
    if not question:
        return uri
    pairs = []
    for pair in query.split("&"):
        name, equals, _ = pair.partition("=")
        if equals and unquote_plus(name) in SECRET_PARAMETERS:
            pair = f"{name}={REDACTED}"
        pairs.append(pair)
    return f"{path}?{'&'.join(pairs)}"


def redacting(action_logger: Callable[[str, str, dict[str, Any]], None]) -> Callable[..., None]:
    """Wraps daphne's access logger so that the paths it writes are redacted."""

    def log(protocol: str, action: str, details: dict[str, Any]) -> None:
        if isinstance(details.get("path"), str):
            details = {**details, "path": redact(details["path"])}
        action_logger(protocol, action, details)

    return log


class RedactingServer(Server):
    def __init__(self, *args: Any, action_logger: Any = None, **kwargs: Any) -> None:
        logger = redacting(action_logger) if action_logger is not None else None
        super().__init__(*args, action_logger=logger, **kwargs)


class WebCommandLine(CommandLineInterface):
    server_class = RedactingServer


if __name__ == "__main__":
    WebCommandLine.entrypoint()
