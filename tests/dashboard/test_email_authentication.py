"""The email page's authentication badges, in a real browser on the live stack: a message
DKIM-signed in the test, sent over SMTP from 127.0.0.1 to the stack's smtpd (which checks it
against the run's nameserver on 127.0.0.1), and one that fails DMARC with ``p=reject``."""

from __future__ import annotations

import smtplib

from playwright.sync_api import expect

from inboxes import services as inbox_services
from mail.models import Email
from tests.dashboard.conftest import Team, horizontal_overflow, login, screenshot
from tests.dns_server import DnsServer
from tests.mail.authmail import fresh_domain, plain, publish_key, sign


def test_badges_show_each_verdict(page, team: Team, stack, dns_server: DnsServer) -> None:  # type: ignore[no-untyped-def]
    inbox = inbox_services.inbox_create(workspace=team.workspace, local_part="deliverability")
    domain = fresh_domain()
    publish_key(dns_server, domain=domain)
    dns_server.publish(domain, "v=spf1 ip4:127.0.0.1 -all")
    dns_server.publish(f"_dmarc.{domain}", "v=DMARC1; p=reject")
    signed = sign(plain(sender=f"alerts@{domain}", to=inbox.address), domain=domain)
    spoofed = plain(sender=f"ceo@{domain}", to=inbox.address, subject="Wire transfer")
    with smtplib.SMTP("127.0.0.1", stack.smtp_port) as smtp:
        smtp.sendmail(f"bounce@{domain}", [inbox.address], signed)
        smtp.sendmail("x@spoof.example", [inbox.address], spoofed)
    good = Email.objects.get(inbox=inbox, subject="Sign-in code")
    bad = Email.objects.get(inbox=inbox, subject="Wire transfer")
    login(page, "member@acme.test")

    page.goto(f"/emails/{good.pk}/")
    badges = page.get_by_role("list", name="Authentication")
    for mechanism, result in (
        ("spf", "pass"),
        ("dkim", "pass"),
        ("dmarc", "pass"),
        ("arc", "none"),
    ):
        expect(badges.locator(f'li[data-auth="{mechanism}"]')).to_have_attribute(
            "data-result", result
        )
    expect(badges.locator('li[data-auth="dmarc"]')).to_contain_text("p=reject")
    expect(badges.locator('li[data-auth="dkim"]')).to_contain_text(f"d={domain} s=s1")
    screenshot(page, "email-authentication")
    assert not horizontal_overflow(page)

    page.goto(f"/emails/{bad.pk}/")
    badges = page.get_by_role("list", name="Authentication")
    expect(badges.locator('li[data-auth="dmarc"]')).to_have_attribute("data-result", "fail")
    expect(badges.locator('li[data-auth="dmarc"] .badge')).to_have_class("badge badge-danger")
    expect(badges.locator('li[data-auth="dkim"]')).to_have_attribute("data-result", "none")
