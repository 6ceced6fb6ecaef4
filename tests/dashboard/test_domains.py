"""The domains page in a real browser: a custom domain is proven by its DNS TXT record (the test
nameserver of tests/dns_server.py answers the web process), and a subdomain of a shared domain
is refused."""

from __future__ import annotations

import smtplib

from playwright.sync_api import expect

from inboxes.models import Domain
from tests.dashboard.conftest import Team, login, screenshot
from tests.dns_server import DnsServer
from tests.live import Stack


def test_a_custom_domain_receives_mail_once_its_dns_record_is_checked(
    page, team: Team, dns_server: DnsServer, stack: Stack
) -> None:  # type: ignore[no-untyped-def]
    login(page, "owner@acme.test")
    page.goto("/domains/")
    # Never a subdomain of a shared domain (the claim that took sub.pigeonhole.test's mail).
    page.get_by_label("Domain").fill("sub.pigeonhole.test")
    page.get_by_role("button", name="Add domain").click()
    expect(page.locator(".errorlist")).to_contain_text("subdomain")
    assert not Domain.objects.exists()

    page.get_by_label("Domain").fill("proof.acme.example")
    page.get_by_label("Catch-all").check()
    page.get_by_role("button", name="Add domain").click()
    expect(page.get_by_role("status")).to_contain_text("receives mail once verified")
    domain = Domain.objects.get(domain="proof.acme.example")
    row = page.locator('tr[data-domain="proof.acme.example"]')
    expect(row.locator("[data-status]")).to_have_text("not verified")
    record = page.locator('[data-verification="proof.acme.example"]')
    expect(record).to_contain_text("Receives no mail yet.")
    expect(record.locator("[data-record-name]")).to_have_text("_pigeonhole.proof.acme.example")
    expect(record.locator("[data-record-value]")).to_have_text(
        f"pigeonhole-verification={domain.verification_token}"
    )
    screenshot(page, "domains-unverified")
    # Not offered for new inboxes, and refused at RCPT.
    page.goto("/inboxes/new/")
    options = page.get_by_label("Domain", exact=True).locator("option").all_inner_texts()
    assert not any("proof.acme.example" in option for option in options)
    with smtplib.SMTP("127.0.0.1", stack.smtp_port, timeout=30) as smtp:
        smtp.ehlo()
        smtp.mail("sender@shop.example")
        assert smtp.rcpt("someone@proof.acme.example")[0] == 550

    # Checking before the record exists says so.
    page.goto("/domains/")
    page.get_by_role("button", name="Check the DNS record of proof.acme.example").click()
    expect(page.get_by_role("alert")).to_contain_text(
        "proof.acme.example is not verified. _pigeonhole.proof.acme.example does not exist."
    )
    # The record published, the check verifies the domain.
    dns_server.publish(domain.record_name, domain.record_value)
    page.get_by_role("button", name="Check the DNS record of proof.acme.example").click()
    expect(page.get_by_role("status")).to_contain_text("proof.acme.example is verified.")
    expect(row.locator("[data-status]")).to_have_text("verified")
    expect(record).to_contain_text("Proven by its DNS record")
    screenshot(page, "domains-verified")
    domain.refresh_from_db()
    assert domain.verified is True and domain.verified_at is not None
    page.goto("/inboxes/new/")
    page.get_by_label("Local part").fill("orders")
    page.get_by_label("Domain", exact=True).select_option("proof.acme.example")
    page.get_by_role("button", name="Create inbox").click()
    expect(page.get_by_role("heading", name="orders@proof.acme.example")).to_be_visible()
    with smtplib.SMTP("127.0.0.1", stack.smtp_port, timeout=30) as smtp:
        smtp.ehlo()
        smtp.mail("sender@shop.example")
        assert smtp.rcpt("someone@proof.acme.example")[0] == 250  # catch-all, now verified


def test_members_see_the_record_but_do_not_check_it(page, team: Team) -> None:  # type: ignore[no-untyped-def]
    Domain.objects.create(workspace=team.workspace, domain="pending.acme.example")
    login(page, "member@acme.test")
    page.goto("/domains/")
    expect(page.locator('tr[data-domain="pending.acme.example"] [data-status]')).to_have_text(
        "not verified"
    )
    expect(
        page.locator('[data-verification="pending.acme.example"] [data-record-name]')
    ).to_have_text("_pigeonhole.pending.acme.example")
    assert (
        page.get_by_role("button", name="Check the DNS record of pending.acme.example").count() == 0
    )
