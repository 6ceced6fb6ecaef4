"""SSRF matrix (issue 11, matrix 7): webhook targets that must never be called.

Every target below is refused when an endpoint is created (``POST /webhooks``) or changed
(``PATCH /webhooks/{id}``) — 400 ``validation_error`` on path ``url`` — and again when a worker
attempts a delivery to an endpoint that already holds it (stored before the rule, or a name that
resolved elsewhere then): the attempt is logged as ``refused:`` and nothing connects.
``WEBHOOK_ALLOW_PRIVATE_TARGETS`` is false throughout.

Two seams stand in for the outside world (nothing of ours is replaced):

- **The resolver** is an external system: ``socket.getaddrinfo`` answers from :data:`NAMES` (a
  scripted name answers differently on each call: DNS rebinding), parses numeric hosts exactly as
  libc does (``AI_NUMERICHOST``, so no query leaves the process), and says "no such name" for
  anything else.
- **The socket layer is guarded**: ``socket.socket.connect`` and ``connect_ex`` (which
  ``socket.create_connection`` and asyncio use) record every attempt and raise, so a target that slipped through shows up as a
  recorded attempt instead of a request. The only connections allowed go to :data:`PUBLIC`, a
  stand-in for a public host, rerouted to an HTTP server of the test on 127.0.0.1 (the redirect
  and late-rebinding cases need a public server that answers).

The figure: every target refused at create, at update and at send, with **0** connections
attempted to anything but the public stand-in.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

import pytest
from django.conf import settings as django_settings

from apikeys.audit import Actor
from apikeys.models import Workspace
from tests.conftest import Api, error_of
from webhooks import services, targets
from webhooks.models import Delivery, DeliveryStatus, Endpoint

pytestmark = pytest.mark.django_db

PUBLIC = "93.184.215.14"  # stands for a public host on the internet (rerouted to 127.0.0.1)
PUBLIC_V6 = "2606:2800:21f:cb07:6820:80da:af6b:8b2c"

# What the stub resolver knows. Names of the attacker's zone answer with inside addresses.
NAMES: dict[str, list[str]] = {
    "hooks.example.com": [PUBLIC],
    "v6.hooks.example.com": [PUBLIC_V6],
    "localhost": ["127.0.0.1", "::1"],  # /etc/hosts
    "app.localhost": ["127.0.0.1", "::1"],  # systemd-resolved answers every *.localhost
    "internal.attacker.test": ["10.0.0.5"],
    "metadata.attacker.test": ["169.254.169.254"],
    "mixed.attacker.test": [PUBLIC, "10.0.0.1"],  # one public, one private address
    "v6.attacker.test": ["fd00:ec2::254"],  # the EC2 metadata service over IPv6
    "mapped.attacker.test": ["::ffff:169.254.169.254"],
    "nat64.attacker.test": ["64:ff9b::a9fe:a9fe"],
    "cgnat.attacker.test": ["100.64.0.1"],
    "zero.attacker.test": ["0.0.0.0"],
    "loop6.attacker.test": ["::1"],
}

# (what it is, the URL). Each must be refused at create, update and send time.
REFUSED: list[tuple[str, str]] = [
    # IPv4 loopback
    ("loopback", "http://127.0.0.1/hook"),
    ("loopback with port", "http://127.0.0.1:8080/hook"),
    ("loopback, short form", "http://127.1/hook"),
    ("loopback, top of 127/8", "http://127.255.255.254/hook"),
    ("loopback, three parts", "http://127.0.1/hook"),
    ("loopback, trailing dot", "http://127.0.0.1./hook"),
    ("loopback over https", "https://127.0.0.1/hook"),
    # private
    ("10/8", "http://10.0.0.1/hook"),
    ("10/8 top", "http://10.255.255.254/hook"),
    ("10/8, short form", "http://10.1/hook"),
    ("172.16/12", "http://172.16.0.1/hook"),
    ("172.16/12 top", "http://172.31.255.254/hook"),
    ("192.168/16", "http://192.168.0.1/hook"),
    ("192.168/16 top", "http://192.168.255.254:8443/hook"),
    # link-local and cloud metadata
    ("metadata service", "http://169.254.169.254/latest/meta-data/iam/security-credentials/"),
    ("link-local", "http://169.254.0.1/hook"),
    # CGNAT, this network, reserved, benchmarking, documentation, multicast, broadcast
    ("CGNAT 100.64/10", "http://100.64.0.1/hook"),
    ("CGNAT top", "http://100.127.255.254/hook"),
    ("0.0.0.0", "http://0.0.0.0/hook"),
    ("0/8", "http://0.1.2.3/hook"),
    ("0, one part", "http://0/hook"),
    ("IETF protocol assignments 192.0.0/24", "http://192.0.0.8/hook"),
    ("192.0.0/24, NAT64 discovery", "http://192.0.0.170/hook"),
    ("192.0.0/24, high", "http://192.0.0.200/hook"),
    ("TEST-NET-1", "http://192.0.2.1/hook"),
    ("benchmarking 198.18/15", "http://198.18.0.1/hook"),
    ("benchmarking top", "http://198.19.255.254/hook"),
    ("TEST-NET-2", "http://198.51.100.7/hook"),
    ("TEST-NET-3", "http://203.0.113.9/hook"),
    ("reserved 240/4", "http://240.0.0.1/hook"),
    ("reserved 240/4 top", "http://255.255.255.254/hook"),
    ("broadcast", "http://255.255.255.255/hook"),
    ("multicast 224/4", "http://224.0.0.1/hook"),
    ("multicast SSDP", "http://239.255.255.250:1900/hook"),
    # IPv6
    ("::1", "http://[::1]/hook"),
    ("::1 long form", "http://[0:0:0:0:0:0:0:1]:8080/hook"),
    ("::", "http://[::]/hook"),
    ("fe80::/10", "http://[fe80::1]/hook"),
    ("fe80::/10 with zone id", "http://[fe80::1%25eth0]/hook"),
    ("fe80::/10 with zone id of no interface", "http://[fe80::1%25nosuchif9]/hook"),
    ("fe80::/10 top", "http://[febf:ffff::1]/hook"),
    ("fc00::/7", "http://[fc00::1]/hook"),
    ("fd00::/8, EC2 metadata", "http://[fd00:ec2::254]/latest/meta-data/"),
    ("site-local fec0::/10", "http://[fec0::1]/hook"),
    ("multicast ff02::1", "http://[ff02::1]/hook"),
    ("discard-only 100::/64", "http://[100::1]/hook"),
    ("documentation 2001:db8::/32", "http://[2001:db8::1]/hook"),
    ("SRv6 SIDs 5f00::/16", "http://[5f00::1]/hook"),
    ("IPv4-mapped loopback", "http://[::ffff:127.0.0.1]/hook"),
    ("IPv4-mapped, hex", "http://[::ffff:7f00:1]/hook"),
    ("IPv4-mapped metadata", "http://[::ffff:169.254.169.254]/hook"),
    ("IPv4-mapped private", "http://[::ffff:10.0.0.1]/hook"),
    ("IPv4-compatible loopback", "http://[::127.0.0.1]/hook"),
    ("IPv4-compatible private", "http://[::10.0.0.1]/hook"),
    ("IPv4-translated (SIIT)", "http://[::ffff:0:127.0.0.1]/hook"),
    ("NAT64 64:ff9b::/96 loopback", "http://[64:ff9b::7f00:1]/hook"),
    ("NAT64 of the metadata service", "http://[64:ff9b::a9fe:a9fe]/hook"),
    ("local-use NAT64 64:ff9b:1::/48", "http://[64:ff9b:1::a00:1]/hook"),
    ("6to4 of loopback", "http://[2002:7f00:1::]/hook"),
    ("6to4 of the metadata service", "http://[2002:a9fe:a9fe::1]/hook"),
    ("Teredo", "http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/hook"),
    # integer, octal and hexadecimal spellings of inside addresses
    ("decimal", "http://2130706433/hook"),
    ("decimal metadata", "http://2852039166/latest/meta-data/"),
    ("octal", "http://0177.0.0.1/hook"),
    ("octal, one part", "http://017700000001/hook"),
    ("octal metadata", "http://0251.0376.0251.0376/hook"),
    ("hex, two parts", "http://0x7f.1/hook"),
    ("hex, one part", "http://0x7f000001/hook"),
    ("hex, four parts", "http://0x7f.0x0.0x0.0x1/hook"),
    ("hex private", "http://0xa.0x0.0x0.0x1/hook"),
    # localhost names (RFC 6761: always loopback, whatever a resolver says, if it answers at all)
    ("localhost", "http://localhost/hook"),
    ("localhost, upper case", "http://LOCALHOST:8000/hook"),
    ("localhost.", "http://localhost./hook"),
    ("*.localhost", "http://app.localhost/hook"),
    ("*.localhost.", "http://app.localhost./hook"),
    ("fullwidth-letter localhost (IDNA maps it)", "http://ⓛocalhost/hook"),
    ("*.localhost the resolver does not know", "http://tenant.localhost/hook"),
    ("deep *.localhost", "http://a.b.c.localhost/hook"),
    ("*.localhost, ideographic full stop", "http://app.localhost\u3002/hook"),
    # other names that are never public (the resolver of the test does not know them)
    ("GCP metadata name (.internal)", "http://metadata.google.internal/computeMetadata/v1/"),
    ("mDNS .local", "http://printer.local/hook"),
    ("home.arpa", "http://router.home.arpa/hook"),
    # names that resolve inside
    ("name → 10/8", "http://internal.attacker.test/hook"),
    ("name → metadata", "http://metadata.attacker.test/hook"),
    ("name → public and private", "http://mixed.attacker.test/hook"),
    ("name → fd00::/8", "http://v6.attacker.test/hook"),
    ("name → IPv4-mapped metadata", "http://mapped.attacker.test/hook"),
    ("name → NAT64 metadata", "http://nat64.attacker.test/hook"),
    ("name → CGNAT", "http://cgnat.attacker.test/hook"),
    ("name → 0.0.0.0", "http://zero.attacker.test/hook"),
    ("name → ::1", "http://loop6.attacker.test/hook"),
    # userinfo and parser tricks
    ("userinfo before loopback", "http://evil@127.0.0.1/hook"),
    ("public name as userinfo", "http://hooks.example.com@127.0.0.1/hook"),
    ("public name:port as userinfo", "http://hooks.example.com:80@169.254.169.254/hook"),
    ("credentials, public host", "http://user:pw@hooks.example.com/hook"),
    ("backslash before @", "http://127.0.0.1\\@hooks.example.com/hook"),
    ("fragment before @", "http://127.0.0.1#@hooks.example.com/hook"),
    ("percent-encoded host", "http://%31%32%37.0.0.1/hook"),
    ("hex spelled with a trailing dot", "http://0x7f.1./hook"),
    # ports that are no port (issue 23: port 0 was taken for the scheme's default port and called)
    ("port 0, public address", f"http://{PUBLIC}:0/hook"),
    ("port 0, public name", "https://hooks.example.com:0/hook"),
    ("port 0 written 00", "http://hooks.example.com:00/hook"),
    ("port 0, IPv6 public address", f"http://[{PUBLIC_V6}]:0/hook"),
    ("port above 65535", "http://hooks.example.com:65536/hook"),
    ("port far above 65535", f"http://{PUBLIC}:4294967376/hook"),
    ("port with a sign", "http://hooks.example.com:+80/hook"),
    ("port in non-ASCII digits", "http://hooks.example.com:\u0668\u0660/hook"),
]


# --- the resolver and the socket guard --------------------------------------------------------


@dataclass
class Resolver:
    """``socket.getaddrinfo`` answering from a table; scripted names change their answer."""

    table: dict[str, list[str]] = field(default_factory=lambda: dict(NAMES))
    scripts: dict[str, list[list[str]]] = field(default_factory=dict)
    queries: list[str] = field(default_factory=list)

    def script(self, name: str, *answers: list[str]) -> None:
        """``name`` answers ``answers[0]`` first, then the next one, the last one from then on."""
        self.scripts[name] = list(answers)

    def count(self, name: str) -> int:
        return sum(query == name for query in self.queries)

    def getaddrinfo(
        self, host: Any, port: Any, family: int = 0, type: int = 0, proto: int = 0, flags: int = 0
    ) -> list[tuple]:
        if isinstance(host, bytes):
            host = host.decode()
        try:  # as socket.getaddrinfo does: literals first (libc's parser), then names by IDNA
            return REAL_GETADDRINFO(host, port, family, type, proto, flags | socket.AI_NUMERICHOST)
        except socket.gaierror:
            pass
        try:
            name = host.encode("idna").decode().lower().removesuffix(".")
        except UnicodeError:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known") from None
        self.queries.append(name)
        if name in self.scripts:
            answers = self.scripts[name]
            addresses = answers.pop(0) if len(answers) > 1 else answers[0]
        elif name in self.table:
            addresses = self.table[name]
        else:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        out = []
        for address in addresses:
            af = socket.AF_INET6 if ":" in address else socket.AF_INET
            if family not in (0, af):
                continue
            sockaddr = (
                (address, int(port or 0), 0, 0)
                if af == socket.AF_INET6
                else (address, int(port or 0))
            )
            out.append((af, type or socket.SOCK_STREAM, proto or 6, "", sockaddr))
        if not out:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return out


def _infrastructure() -> set[tuple[str, int]]:
    out = set()
    for url in (django_settings.REDIS_URL or "", os.environ.get("DATABASE_URL", "")):
        parts = urlsplit(url)
        if parts.hostname:
            out.add((parts.hostname, parts.port or (6379 if "redis" in parts.scheme else 5432)))
    return out


INFRASTRUCTURE = _infrastructure()


def _from_http_client() -> bool:
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_globals.get("__name__", "").startswith(("httpx", "httpcore")):
            return True
        frame = frame.f_back
    return False


REAL_GETADDRINFO = socket.getaddrinfo
REAL_CONNECT = socket.socket.connect
REAL_CONNECT_EX = socket.socket.connect_ex


@dataclass
class Guard:
    """Records and refuses every outgoing connection, except to the public stand-in (rerouted
    to a server of the test) and to our own PostgreSQL and Redis when the HTTP client is not the
    one connecting. Patching ``socket.socket.connect``/``connect_ex`` covers every Python-level
    path: ``socket.create_connection`` (httpx's sync transport) and asyncio's ``sock_connect``
    (its async one) both end there."""

    attempts: list[tuple] = field(default_factory=list)
    public: dict[tuple[str, int], int] = field(default_factory=dict)  # (ip, port) → local port
    rerouted: list[tuple] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def route(self, address: Any) -> Any:
        """Where a connection to ``address`` really goes, or None (recorded) if nowhere."""
        if isinstance(address, tuple) and len(address) >= 2:
            host, port = address[0], address[1]
            if (host, port) in self.public:
                with self._lock:
                    self.rerouted.append((host, port))
                local = self.public[host, port]
                return ("::ffff:127.0.0.1", local, 0, 0) if ":" in host else ("127.0.0.1", local)
            if (host, port) in INFRASTRUCTURE and not _from_http_client():
                return address
        with self._lock:
            self.attempts.append(tuple(address) if isinstance(address, tuple) else (address,))
        return None

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        guard = self

        def connect(sock: socket.socket, address: Any) -> None:
            real = guard.route(address)
            if real is None:
                raise ConnectionRefusedError(f"test guard: no connection to {address!r}")
            return REAL_CONNECT(sock, real)

        def connect_ex(sock: socket.socket, address: Any) -> int:
            real = guard.route(address)
            return 111 if real is None else REAL_CONNECT_EX(sock, real)  # 111: ECONNREFUSED

        monkeypatch.setattr(socket.socket, "connect", connect)
        monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)


@pytest.fixture
def resolver(monkeypatch: pytest.MonkeyPatch) -> Resolver:
    stub = Resolver()
    monkeypatch.setattr(socket, "getaddrinfo", stub.getaddrinfo)
    return stub


@pytest.fixture
def guard(monkeypatch: pytest.MonkeyPatch, resolver: Resolver) -> Iterator[Guard]:
    watch = Guard()
    watch.install(monkeypatch)
    yield watch


@pytest.fixture(autouse=True)
def _private_targets_refused(settings) -> None:  # type: ignore[no-untyped-def]
    settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = False
    settings.WEBHOOK_TIMEOUT = 5.0


@dataclass
class PublicServer:
    """An HTTP server of the test playing a public host: answers each POST from ``script``."""

    port: int = 0
    script: list[tuple[int, str]] = field(default_factory=list)  # (status, Location)
    requests: list[dict[str, str]] = field(default_factory=list)


@pytest.fixture
def public_server(guard: Guard) -> Iterator[PublicServer]:
    state = PublicServer()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            state.requests.append(dict(self.headers.items()))
            status, location = state.script.pop(0) if state.script else (200, "")
            self.send_response(status)
            if location:
                self.send_header("Location", location)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    state.port = server.server_address[1]
    guard.public[PUBLIC, 80] = state.port
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield state
    server.shutdown()
    server.server_close()


def _attempt_test_delivery(endpoint: Endpoint) -> tuple[Any, Delivery]:
    """What a worker does with a fresh ``webhook.test`` delivery: one attempt."""
    delivery = services.send_test(endpoint=endpoint)
    logged = services.attempt(delivery.pk)
    assert logged is not None, "the delivery was not due"
    delivery.refresh_from_db()
    return logged, delivery


def _store(workspace: Workspace, url: str) -> Endpoint:
    """An endpoint that already holds ``url`` (stored before the rule, or when its name resolved
    elsewhere): the endpoint service itself, which trusts its callers' validation."""
    endpoint, _ = services.endpoint_create(
        workspace=workspace,
        url=url,
        events=["email.received"],
        inbox_ids=[],
        label_keys=[],
        by=Actor.system("tests"),
    )
    return endpoint


# --- the matrix -------------------------------------------------------------------------------


def test_matrix_is_large_enough() -> None:
    assert len(REFUSED) >= 40
    assert len({url for _, url in REFUSED}) == len(REFUSED), "a target is listed twice"
    assert django_settings.WEBHOOK_ALLOW_PRIVATE_TARGETS is False


def test_refused_at_create(api: Api, guard: Guard) -> None:
    wrong = []
    for what, url in REFUSED:
        response = api.call("POST", "webhooks", {"url": url})
        if response.status_code != 400:
            wrong.append((what, url, response.status_code))
            continue
        status, code = error_of(response)
        paths = [issue["path"] for issue in response.json()["error"]["issues"]]
        if (status, code, paths) != (400, "validation_error", ["url"]):
            wrong.append((what, url, status, code, paths))
    assert wrong == [], f"{len(wrong)} of {len(REFUSED)} targets accepted or misreported: {wrong}"
    assert Endpoint.objects.count() == 0
    assert guard.attempts == []
    print(f"\nSSRF create: {len(REFUSED)} of {len(REFUSED)} refused, 0 connections")


def test_refused_by_the_target_check_itself(guard: Guard) -> None:
    """Not only Django's URL syntax check: ``webhooks.targets`` refuses every one on its own."""
    passed = []
    for what, url in REFUSED:
        try:
            targets.check_url(url)
        except targets.TargetRefused:
            continue
        passed.append((what, url))
    assert passed == [], f"{len(passed)} of {len(REFUSED)} pass the target check: {passed}"
    assert guard.attempts == []


def test_refused_at_update(api: Api, guard: Guard) -> None:
    created = api.call("POST", "webhooks", {"url": "https://hooks.example.com/hook"})
    assert created.status_code == 200, created.content
    endpoint_id = created.json()["id"]
    wrong = []
    for what, url in REFUSED:
        response = api.call("PATCH", f"webhooks/{endpoint_id}", {"url": url})
        if response.status_code != 400 or [
            issue["path"] for issue in response.json()["error"]["issues"]
        ] != ["url"]:
            wrong.append((what, url, response.status_code))
    assert wrong == [], f"{len(wrong)} of {len(REFUSED)} updates accepted: {wrong}"
    assert Endpoint.objects.get(pk=endpoint_id).url == "https://hooks.example.com/hook"
    assert guard.attempts == []


def test_refused_at_send(workspace: Workspace, guard: Guard) -> None:
    wrong = []
    for what, url in REFUSED:
        logged, delivery = _attempt_test_delivery(_store(workspace, url))
        if not (
            logged.status_code is None
            and logged.error.startswith("refused:")
            and delivery.status == DeliveryStatus.RETRYING
        ):
            wrong.append((what, url, logged.status_code, logged.error))
    assert wrong == [], f"{len(wrong)} of {len(REFUSED)} attempts not refused: {wrong}"
    assert guard.attempts == [], f"{len(guard.attempts)} connections attempted: {guard.attempts}"
    print(f"\nSSRF send: {len(REFUSED)} of {len(REFUSED)} attempts refused, 0 connections")


def test_public_targets_pass(api: Api, guard: Guard, public_server: PublicServer) -> None:
    """The checks refuse what they should, not everything: public targets are created and
    called (the public stand-in answers 200)."""
    for url in (
        "https://hooks.example.com/hook",
        "http://hooks.example.com/hook",
        f"http://{PUBLIC}/hook",
        f"http://[{PUBLIC_V6}]/hook",
        "http://v6.hooks.example.com/hook",
        "http://doesnotresolveyet.example.org/hook",
    ):
        response = api.call("POST", "webhooks", {"url": url})
        assert response.status_code == 200, (url, response.content)
    endpoint = Endpoint.objects.get(url="http://hooks.example.com/hook")
    logged, delivery = _attempt_test_delivery(endpoint)
    assert (logged.status_code, logged.error, delivery.status) == (200, "", "succeeded")
    assert public_server.requests[0]["Host"] == "hooks.example.com"
    assert guard.attempts == []


def test_dns_rebinding_refused_at_send(api: Api, resolver: Resolver, guard: Guard) -> None:
    """Public when the endpoint is created, private by the time a worker sends."""
    for inside in (["127.0.0.1"], ["169.254.169.254"], ["10.1.2.3"], ["::1"], ["fd00::1"]):
        name = f"rebind-{len(resolver.scripts)}.attacker.test"
        resolver.script(name, [PUBLIC], inside)
        response = api.call("POST", "webhooks", {"url": f"http://{name}/hook"})
        assert response.status_code == 200, response.content  # nothing to see yet
        logged, delivery = _attempt_test_delivery(Endpoint.objects.get(pk=response.json()["id"]))
        assert logged.status_code is None and logged.error.startswith("refused:"), logged.error
        assert inside[0] in logged.error and delivery.status == DeliveryStatus.RETRYING
        assert resolver.count(name) == 2
    assert guard.attempts == []


def test_rebinding_between_check_and_connect(
    api: Api, resolver: Resolver, guard: Guard, public_server: PublicServer
) -> None:
    """The name turns private right after the send-time check: the request still goes to the
    checked address (the name is not looked up again by the HTTP client)."""
    resolver.script("late.attacker.test", [PUBLIC], [PUBLIC], ["127.0.0.1"])
    response = api.call("POST", "webhooks", {"url": "http://late.attacker.test/hook"})
    assert response.status_code == 200
    logged, _ = _attempt_test_delivery(Endpoint.objects.get(pk=response.json()["id"]))
    assert logged.status_code == 200, logged.error
    assert resolver.count("late.attacker.test") == 2
    assert guard.rerouted == [(PUBLIC, 80)] and guard.attempts == []
    assert public_server.requests[0]["Host"] == "late.attacker.test"


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_redirect_inside_not_followed(
    api: Api, guard: Guard, public_server: PublicServer, status: int
) -> None:
    """A public URL that redirects inside: accepted at create (it is public), and at send the
    redirect is logged as a failure and never followed."""
    insides = [
        "http://127.0.0.1:8080/admin",
        "http://169.254.169.254/latest/meta-data/",
        "http://[::1]/",
        "http://localhost/",
        "http://10.0.0.1/",
    ]
    response = api.call("POST", "webhooks", {"url": "http://hooks.example.com/hook"})
    assert response.status_code == 200
    endpoint = Endpoint.objects.get(pk=response.json()["id"])
    for location in insides:
        public_server.script.append((status, location))
        logged, delivery = _attempt_test_delivery(endpoint)
        assert logged.status_code == status
        assert logged.error == f"redirect to {location} not followed"
        assert delivery.status == DeliveryStatus.RETRYING
    assert len(public_server.requests) == len(insides)
    assert guard.attempts == [], f"connections attempted: {guard.attempts}"


def test_ipv6_literal_target_gets_a_bracketed_host(
    api: Api, guard: Guard, public_server: PublicServer
) -> None:
    """A public IPv6 literal is called with ``Host: [address]`` (RFC 9110 §7.2; without the
    brackets the header is not a valid host)."""
    guard.public[PUBLIC_V6, 8080] = public_server.port
    response = api.call("POST", "webhooks", {"url": f"http://[{PUBLIC_V6}]:8080/hook"})
    assert response.status_code == 200, response.content
    logged, _ = _attempt_test_delivery(Endpoint.objects.get(pk=response.json()["id"]))
    assert logged.status_code == 200, logged.error
    assert public_server.requests[0]["Host"] == f"[{PUBLIC_V6}]:8080"
    assert guard.attempts == []
