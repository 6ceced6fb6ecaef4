"""SPF, DKIM, DMARC and ARC verdicts (mail.authentication.check) against a real nameserver on
127.0.0.1 (tests/dns_server.py) serving the records each test publishes; messages are signed and
sealed in the test with dkimpy. Through SMTP and the API: test_authentication_smtp.py."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest

from mail import authentication
from mail.authentication import dmarc, resolver
from mail.authentication.resolver import NotCached, forget_answers, forget_unanswered
from tests.dns_server import DnsServer
from tests.mail.authmail import arc_seal, fresh_domain, plain, publish_key, sign

TO = "agent@pigeonhole.test"


def check(raw: bytes, *, ip: str = "127.0.0.1", mail_from: str = "", helo: str = "mx.test") -> dict:
    return authentication.check(raw, client_ip=ip, helo=helo, mail_from=mail_from, budget=2.0)


@pytest.fixture
def domain(dns_server: DnsServer) -> Iterator[str]:
    name = fresh_domain()
    yield name
    for record in [r for r in dns_server.records if r.endswith(name)]:
        dns_server.withdraw(record)


# --- DKIM ---------------------------------------------------------------------------------------


def test_a_valid_signature_passes(dns_server: DnsServer, domain: str) -> None:
    publish_key(dns_server, domain=domain)
    verdict = check(sign(plain(sender=f"a@{domain}", to=TO), domain=domain))
    assert verdict["dkim"] == [{"result": "pass", "domain": domain, "selector": "s1", "reason": ""}]


def test_an_altered_body_fails_with_the_reason(dns_server: DnsServer, domain: str) -> None:
    publish_key(dns_server, domain=domain)
    signed = sign(plain(sender=f"a@{domain}", to=TO, body="Code 482913."), domain=domain)
    verdict = check(signed.replace(b"Code 482913.", b"Code 000000."))
    [signature] = verdict["dkim"]
    assert signature["result"] == "fail" and signature["domain"] == domain
    assert "body hash mismatch" in signature["reason"]


def test_a_signature_by_another_key_fails(dns_server: DnsServer, domain: str) -> None:
    publish_key(dns_server, domain=domain, key_index=1)  # the record holds another key
    verdict = check(sign(plain(sender=f"a@{domain}", to=TO), domain=domain, key_index=0))
    assert [s["result"] for s in verdict["dkim"]] == ["fail"]
    assert verdict["dkim"][0]["reason"] == "signature did not verify"


def test_a_selector_without_a_key_is_a_permerror(domain: str) -> None:
    verdict = check(sign(plain(sender=f"a@{domain}", to=TO), domain=domain, selector="gone"))
    assert verdict["dkim"] == [
        {
            "result": "permerror",
            "domain": domain,
            "selector": "gone",
            "reason": "no key published for selector",
        }
    ]


def test_two_signatures_are_judged_one_by_one(dns_server: DnsServer, domain: str) -> None:
    esp = fresh_domain("esp")
    publish_key(dns_server, domain=domain)
    publish_key(dns_server, domain=esp, selector="mail", key_index=1)
    raw = sign(plain(sender=f"a@{domain}", to=TO), domain=domain)
    raw = sign(raw, domain=esp, selector="mail", key_index=1)  # topmost: the ESP's
    verdict = check(raw)
    assert [(s["domain"], s["selector"], s["result"]) for s in verdict["dkim"]] == [
        (esp, "mail", "pass"),
        (domain, "s1", "pass"),
    ]
    # One altered body breaks both.
    altered = check(raw.replace(b"Code 482913.", b"Code 1."))
    assert [s["result"] for s in altered["dkim"]] == ["fail", "fail"]


def test_an_unsigned_message_has_no_dkim_entries(domain: str) -> None:
    verdict = check(plain(sender=f"a@{domain}", to=TO))
    assert verdict["dkim"] == []
    assert authentication.results(verdict)["dkim"] == ["none"]


# --- SPF ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("record", "ip", "result"),
    [
        ("v=spf1 ip4:127.0.0.1 -all", "127.0.0.1", "pass"),
        ("v=spf1 ip4:192.0.2.10 -all", "127.0.0.1", "fail"),
        ("v=spf1 ip4:192.0.2.10 ~all", "127.0.0.1", "softfail"),
        ("v=spf1 ip4:192.0.2.10 ?all", "127.0.0.1", "neutral"),
        (None, "127.0.0.1", "none"),
        ("v=spf1 ip4:127.0.0.1 include:missing.invalid -all", "192.0.2.99", "permerror"),
    ],
)
def test_spf_by_client_address_and_envelope_sender(
    dns_server: DnsServer, domain: str, record: str | None, ip: str, result: str
) -> None:
    if record is not None:
        dns_server.publish(domain, record)
    verdict = check(plain(sender=f"a@{domain}", to=TO), ip=ip, mail_from=f"bounce@{domain}")
    assert verdict["spf"]["result"] == result, verdict["spf"]
    assert verdict["spf"]["domain"] == domain
    assert verdict["spf"]["identity"] == "mailfrom" and verdict["spf"]["client_ip"] == ip


def test_spf_of_a_bounce_checks_the_helo_name(dns_server: DnsServer, domain: str) -> None:
    dns_server.publish(f"mx.{domain}", "v=spf1 ip4:127.0.0.1 -all")
    verdict = check(plain(sender=f"a@{domain}", to=TO), mail_from="", helo=f"mx.{domain}")
    assert verdict["spf"]["result"] == "pass"
    assert verdict["spf"]["identity"] == "helo" and verdict["spf"]["domain"] == f"mx.{domain}"


# --- DMARC --------------------------------------------------------------------------------------


def test_dmarc_passes_by_aligned_dkim(dns_server: DnsServer, domain: str) -> None:
    publish_key(dns_server, domain=domain)
    dns_server.publish(f"_dmarc.{domain}", "v=DMARC1; p=reject")
    # The envelope sender is an ESP's, so SPF (none here) cannot align: DKIM does.
    verdict = check(
        sign(plain(sender=f"a@{domain}", to=TO), domain=domain), mail_from="b@esp.example"
    )
    assert verdict["dmarc"] == {
        "result": "pass",
        "domain": domain,
        "policy": "reject",
        "alignment": ["dkim"],
        "reason": "",
    }


def test_dmarc_passes_by_aligned_spf_of_a_subdomain(dns_server: DnsServer, domain: str) -> None:
    dns_server.publish(f"bounces.{domain}", "v=spf1 ip4:127.0.0.1 -all")
    dns_server.publish(f"_dmarc.{domain}", "v=DMARC1; p=quarantine")
    verdict = check(plain(sender=f"a@{domain}", to=TO), mail_from=f"x@bounces.{domain}")
    assert verdict["spf"]["result"] == "pass"
    assert verdict["dmarc"]["result"] == "pass" and verdict["dmarc"]["alignment"] == ["spf"]
    assert verdict["dmarc"]["policy"] == "quarantine"


def test_strict_spf_alignment_refuses_a_subdomain(dns_server: DnsServer, domain: str) -> None:
    dns_server.publish(f"bounces.{domain}", "v=spf1 ip4:127.0.0.1 -all")
    dns_server.publish(f"_dmarc.{domain}", "v=DMARC1; p=reject; aspf=s")
    verdict = check(plain(sender=f"a@{domain}", to=TO), mail_from=f"x@bounces.{domain}")
    assert verdict["spf"]["result"] == "pass" and verdict["dmarc"]["result"] == "fail"


def test_dmarc_fails_with_p_reject_when_nothing_aligns(dns_server: DnsServer, domain: str) -> None:
    other = fresh_domain("other")
    publish_key(dns_server, domain=other)
    dns_server.publish(other, "v=spf1 ip4:127.0.0.1 -all")
    dns_server.publish(f"_dmarc.{domain}", "v=DMARC1; p=reject")
    # Signed and sent by `other`, claiming to be from `domain`: both pass, neither aligns.
    raw = sign(plain(sender=f"ceo@{domain}", to=TO), domain=other)
    verdict = check(raw, mail_from=f"x@{other}")
    assert verdict["spf"]["result"] == "pass" and verdict["dkim"][0]["result"] == "pass"
    assert verdict["dmarc"]["result"] == "fail" and verdict["dmarc"]["policy"] == "reject"
    assert verdict["dmarc"]["alignment"] == []


def test_a_subdomain_takes_the_organisational_domains_sp(
    dns_server: DnsServer, domain: str
) -> None:
    dns_server.publish(f"_dmarc.{domain}", "v=DMARC1; p=reject; sp=quarantine")
    verdict = check(plain(sender=f"a@news.{domain}", to=TO))
    assert verdict["dmarc"]["domain"] == f"news.{domain}"
    assert verdict["dmarc"]["result"] == "fail" and verdict["dmarc"]["policy"] == "quarantine"


def test_no_dmarc_record_is_none(domain: str) -> None:
    verdict = check(plain(sender=f"a@{domain}", to=TO))
    assert verdict["dmarc"]["result"] == "none" and verdict["dmarc"]["policy"] is None


def test_the_organisational_domain_comes_from_the_bundled_list() -> None:
    assert dmarc.organizational_domain("mail.example.co.uk") == "example.co.uk"
    assert dmarc.organizational_domain("a.b.example.com") == "example.com"
    assert dmarc.aligned("mail.example.co.uk", "example.co.uk", "r")
    assert not dmarc.aligned("example.co.uk", "other.co.uk", "r")


# --- ARC ----------------------------------------------------------------------------------------


def test_a_valid_arc_chain_passes(dns_server: DnsServer, domain: str) -> None:
    relay = fresh_domain("relay")
    publish_key(dns_server, domain=domain)
    publish_key(dns_server, domain=relay, selector="arc")
    raw = arc_seal(sign(plain(sender=f"a@{domain}", to=TO), domain=domain), domain=relay)
    verdict = check(raw)
    assert verdict["arc"] == {"result": "pass", "domain": relay, "instances": 1, "reason": ""}


def test_a_two_hop_arc_chain_passes(dns_server: DnsServer, domain: str) -> None:
    first, second = fresh_domain("list"), fresh_domain("forwarder")
    publish_key(dns_server, domain=first, selector="arc")
    publish_key(dns_server, domain=second, selector="arc")
    raw = arc_seal(plain(sender=f"a@{domain}", to=TO), domain=first)
    raw = arc_seal(raw, domain=second, results="arc=pass")  # the second hop saw a valid chain
    verdict = check(raw)
    assert verdict["arc"]["result"] == "pass" and verdict["arc"]["instances"] == 2
    assert verdict["arc"]["domain"] == second


def test_a_message_altered_after_sealing_breaks_the_chain(
    dns_server: DnsServer, domain: str
) -> None:
    relay = fresh_domain("relay")
    publish_key(dns_server, domain=relay, selector="arc")
    raw = arc_seal(plain(sender=f"a@{domain}", to=TO), domain=relay)
    verdict = check(raw.replace(b"Code 482913.", b"Code 999999."))
    assert verdict["arc"]["result"] == "fail" and verdict["arc"]["domain"] == relay
    assert verdict["arc"]["reason"]


def test_a_seal_without_its_key_fails(domain: str) -> None:
    raw = arc_seal(plain(sender=f"a@{domain}", to=TO), domain=fresh_domain("nokey"))
    assert check(raw)["arc"]["result"] == "fail"


def test_an_unsealed_message_has_arc_none(domain: str) -> None:
    assert check(plain(sender=f"a@{domain}", to=TO))["arc"] == {
        "result": "none",
        "domain": "",
        "instances": 0,
        "reason": "",
    }


# --- DNS that cannot answer ---------------------------------------------------------------------


def test_a_failing_nameserver_gives_temperror(dns_server: DnsServer, domain: str) -> None:
    dns_server.failing.update({domain, f"s1._domainkey.{domain}", f"_dmarc.{domain}"})
    try:
        raw = sign(plain(sender=f"a@{domain}", to=TO), domain=domain)
        verdict = check(raw, mail_from=f"b@{domain}")
    finally:
        dns_server.failing.clear()
        forget_unanswered()
    assert verdict["spf"]["result"] == "temperror"
    assert [s["result"] for s in verdict["dkim"]] == ["temperror"]
    assert verdict["dmarc"]["result"] == "temperror"


def test_a_silent_nameserver_gives_temperror_within_the_budget(settings, domain: str) -> None:  # type: ignore[no-untyped-def]
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as mute:  # bound, never answers
        mute.bind(("127.0.0.1", 0))
        settings.DNS_RESOLVER = f"127.0.0.1:{mute.getsockname()[1]}"
        settings.MAIL_AUTH_DNS_TIMEOUT = 0.3
        raw = sign(plain(sender=f"a@{domain}", to=TO), domain=domain)
        started = time.monotonic()
        try:
            verdict = authentication.check(
                raw, client_ip="127.0.0.1", helo="mx.test", mail_from=f"b@{domain}", budget=0.8
            )
        finally:
            forget_unanswered()
        elapsed = time.monotonic() - started
    assert verdict["spf"]["result"] == "temperror"
    assert [s["result"] for s in verdict["dkim"]] == ["temperror"]
    assert verdict["dmarc"]["result"] == "temperror"
    assert elapsed < 0.8 + 5  # the budget bounds it (a generous margin for a loaded machine)


def test_results_are_what_rules_and_queries_see() -> None:
    assert authentication.results(None) == {}
    verdict = authentication.unanswered("time budget spent", client_ip="127.0.0.1")
    assert authentication.results(verdict) == {
        "spf": ["temperror"],
        "dmarc": ["temperror"],
        "arc": ["temperror"],
        "dkim": ["none"],
    }


def test_a_message_over_the_size_bound_lists_its_signatures_unverified(
    dns_server: DnsServer, domain: str
) -> None:
    publish_key(dns_server, domain=domain)
    dns_server.publish(f"_dmarc.{domain}", "v=DMARC1; p=reject")
    raw = sign(plain(sender=f"a@{domain}", to=TO, body="x" * 5000), domain=domain)
    verdict = authentication.check(
        raw,
        client_ip="127.0.0.1",
        helo="mx.test",
        mail_from="b@esp.example",
        budget=2.0,
        max_bytes=1000,
    )
    [signature] = verdict["dkim"]
    assert (signature["result"], signature["domain"], signature["selector"]) == (
        "neutral",
        domain,
        "s1",
    )
    assert "MAIL_AUTH_MAX_BYTES" in signature["reason"]
    assert verdict["dmarc"]["result"] == "temperror"  # undecided, not a failure
    # Under the bound, the same message verifies.
    verdict = authentication.check(
        raw,
        client_ip="127.0.0.1",
        helo="mx.test",
        mail_from="b@esp.example",
        budget=2.0,
        max_bytes=len(raw),
    )
    assert verdict["dkim"][0]["result"] == "pass" and verdict["dmarc"]["result"] == "pass"


def test_the_client_address_of_a_dual_stack_socket_is_its_ipv4_address() -> None:
    from types import SimpleNamespace

    from mail.smtpd.checks import peer_ip

    assert peer_ip(SimpleNamespace(peer=("::ffff:192.0.2.7", 25, 0, 0))) == "192.0.2.7"
    assert peer_ip(SimpleNamespace(peer=("2001:db8::1", 25, 0, 0))) == "2001:db8::1"
    assert peer_ip(SimpleNamespace(peer=("127.0.0.1", 25))) == "127.0.0.1"
    assert peer_ip(SimpleNamespace(peer=None)) == ""


def test_a_check_from_the_cache_alone_stops_at_the_first_lookup_not_kept(
    dns_server: DnsServer, domain: str
) -> None:
    """The smtpd checks a message on its event loop when every answer is kept already, and in
    a thread otherwise (mail/smtpd/checks.py): the cache-only check says which."""
    from mail.authentication.resolver import NotCached

    publish_key(dns_server, domain=domain)
    dns_server.publish(domain, "v=spf1 ip4:127.0.0.1 -all")
    dns_server.publish(f"_dmarc.{domain}", "v=DMARC1; p=reject")
    raw = sign(plain(sender=f"a@{domain}", to=TO), domain=domain)
    facts = {"client_ip": "127.0.0.1", "helo": "mx.test", "mail_from": f"b@{domain}"}
    with pytest.raises(NotCached):
        authentication.check(raw, **facts, budget=2.0, cached_only=True)
    asked = len(dns_server.queries)
    verdict = authentication.check(raw, **facts, budget=2.0)  # asks, and keeps the answers
    assert len(dns_server.queries) > asked
    asked = len(dns_server.queries)
    assert authentication.check(raw, **facts, budget=2.0, cached_only=True) == verdict
    assert len(dns_server.queries) == asked  # nothing asked
    assert verdict["dmarc"]["result"] == "pass"


# --- the resolver's cache -----------------------------------------------------------------------


def test_no_such_name_is_kept_for_its_soa_minimum_and_not_without_one(
    dns_server: DnsServer, domain: str
) -> None:
    """A domain without SPF or DMARC records: its "no such name" answers are kept as long as the
    zone's SOA says (RFC 2308), so the next message's checks are answered from the cache, on the
    SMTP server's event loop; an answer without an SOA is not kept. Before, NXDOMAIN was never
    kept: every unsigned message from such a domain asked the nameserver again, from a thread."""
    raw = plain(sender=f"a@{domain}", to=TO)

    def cached_check(mail_from: str) -> dict:
        return authentication.check(
            raw,
            client_ip="127.0.0.1",
            helo="mx.test",
            mail_from=mail_from,
            budget=2.0,
            cached_only=True,
        )

    assert check(raw, mail_from=f"a@{domain}")["spf"]["result"] == "none"
    with pytest.raises(NotCached):
        cached_check(f"a@{domain}")  # no SOA in the answers: nothing kept

    dns_server.negative_ttl = 300
    try:
        other = fresh_domain()
        raw = plain(sender=f"a@{other}", to=TO)
        asked = len(dns_server.queries)
        first = check(raw, mail_from=f"a@{other}")
        assert len(dns_server.queries) > asked  # the first message asks
        asked = len(dns_server.queries)
        again = cached_check(f"a@{other}")  # raised NotCached before the fix
        assert len(dns_server.queries) == asked  # the second is answered from the cache
        assert again == first and again["spf"]["result"] == "none"
        assert again["dmarc"]["result"] == "none"

        # A zone that allows a day is kept NEGATIVE_MAX_SECONDS at most: records published
        # after a first test message count a few minutes later, not tomorrow.
        dns_server.negative_ttl = 86_400
        third = fresh_domain()
        check(plain(sender=f"a@{third}", to=TO), mail_from=f"a@{third}")
        expiry, records = resolver._answers[(third, "TXT")]
        assert records == []
        assert expiry - time.monotonic() <= 300  # NEGATIVE_MAX_SECONDS, not the SOA's day
        # The same for "no such record" (the name exists without a TXT record), whose answer's
        # expiry dnspython takes from the same SOA: kept a day before.
        fourth = fresh_domain()
        dns_server.publish(fourth)
        check(plain(sender=f"a@{fourth}", to=TO), mail_from=f"a@{fourth}")
        expiry, records = resolver._answers[(fourth, "TXT")]
        assert records == []
        assert expiry - time.monotonic() <= 300
    finally:
        dns_server.negative_ttl = 0
        forget_answers()
