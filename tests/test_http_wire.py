"""What the web server answers on the wire when it will not read a request (issue 23, item 11).

Twisted's HTTP parser under daphne dropped a request line over its 16 KiB line limit without a
word (the client saw the connection close), and answered a bare ``HTTP/1.1 400 Bad Request`` with
no body to a request line of 16 KiB, a header section over 16 KiB, more than 500 header fields
and malformed HTTP. ``config.web.Channel`` answers each in the API's envelope with a status that
says why, then closes. Tried with raw sockets against the live web process: daphne in the
production configuration, ``manage.py serve`` in the embedded one (``tests.live.Stack``).
"""

from __future__ import annotations

import contextlib
import inspect
import json
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from importlib.metadata import version

import httpx
import pytest

from tests.live import Stack

KIB = 1024
PATH = b"/api/v1/inboxes?filler="


@pytest.fixture(scope="module")
def stack(django_db_setup: None, django_db_blocker) -> Iterator[Stack]:  # type: ignore[no-untyped-def]
    from django.db import connection

    running = Stack(connection.settings_dict["NAME"]).start()
    yield running
    running.stop()


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes
    closed: bool  # the server closed the connection after the answer


def exchange(port: int, request: bytes, timeout: float = 10) -> Answer:
    """Sends ``request`` as it is and reads until the server closes (or ``timeout``)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            sock.sendall(request)  # cut short by a refusal: what was answered is read below
        received, closed = b"", False
        try:
            while chunk := sock.recv(64 * KIB):
                received += chunk
            closed = True
        except TimeoutError:
            pass
    assert received, f"no answer at all to a request of {len(request)} bytes"
    head, _, body = received.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return Answer(int(status_line.split()[1]), headers, body, closed)


def request_line_of(length: int) -> bytes:
    """``GET /api/v1/inboxes?filler=aaa… HTTP/1.1``, exactly ``length`` bytes long."""
    fixed = len(b"GET ") + len(PATH) + len(b" HTTP/1.1")
    return b"GET " + PATH + b"a" * (length - fixed) + b" HTTP/1.1"


def get(line: bytes, headers: bytes = b"") -> bytes:
    return line + b"\r\nHost: 127.0.0.1\r\n" + headers + b"\r\n"


# (what, the request, status, code). Twisted's limits: 16,384 bytes a line, 16,384 bytes for the
# request line and headers together, 500 header fields.
REFUSED: list[tuple[str, bytes, int, str]] = [
    ("request line of 16 KB", get(request_line_of(16 * KIB)), 414, "uri_too_long"),
    ("request line of 17 KB", get(request_line_of(17 * KIB)), 414, "uri_too_long"),
    ("request line of 64 KB", get(request_line_of(64 * KIB)), 414, "uri_too_long"),
    ("request line of 1 MB", get(request_line_of(1024 * KIB)), 414, "uri_too_long"),
    (
        "request line of 1 MB that never ends",
        request_line_of(1024 * KIB),
        414,
        "uri_too_long",
    ),
    (
        "one header line of 17 KB",
        get(request_line_of(100), b"X-Big: " + b"a" * (17 * KIB) + b"\r\n"),
        431,
        "headers_too_large",
    ),
    (
        "header lines of 20 KB together",
        get(request_line_of(100), b"".join(b"X-H%d: %s\r\n" % (i, b"a" * KIB) for i in range(20))),
        431,
        "headers_too_large",
    ),
    (
        "501 header fields",
        get(request_line_of(100), b"".join(b"X-H%d: a\r\n" % i for i in range(501))),
        431,
        "headers_too_large",
    ),
    ("not an HTTP request line", b"HELLO THERE\r\n\r\n", 400, "bad_request"),
    (
        "a header line without a colon",
        get(request_line_of(100), b"no colon here\r\n"),
        400,
        "bad_request",
    ),
    (
        "Content-Length that is not a number",
        b"POST /api/v1/inboxes HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1e3\r\n\r\n{}",
        400,
        "bad_request",
    ),
    # daphne's own refusals, once Twisted has read the request
    (
        "a header value with a control character",
        get(request_line_of(100), b"X-A: a\x0bb\r\nConnection: close\r\n"),
        400,
        "bad_request",
    ),
    (
        "a header name with a parenthesis",
        get(request_line_of(100), b"X(A): b\r\nConnection: close\r\n"),
        400,
        "bad_request",
    ),
    (
        "a path that is not ASCII",
        get(b"GET /api/v1/\xff HTTP/1.1", b"Connection: close\r\n"),
        400,
        "bad_request",
    ),
    (
        "a query string that is not ASCII",
        get(b"GET /api/v1/inboxes?x=\xff HTTP/1.1", b"Connection: close\r\n"),
        400,
        "bad_request",
    ),
    (
        "malformed chunked body",
        b"POST /api/v1/inboxes HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n"
        b"\r\nzz\r\n{}\r\n0\r\n\r\n",
        400,
        "bad_request",
    ),
]


@pytest.mark.parametrize(
    ("what", "request_bytes", "status", "code"), REFUSED, ids=[r[0] for r in REFUSED]
)
def test_refused_requests_are_answered_in_the_envelope(
    stack: Stack, what: str, request_bytes: bytes, status: int, code: str
) -> None:
    answer = exchange(stack.http_port, request_bytes)
    assert (answer.status, answer.headers.get("content-type")) == (status, "application/json"), (
        what,
        answer,
    )
    assert int(answer.headers["content-length"]) == len(answer.body)
    error = json.loads(answer.body)["error"]
    assert error["code"] == code
    assert error["message"]
    assert answer.headers["connection"] == "close"
    assert answer.closed, f"{what}: the server kept the connection open after refusing"


def test_the_server_keeps_serving_after_refusals(stack: Stack) -> None:
    """A request line just under the limit still reaches the application (its own 401), on a
    connection made right after a refused one."""
    exchange(stack.http_port, get(request_line_of(1024 * KIB)))
    answer = exchange(stack.http_port, get(request_line_of(15 * KIB), b"Connection: close\r\n"))
    assert answer.status == 401
    assert json.loads(answer.body)["error"]["code"] == "unauthorized"


def test_httpx_sees_the_414(stack: Stack) -> None:
    """What a client library makes of it: a response, not ``RemoteProtocolError``."""
    response = httpx.get(
        f"{stack.base_url}/api/v1/inboxes", params={"filler": "a" * (17 * KIB)}, timeout=10
    )
    assert response.status_code == 414
    assert response.json()["error"]["code"] == "uri_too_long"


# --- the internals config/web.py relies on --------------------------------------------------


def test_daphne_and_twisted_are_the_versions_config_web_was_written_against() -> None:
    """config/web.py uses their internals: a new version needs the checks below read again
    (and the pins in pyproject.toml moved with them)."""
    assert version("daphne").startswith("4.2."), version("daphne")
    assert version("twisted").startswith("26.10."), version("twisted")


def test_the_internals_config_web_relies_on_are_still_there() -> None:
    from daphne.http_protocol import HTTPFactory, WebRequest
    from daphne.server import Server
    from twisted.protocols.basic import LineReceiver
    from twisted.web import http

    from config.web import Channel, RedactingServer, Request, channel_protocol

    channel = http.HTTPChannel
    # Twisted's refusals, the counters it checks before them, and its limits.
    for name in ("_respondToBadRequestAndDisconnect", "lineLengthExceeded", "clearLineBuffer"):
        assert callable(getattr(channel, name, None)), f"HTTPChannel.{name} is gone"
    for name, value in (("maxHeaders", 500), ("totalHeadersSize", 16384), ("MAX_LENGTH", 16384)):
        assert getattr(channel, name, None) == value, f"HTTPChannel.{name} changed"
    for name in ("_receivedHeaderCount", "_receivedHeaderSize"):
        assert isinstance(getattr(channel, name, None), int), f"HTTPChannel.{name} is gone"
    line_received = inspect.getsource(channel.lineReceived)
    assert "self._path = request" in line_received, "HTTPChannel keeps the URI elsewhere now"
    assert "del self._command, self._path" in inspect.getsource(channel.allContentReceived)
    assert "self.lineLengthExceeded" in inspect.getsource(LineReceiver.dataReceived)
    # daphne builds its factory in run() and listens with it at once.
    run = inspect.getsource(Server.run)
    assert "self.http_factory = HTTPFactory(self)" in run, "daphne makes its factory elsewhere"
    assert "ep.listen(self.http_factory)" in run
    assert issubclass(HTTPFactory, http.HTTPFactory)
    # daphne gives each connection its WebRequest, whose error page we replace.
    assert "protocol.requestFactory = WebRequest" in inspect.getsource(HTTPFactory.buildProtocol)
    # Our Request leaves bodies unparsed through Twisted's own keyword, which daphne passes on.
    parse_forms = inspect.signature(http.Request.__init__).parameters.get("parsePOSTFormSubmission")
    assert parse_forms is not None, "twisted.web.http.Request takes no parsePOSTFormSubmission"
    assert "self._parsePOSTFormSubmission = parsePOSTFormSubmission" in inspect.getsource(
        http.Request.__init__
    )
    assert "and self._parsePOSTFormSubmission" in inspect.getsource(http.Request.requestReceived)
    assert list(inspect.signature(WebRequest.__init__).parameters) == ["self", "args", "kwargs"]
    assert "http.Request.__init__(self, *args, **kwargs)" in inspect.getsource(WebRequest.__init__)
    basic_error = inspect.signature(WebRequest.basic_error).parameters
    assert list(basic_error) == ["self", "status", "status_text", "body"]
    assert "self.basic_error(400" in inspect.getsource(WebRequest.process)
    # Our channel is what a connection of the server gets.
    wrapper = channel_protocol()
    assert isinstance(wrapper, http._GenericHTTPChannelProtocol)
    assert isinstance(wrapper._channel, Channel)
    wrapper.requestFactory = WebRequest  # what daphne's factory does
    assert wrapper._channel.requestFactory is Request
    server = RedactingServer(application=None, endpoints=["tcp:port=0"])
    server.http_factory = HTTPFactory(server)
    assert server.http_factory.protocol is channel_protocol
