"""Authentication verdicts end to end: mail signed in the test, sent over real SMTP from
127.0.0.1 to our running SMTP server, its records served by the run's nameserver on 127.0.0.1;
the verdict read back through the REST API, matched by a label rule and by ``q``, carried by
``email.received``'s webhook, and bounded when the nameserver never answers."""

from __future__ import annotations

import json
import socket
import time

import pytest

from apikeys.models import Workspace
from inboxes import services as inbox_services
from inboxes.models import Inbox
from mail.authentication.resolver import forget_unanswered
from mail.models import Email
from tests.conftest import Api, SmtpServer
from tests.dns_server import DnsServer
from tests.mail.authmail import fresh_domain, plain, publish_key, sign
from tests.webhooks.receiver import Receiver, receiver  # noqa: F401  (a fixture)
from webhooks import services as webhook_services


@pytest.fixture
def inbox(workspace: Workspace) -> Inbox:
    return inbox_services.inbox_create(workspace=workspace, local_part="deliverability")


def _sent(smtp_server: SmtpServer, raw: bytes, inbox: Inbox, mail_from: str) -> Email:
    with smtp_server.client() as smtp:
        smtp.ehlo("mx.sender.test")
        assert smtp.sendmail(mail_from, [inbox.address], raw) == {}
    return Email.objects.filter(inbox=inbox).order_by("-id").first()  # type: ignore[return-value]


def _aligned_sender(dns_server: DnsServer) -> str:
    domain = fresh_domain()
    publish_key(dns_server, domain=domain)
    dns_server.publish(domain, "v=spf1 ip4:127.0.0.1 -all")
    dns_server.publish(f"_dmarc.{domain}", "v=DMARC1; p=reject")
    return domain


def test_verdicts_over_smtp_read_through_the_api(
    smtp_server: SmtpServer, dns_server: DnsServer, inbox: Inbox, api: Api
) -> None:
    domain = _aligned_sender(dns_server)
    raw = sign(plain(sender=f"alerts@{domain}", to=inbox.address), domain=domain)
    email = _sent(smtp_server, raw, inbox, f"bounce@{domain}")
    body = api.call("GET", f"emails/{email.pk}").json()
    assert body["authentication"] == {
        "spf": {
            "result": "pass",
            "domain": domain,
            "identity": "mailfrom",
            "client_ip": "127.0.0.1",
            "reason": "sender SPF authorized",
        },
        "dkim": [{"result": "pass", "domain": domain, "selector": "s1", "reason": ""}],
        "dmarc": {
            "result": "pass",
            "domain": domain,
            "policy": "reject",
            "alignment": ["dkim", "spf"],
            "reason": "",
        },
        "arc": {"result": "none", "domain": "", "instances": 0, "reason": ""},
    }
    # Not in list summaries (docs/api.md): the list stays lean.
    listed = api.call("GET", f"inboxes/{inbox.pk}/emails").json()["data"]
    assert [e["id"] for e in listed] == [email.pk] and "authentication" not in listed[0]


def test_a_dmarc_reject_failure_is_stored_with_its_verdict(
    smtp_server: SmtpServer, dns_server: DnsServer, inbox: Inbox, api: Api
) -> None:
    domain = _aligned_sender(dns_server)
    raw = sign(plain(sender=f"ceo@{domain}", to=inbox.address), domain=domain)
    tampered = raw.replace(b"Code 482913.", b"Wire the money.")
    email = _sent(smtp_server, tampered, inbox, "spoofer@elsewhere.example")  # 250: captured
    verdict = api.call("GET", f"emails/{email.pk}").json()["authentication"]
    assert verdict["spf"]["result"] == "none" and verdict["spf"]["domain"] == "elsewhere.example"
    assert verdict["dkim"][0]["result"] == "fail"
    assert verdict["dmarc"]["result"] == "fail" and verdict["dmarc"]["policy"] == "reject"


def test_a_label_rule_and_a_query_on_the_verdict(
    smtp_server: SmtpServer, dns_server: DnsServer, inbox: Inbox, api: Api
) -> None:
    rules = {"conditions": [{"field": "auth.dmarc", "op": "equals", "value": "fail"}]}
    created = api.call("POST", "labels", {"key": "spoofed", "name": "Spoofed", "rules": rules})
    assert created.status_code in (200, 201), created.content
    domain = _aligned_sender(dns_server)
    good = _sent(
        smtp_server,
        sign(plain(sender=f"a@{domain}", to=inbox.address), domain=domain),
        inbox,
        f"bounce@{domain}",
    )
    spoofed = _sent(
        smtp_server, plain(sender=f"ceo@{domain}", to=inbox.address), inbox, "x@spoof.example"
    )
    labels = {e["id"]: [x["key"] for x in e["labels"]] for e in _list(api, inbox, "")}
    assert labels == {good.pk: [], spoofed.pk: ["spoofed"]}
    assert [e["id"] for e in _list(api, inbox, "dmarc:fail")] == [spoofed.pk]
    assert [e["id"] for e in _list(api, inbox, "dmarc:pass dkim:pass spf:pass")] == [good.pk]
    assert [e["id"] for e in _list(api, inbox, "dkim:none")] == [spoofed.pk]
    assert [e["id"] for e in _list(api, inbox, "-dkim:none")] == [good.pk]
    bad = api.call("GET", f"inboxes/{inbox.pk}/emails", {"q": "dmarc:maybe"})
    assert bad.status_code == 400
    assert bad.json()["error"]["issues"][0]["path"] == "q"
    assert "dmarc: takes one of" in bad.json()["error"]["issues"][0]["message"]
    # The label tester sees the stored verdict too.
    tested = api.call("POST", "labels/test", {"email_id": spoofed.pk}).json()
    assert "spoofed" in json.dumps(tested)


def _list(api: Api, inbox: Inbox, q: str) -> list[dict]:
    response = api.call("GET", f"inboxes/{inbox.pk}/emails", {"q": q} if q else {})
    assert response.status_code == 200, response.content
    return response.json()["data"]


def test_the_webhook_payload_carries_the_verdict(
    smtp_server: SmtpServer,
    dns_server: DnsServer,
    inbox: Inbox,
    api: Api,
    receiver: Receiver,  # noqa: F811
    settings,  # type: ignore[no-untyped-def]
) -> None:
    settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = True
    assert api.call("POST", "webhooks", {"url": receiver.url}).status_code == 200
    domain = _aligned_sender(dns_server)
    email = _sent(
        smtp_server,
        sign(plain(sender=f"a@{domain}", to=inbox.address), domain=domain),
        inbox,
        f"bounce@{domain}",
    )
    for delivery in webhook_services.DELIVERIES.due():
        webhook_services.attempt(delivery)
    payload = json.loads(receiver.wait_for(1)[0].body)
    assert payload["type"] == "email.received" and payload["data"]["email"]["id"] == email.pk
    verdict = payload["data"]["email"]["authentication"]
    assert verdict["dmarc"]["result"] == "pass" and verdict["spf"]["result"] == "pass"
    assert verdict == email.authentication


def test_a_silent_nameserver_leaves_ingest_within_the_budget(
    smtp_server: SmtpServer,
    inbox: Inbox,
    api: Api,
    settings,  # type: ignore[no-untyped-def]
) -> None:
    domain = fresh_domain()
    raw = sign(plain(sender=f"a@{domain}", to=inbox.address), domain=domain)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as mute:  # bound, never answers
        mute.bind(("127.0.0.1", 0))
        settings.DNS_RESOLVER = f"127.0.0.1:{mute.getsockname()[1]}"
        settings.MAIL_AUTH_BUDGET = 1.0
        settings.MAIL_AUTH_DNS_TIMEOUT = 0.4
        started = time.monotonic()
        try:
            email = _sent(smtp_server, raw, inbox, f"b@{domain}")
        finally:
            forget_unanswered()
        elapsed = time.monotonic() - started
    assert email is not None  # stored, 250
    verdict = api.call("GET", f"emails/{email.pk}").json()["authentication"]
    assert verdict["spf"]["result"] == "temperror"
    assert verdict["dmarc"]["result"] == "temperror"
    assert all(s["result"] == "temperror" for s in verdict["dkim"])
    assert elapsed < 1.0 + 10  # bounded by the budget (a generous margin for a loaded machine)


def test_checks_off_store_no_verdict(
    smtp_server: SmtpServer,
    inbox: Inbox,
    api: Api,
    settings,  # type: ignore[no-untyped-def]
) -> None:
    settings.MAIL_AUTH_CHECKS = False
    email = _sent(smtp_server, plain(sender="a@x.example", to=inbox.address), inbox, "b@x.example")
    assert api.call("GET", f"emails/{email.pk}").json()["authentication"] is None
    assert _list(api, inbox, "dkim:none") == []
