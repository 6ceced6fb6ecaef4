"""The web process: daphne's command line (``python -m config.web`` takes daphne's arguments),
with the access log never showing a key.

Browsers' ``EventSource`` cannot send headers, so the stream accepts the API key as
``?access_token=`` (docs/api.md). daphne's access log writes every request's full URI, and
a stream that ends at once (a wrong inbox id, a revoked key) or any stream that finishes would put
the plain key into the process's output. The access log is kept; the value of every
``access_token`` parameter in it is replaced by ``[redacted]``. Twisted's HTTP factory writes a
log line of its own for every request (the full URI, in Combined Log Format): daphne sends
Twisted's log nowhere at its default verbosity, so that line was formatted for nothing on every
request, and at ``-v 2`` it went to the output with the key in it. The factory writes none.

It is also where Twisted's HTTP parser (under daphne) answers requests it will not read: a request
line longer than its 16 KiB line limit was dropped without a word (the client saw the connection
close), and a header section over 16 KiB, more than 500 header fields or malformed HTTP got a bare
``400`` with no body. Each now gets the API's envelope with a status that says why (414
``uri_too_long``, 431 ``headers_too_large``, 400 ``bad_request``), and the connection is closed
the way HTTP servers close on a client that is still sending: our side is shut after the answer,
and what the client still sends is read and dropped for a few seconds, so that its kernel does
not throw the answer away when it learns that we closed (a reset). daphne's own refusals (a
header value with control characters, a path that is not ASCII) were an HTML page: the envelope
too, and so is a body that claims to be a form but is not one (Twisted no longer parses it).

This module is the one place that uses daphne's and Twisted's internals (house style): the
versions it was written against are pinned in ``pyproject.toml`` and
``tests/test_http_wire.py`` checks the internals it relies on, failing by name when they move.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from http import HTTPStatus
from typing import Any
from urllib.parse import unquote_plus

from daphne.cli import CommandLineInterface
from daphne.http_protocol import HTTPFactory, WebRequest
from daphne.server import Server
from twisted.web import http

from config.api.errors import ApiError, BadRequest, HeadersTooLarge, UriTooLong, envelope

logger = logging.getLogger(__name__)

SECRET_PARAMETERS = frozenset({"access_token"})
REDACTED = "[redacted]"
# Seconds a refused connection is drained after the answer: time for a client to finish
# sending a request that is large but not endless (1 MiB on a slow link), bounded so that a
# client that never stops costs no more than this.
LINGER_SECONDS = 5.0


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


class Request(WebRequest):
    """daphne's request, whose own error answers are the envelope too: a header value or path
    it refuses (400), and under /api/ an application that failed or timed out (5xx). Elsewhere
    those stay daphne's HTML page, as Django's handler500 keeps its page outside /api/.

    Its body is left to the application: Twisted's ``Request`` parses every POST whose
    Content-Type is a form (multipart or urlencoded) into ``request.args``, which daphne never
    reads; a body that was not valid multipart got a bare 400 with no body and no headers (not
    our envelope), and a large upload was parsed into memory for nothing. Unparsed, the raw body
    reaches Django, where the API answers 415 ``unsupported_media_type`` in the envelope."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, parsePOSTFormSubmission=False, **kwargs)

    def basic_error(self, status: int, status_text: bytes, body: str) -> None:
        if status >= 500 and not self.path.startswith(b"/api/"):
            super().basic_error(status, status_text, body)
            return
        error = BadRequest(f"{body}.") if status < 500 else ApiError()
        content = json.dumps(envelope(error.code, error.message)).encode()
        headers = [
            (b"Content-Type", b"application/json"),
            (b"Content-Length", str(len(content)).encode()),
            (b"X-Content-Type-Options", b"nosniff"),
        ]
        self.handle_reply({"type": "http.response.start", "status": status, "headers": headers})
        self.handle_reply({"type": "http.response.body", "body": content})


class Channel(http.HTTPChannel):
    """Twisted's HTTP/1.1 connection, answering the requests it refuses in the envelope."""

    _refused = False

    @property
    def requestFactory(self) -> type[Request]:
        return Request

    @requestFactory.setter
    def requestFactory(self, factory: type) -> None:
        """daphne's factory sets its ``WebRequest`` on every connection: ours extends it."""
        if not issubclass(Request, factory):
            raise TypeError(f"config.web.Request does not extend {factory!r}")

    def _refuse(self, error: ApiError) -> None:
        """Answers ``error`` and closes: our side at once, the client's when it stops sending."""
        if self._refused:
            return
        self._refused = True
        self.clearLineBuffer()
        body = json.dumps(envelope(error.code, error.message)).encode()
        reason = HTTPStatus(error.status).phrase.encode()
        self.transport.write(
            b"HTTP/1.1 %d %s\r\n" % (error.status, reason)
            + b"Content-Type: application/json\r\n"
            + b"Content-Length: %d\r\n" % len(body)
            + b"X-Content-Type-Options: nosniff\r\n"
            + b"Connection: close\r\n\r\n"
            + body
        )
        peer = self.transport.getPeer()
        logger.info("Refused a request from %s: %s", getattr(peer, "host", peer), error.message)
        close_writing = getattr(self.transport, "loseWriteConnection", None)
        if close_writing is None:  # a transport that cannot half-close (TLS)
            self.loseConnection()
            return
        close_writing()  # after the answer is flushed
        self.setTimeout(LINGER_SECONDS)  # then Twisted's idle timeout closes the rest

    def dataReceived(self, data: bytes) -> None:
        if self._refused:
            return  # the rest of a refused request: dropped
        super().dataReceived(data)

    def lineReceived(self, line: bytes) -> None:
        if not self._refused:
            super().lineReceived(line)

    def rawDataReceived(self, data: bytes) -> None:
        if not self._refused:
            super().rawDataReceived(data)

    def lineLengthExceeded(self, line: bytes) -> None:
        """One line over ``MAX_LENGTH``: Twisted dropped the connection without an answer."""
        if hasattr(self, "_path"):  # the request line was read: this is a header line
            self._refuse(HeadersTooLarge(f"A header line is longer than {self.MAX_LENGTH} bytes."))
        else:
            self._refuse(UriTooLong(f"The request line is longer than {self.MAX_LENGTH} bytes."))

    def _respondToBadRequestAndDisconnect(self) -> None:
        """Twisted's one answer to everything it refuses (a bare 400), told apart here by the
        counters it checks before calling it."""
        if self._receivedHeaderCount > self.maxHeaders:
            error: ApiError = HeadersTooLarge(f"More than {self.maxHeaders} header fields.")
        elif self._receivedHeaderSize > self.totalHeadersSize:
            limit = self.totalHeadersSize
            if len(getattr(self, "_path", b"")) * 2 > limit:  # the URI is most of it
                error = UriTooLong(f"The request line and headers exceed {limit} bytes.")
            else:
                error = HeadersTooLarge(f"The request line and headers exceed {limit} bytes.")
        else:
            error = BadRequest()
        self._refuse(error)


def channel_protocol() -> Any:
    """What Twisted's ``HTTPFactory.protocol`` builds (the wrapper that would switch to HTTP/2
    after TLS negotiation), around our :class:`Channel`."""
    return http._GenericHTTPChannelProtocol(Channel())


def _no_log(request: Any) -> None:
    """Twisted's per-request log line: not written (daphne writes the access log)."""


class RedactingServer(Server):
    """daphne's server with the redacting access log, :class:`Channel` and :class:`Request`."""

    def __init__(self, *args: Any, action_logger: Any = None, **kwargs: Any) -> None:
        access = redacting(action_logger) if action_logger is not None else None
        super().__init__(*args, action_logger=access, **kwargs)

    # daphne's ``run()`` makes its HTTP factory and starts listening in one method; the
    # attribute it stores the factory in is the one place to reach it in between.
    @property
    def http_factory(self) -> HTTPFactory:
        return self._http_factory

    @http_factory.setter
    def http_factory(self, factory: HTTPFactory) -> None:
        factory.protocol = channel_protocol
        factory.log = _no_log  # daphne's access log (redacted) is the one; see the module doc
        self._http_factory = factory


class WebCommandLine(CommandLineInterface):
    server_class = RedactingServer


if __name__ == "__main__":
    from config.startup import starting

    starting()  # the collector runs rarely until config.asgi is loaded (config/startup.py)
    WebCommandLine.entrypoint()
