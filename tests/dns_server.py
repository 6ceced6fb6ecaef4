"""A real nameserver for the tests: UDP on 127.0.0.1, answering TXT queries from a dict.

``tests/conftest.py`` starts one for the whole run and points ``DNS_RESOLVER`` at it, in the
test process and in every process the suite starts (``tests.live.child_env`` copies the
environment), so a custom domain's check never leaves the machine. A test publishes a record
with :meth:`DnsServer.publish` and takes it away with :meth:`DnsServer.withdraw`; a name without
records answers NXDOMAIN, a name in ``failing`` answers SERVFAIL. Messages are parsed and built
with dnspython, the library the application resolves with.
"""

from __future__ import annotations

import socket
import threading
from typing import TYPE_CHECKING

import dns.flags
import dns.message
import dns.rcode
import dns.rdataclass
import dns.rdatatype
import dns.rrset

from apikeys.audit import Actor

if TYPE_CHECKING:
    from apikeys.models import Workspace
    from inboxes.models import Domain


def _quoted(value: str) -> str:
    """A TXT value in zone-file text: strings of at most 255 characters (a DKIM key is longer;
    resolvers join them), each quoted."""
    chunks = [value[i : i + 255] for i in range(0, len(value), 255)] or [""]
    return " ".join('"' + c.replace("\\", "\\\\").replace('"', '\\"') + '"' for c in chunks)


def _key(name: str) -> str:
    return name.lower().rstrip(".")


class DnsServer:
    """The nameserver; ``records`` maps a lower-case name to its TXT values."""

    def __init__(self) -> None:
        self.records: dict[str, list[str]] = {}
        self.failing: set[str] = set()
        # > 0: "no such name" and "no such record" answers carry an SOA record with this TTL
        # and MINIMUM in their authority section, as a real zone's do (RFC 2308), so resolvers
        # may keep them that long; 0 (the default): no SOA, nothing to keep them by.
        self.negative_ttl = 0
        self._stopping = False
        self.queries: list[tuple[str, str]] = []  # (name, type), in order
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.port: int = self.sock.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, daemon=True, name="test-dns")
        self._thread.start()

    @property
    def address(self) -> str:
        """``host:port``, the form ``DNS_RESOLVER`` takes."""
        return f"127.0.0.1:{self.port}"

    def publish(self, name: str, *values: str) -> None:
        self.records[_key(name)] = list(values)

    def withdraw(self, name: str) -> None:
        self.records.pop(_key(name), None)

    def _serve(self) -> None:
        while True:
            try:
                wire, client = self.sock.recvfrom(65535)
            except OSError:  # closed
                return
            if self._stopping:
                return
            try:
                self.sock.sendto(self._answer(wire), client)
            except Exception:  # a malformed query gets no answer, as from a real server
                continue

    def _answer(self, wire: bytes) -> bytes:
        query = dns.message.from_wire(wire)
        response = dns.message.make_response(query)
        response.flags |= dns.flags.AA
        question = query.question[0]
        name, rdtype = _key(question.name.to_text()), question.rdtype
        self.queries.append((name, dns.rdatatype.to_text(rdtype)))
        if name in self.failing:
            response.set_rcode(dns.rcode.SERVFAIL)
        elif name not in self.records:
            response.set_rcode(dns.rcode.NXDOMAIN)
        elif rdtype == dns.rdatatype.TXT and self.records[name]:
            quoted = [_quoted(v) for v in self.records[name]]
            response.answer.append(
                dns.rrset.from_text_list(question.name, 60, dns.rdataclass.IN, "TXT", quoted)
            )
        if self.negative_ttl and not response.answer and response.rcode() != dns.rcode.SERVFAIL:
            ttl = self.negative_ttl
            soa = f"ns.test. hostmaster.test. 1 3600 600 86400 {ttl}"
            response.authority.append(
                dns.rrset.from_text(question.name, ttl, dns.rdataclass.IN, "SOA", soa)
            )
        return response.to_wire()

    def stop(self) -> None:
        """Ends the serving thread: closing a UDP socket does not wake a thread blocked in
        ``recvfrom`` on Linux (every run's teardown used to wait the whole join timeout), so a
        datagram to itself does."""
        self._stopping = True
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as waker:
            waker.sendto(b"", ("127.0.0.1", self.port))
        self._thread.join(5)
        self.sock.close()


RUNNING: DnsServer | None = None  # the run's server (tests/conftest.py)


def verified_domain(workspace: Workspace, name: str, *, catch_all: bool = False) -> Domain:
    """A custom domain of ``workspace`` verified the real way: its record published on the
    test nameserver, then checked by ``services.domain_check``."""
    from inboxes import services

    assert RUNNING is not None, "the dns_server fixture of tests/conftest.py is not running"
    row = services.domain_add(
        workspace=workspace, domain=name, catch_all=catch_all, by=Actor.system("tests")
    )
    RUNNING.publish(row.record_name, row.record_value)
    row = services.domain_check(domain=row)
    assert row.verified, row.last_check_detail
    return row
