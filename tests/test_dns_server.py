"""The suite's own nameserver (tests/dns_server.py) answers and then stops when told: a serving
thread left blocked in ``recvfrom`` after ``stop`` cost every pytest process its join timeout at
the end of the run."""

from __future__ import annotations

import dns.message
import dns.query
import dns.rcode

from tests.dns_server import DnsServer


def test_it_answers_then_its_thread_ends_at_stop() -> None:
    server = DnsServer()
    server.publish("_pigeonhole.example.test", "token")
    answer = dns.query.udp(
        dns.message.make_query("_pigeonhole.example.test", "TXT"),
        "127.0.0.1",
        port=server.port,
        timeout=5,
    )
    assert answer.rcode() == dns.rcode.NOERROR
    assert [r.strings for r in answer.answer[0]] == [(b"token",)]
    server.stop()
    assert not server._thread.is_alive()
