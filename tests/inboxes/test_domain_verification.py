"""Custom domains receive mail only once a DNS TXT record proves control (issue 23, item 7).

The live tests run the real processes (tests/live.py): SMTP with smtplib into the smtpd, HTTP
against the web process, and the nameserver of tests/dns_server.py on 127.0.0.1, which every
process asks (``DNS_RESOLVER``) and whose records the test publishes and withdraws.
"""

from __future__ import annotations

import json
import smtplib
import socket
from collections.abc import Iterator
from datetime import timedelta
from io import StringIO

import pytest
import time_machine
from django.core.management import CommandError, call_command
from django.http import HttpResponse
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from apikeys import services as key_services
from apikeys.audit import Actor
from apikeys.models import Workspace
from inboxes import selectors, services
from inboxes.models import Domain, Inbox
from mail.models import Email
from outbox.delivery import split_recipients
from tests.conftest import Api, error_of
from tests.dns_server import DnsServer, verified_domain
from tests.factories import UserFactory
from tests.live import Stack
from tests.mail.messages import message

ADMIN = ("read", "write", "send", "admin")


@pytest.fixture
def stack(transactional_db: None) -> Iterator[Stack]:
    from django.db import connection

    running = Stack(connection.settings_dict["NAME"]).start()
    yield running
    running.stop()


def _rcpt(stack: Stack, address: str) -> tuple[int, bytes]:
    """The smtpd's reply to ``RCPT TO:<address>``."""
    with smtplib.SMTP("127.0.0.1", stack.smtp_port, timeout=30) as smtp:
        smtp.ehlo()
        smtp.mail("sender@shop.example")
        return smtp.rcpt(address)


def _send(stack: Stack, address: str, subject: str) -> dict:
    with smtplib.SMTP("127.0.0.1", stack.smtp_port, timeout=30) as smtp:
        return smtp.sendmail("sender@shop.example", [address], message(to=address, subject=subject))


def test_an_unverified_custom_domain_receives_no_mail_and_a_verified_one_does(
    stack: Stack, workspace: Workspace, dns_server: DnsServer
) -> None:
    """The attack: a workspace claims a domain (catch-all on) and receives its mail at once."""
    key = key_services.api_key_create(
        workspace=workspace, name="k", scopes=ADMIN, by=Actor.system("tests")
    ).plain
    services.domain_add(
        workspace=workspace, domain="claimed.example", catch_all=True, by=Actor.system("tests")
    )
    code, reply = _rcpt(stack, "anyone@claimed.example")
    assert (code, reply[:5]) == (550, b"5.1.1")
    assert not Inbox.objects.filter(domain="claimed.example").exists()

    with stack.client(key) as http:
        row = next(
            d for d in http.get("/domains").json()["data"] if d["domain"] != "pigeonhole.test"
        )
        assert row["verified"] is False and row["default"] is False
        record = row["verification"]
        token = Domain.objects.get(domain="claimed.example").verification_token
        assert (record["name"], record["type"], record["value"]) == (
            "_pigeonhole.claimed.example",
            "TXT",
            f"pigeonhole-verification={token}",
        )
        refused = http.post("/inboxes", json={"domain": "claimed.example", "local_part": "bob"})
        assert error_of(refused) == (400, "invalid_domain")
        assert "not verified" in refused.json()["error"]["message"]
        # A check without the record changes nothing.
        checked = http.post("/domains/claimed.example/verify")
        assert checked.status_code == 200
        assert checked.json()["verified"] is False
        assert checked.json()["verification"]["result"] == "missing"
        # The owner publishes the record; the check on demand verifies the domain.
        dns_server.publish(record["name"], "v=spf1 -all", record["value"])
        checked = http.post("/domains/claimed.example/verify")
        assert checked.status_code == 200
        body = checked.json()
        assert body["verified"] is True and body["verification"]["result"] == "found"
        assert body["verification"]["verified_at"] is not None
        assert (
            http.post("/inboxes", json={"domain": "claimed.example", "local_part": "bob"}).json()[
                "address"
            ]
            == "bob@claimed.example"
        )

    assert _rcpt(stack, "anyone@claimed.example")[0] == 250
    assert _send(stack, "new-user@claimed.example", "to catch-all") == {}
    assert _send(stack, "bob@claimed.example", "to bob") == {}
    created = Inbox.objects.get(address="new-user@claimed.example")
    assert created.source == "catch_all"
    assert Email.objects.get(inbox=created).subject == "to catch-all"
    assert Email.objects.get(inbox__address="bob@claimed.example").subject == "to bob"


def test_a_domain_whose_record_disappears_stops_receiving(
    stack: Stack, workspace: Workspace, dns_server: DnsServer, settings
) -> None:  # type: ignore[no-untyped-def]
    """The periodic re-check: DOMAIN_UNVERIFY_AFTER (3) checks in a row without the record."""
    domain = verified_domain(workspace, "leaving.example")
    inbox = services.inbox_create(workspace=workspace, local_part="box", domain="leaving.example")
    assert _send(stack, inbox.address, "before") == {}
    dns_server.withdraw(domain.record_name)
    now = timezone.now()
    for check in (1, 2):
        now += timedelta(minutes=settings.DOMAIN_RECHECK_MINUTES + 1)
        with time_machine.travel(now, tick=False):
            assert services.domains_recheck_due() == 1
        domain.refresh_from_db()
        assert (domain.verified, domain.failed_checks) == (True, check)
        assert f"after {3 - check} more failed check" in domain.last_check_detail
    assert _send(stack, "box+still@leaving.example", "still") == {}
    now += timedelta(minutes=settings.DOMAIN_RECHECK_MINUTES + 1)
    with time_machine.travel(now, tick=False):
        assert services.domains_recheck_due() == 1
        assert services.domains_recheck_due() == 0  # checked just now: not due again
    domain.refresh_from_db()
    assert domain.verified is False and domain.last_check_result == "missing"
    # RCPT to an address the smtpd has not admitted recently, and DATA to one it has: refused.
    assert _rcpt(stack, "box+after@leaving.example")[0] == 550
    with pytest.raises((smtplib.SMTPRecipientsRefused, smtplib.SMTPDataError)):
        _send(stack, inbox.address, "after")
    assert sorted(Email.objects.filter(inbox=inbox).values_list("subject", flat=True)) == [
        "before",
        "still",
    ]


def test_verify_api_answers_for_own_custom_domains_only(
    settings, api: Api, other_api: Api, workspace: Workspace, other_workspace: Workspace
) -> None:  # type: ignore[no-untyped-def]
    services.domain_add(workspace=workspace, domain="mine.example", by=Actor.system("tests"))
    services.domain_add(
        workspace=other_workspace, domain="theirs.example", by=Actor.system("tests")
    )
    assert api.call("POST", "domains/Mine.Example/verify").status_code == 200
    for name in ("theirs.example", "nowhere.example", settings.INBOX_DOMAINS[0]):
        assert error_of(api.call("POST", f"domains/{name}/verify")) == (404, "not_found")
    assert Domain.objects.get(domain="theirs.example").last_checked_at is None
    reader = Api(
        key_services.api_key_create(
            workspace=workspace, name="r", scopes=["write"], by=Actor.system("tests")
        ).plain
    )
    assert error_of(reader.call("POST", "domains/mine.example/verify")) == (
        403,
        "insufficient_scope",
    )


def test_dns_failures_never_change_verification(
    api: Api, workspace: Workspace, dns_server: DnsServer, settings
) -> None:  # type: ignore[no-untyped-def]
    domain = verified_domain(workspace, "flaky.example")
    dns_server.failing.add(domain.record_name)
    try:
        for _ in range(settings.DOMAIN_UNVERIFY_AFTER + 1):
            body = api.call("POST", "domains/flaky.example/verify").json()
            assert body["verified"] is True
            assert body["verification"]["result"] == "dns_error"
    finally:
        dns_server.failing.discard(domain.record_name)
    domain.refresh_from_db()
    assert domain.failed_checks == 0


def test_a_silent_nameserver_is_a_dns_error_within_the_timeout(
    api: Api, workspace: Workspace, settings
) -> None:  # type: ignore[no-untyped-def]
    services.domain_add(workspace=workspace, domain="silent.example", by=Actor.system("tests"))
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as mute:  # bound, never answers
        mute.bind(("127.0.0.1", 0))
        settings.DNS_RESOLVER = f"127.0.0.1:{mute.getsockname()[1]}"
        settings.DNS_TIMEOUT = 0.5
        body = api.call("POST", "domains/silent.example/verify").json()
    assert body["verified"] is False
    assert body["verification"]["result"] == "dns_error"
    assert "timed out" in body["verification"]["detail"]


def test_a_wrong_value_is_missing_and_says_what_was_found(
    api: Api, workspace: Workspace, dns_server: DnsServer
) -> None:
    domain = services.domain_add(
        workspace=workspace, domain="wrong.example", by=Actor.system("tests")
    )
    dns_server.publish(domain.record_name, "pigeonhole-verification=someone-elses-token")
    body = api.call("POST", "domains/wrong.example/verify").json()
    assert body["verified"] is False and body["verification"]["result"] == "missing"
    assert "someone-elses-token" in body["verification"]["detail"]


def test_a_claim_does_not_block_the_owner_and_one_workspace_verifies(
    workspace: Workspace, other_workspace: Workspace, dns_server: DnsServer
) -> None:
    """First come is no longer first served: a squatter's unverified claim does not keep the
    real owner out, and once a workspace has verified a name nobody else can claim it."""
    squatter = services.domain_add(
        workspace=other_workspace, domain="wanted.example", by=Actor.system("tests")
    )
    owner = verified_domain(workspace, "wanted.example")
    assert owner.pk != squatter.pk
    dns_server.publish(squatter.record_name, owner.record_value, squatter.record_value)
    squatter = services.domain_check(domain=squatter)
    assert squatter.verified is False and squatter.last_check_result == "conflict"
    assert selectors.catch_all_domain("wanted.example") is None  # catch-all is off
    third = Workspace.objects.create(name="third")
    with pytest.raises(Exception) as refused:
        services.domain_add(workspace=third, domain="wanted.example", by=Actor.system("tests"))
    assert getattr(refused.value, "code", None) == "invalid_domain"


@pytest.mark.parametrize(
    "name", ["pigeonhole.test", "sub.pigeonhole.test", "a.b.Pigeonhole.Test.", "x.second.test"]
)
def test_shared_domains_and_their_subdomains_are_never_custom(
    settings, workspace: Workspace, name: str
) -> None:  # type: ignore[no-untyped-def]
    settings.INBOX_DOMAINS = ["pigeonhole.test", "second.test"]
    with pytest.raises(Exception) as refused:
        services.domain_add(workspace=workspace, domain=name, by=Actor.system("tests"))
    assert getattr(refused.value, "code", None) == "invalid_domain"
    assert "subdomain" in str(refused.value)
    with pytest.raises(CommandError, match="subdomain"):
        call_command(
            "bootstrap",
            "--workspace",
            "Boot",
            "--owner",
            "boot@example.com",
            "--password",
            "pw-12345678",
            "--domain",
            name,
            stdout=StringIO(),
        )
    assert not Domain.objects.exists() and not Workspace.objects.filter(name="Boot").exists()
    # Look-alikes are fine: they are not under a shared domain.
    assert (
        services.domain_add(
            workspace=workspace, domain="notpigeonhole.test", by=Actor.system("tests")
        ).verified
        is False
    )


@pytest.mark.parametrize("local_part", ["postmaster", "Abuse", "admin", "hostmaster", "no-reply"])
def test_reserved_local_parts_on_shared_domains(
    api: Api, workspace: Workspace, local_part: str
) -> None:
    answer = api.call("POST", "inboxes", {"local_part": local_part})
    assert error_of(answer) == (409, "address_taken")
    assert "reserved" in answer.json()["error"]["message"]
    assert not Inbox.objects.exists()
    verified_domain(workspace, "own.example")  # a workspace's own domain: its own business
    created = api.call("POST", "inboxes", {"local_part": local_part, "domain": "own.example"})
    assert created.json()["address"] == f"{local_part.lower()}@own.example"


def test_reserved_local_parts_follow_the_setting(api: Api, settings) -> None:  # type: ignore[no-untyped-def]
    settings.RESERVED_LOCAL_PARTS = ["billing"]
    assert error_of(api.call("POST", "inboxes", {"local_part": "billing"})) == (
        409,
        "address_taken",
    )
    assert api.call("POST", "inboxes", {"local_part": "postmaster"}).status_code == 200


def test_an_unverified_claim_does_not_divert_outgoing_mail(
    workspace: Workspace, other_workspace: Workspace
) -> None:
    """Outgoing mail to a name counts as ours (delivered internally) only once it is verified."""
    services.domain_add(
        workspace=other_workspace, domain="victim.example", by=Actor.system("tests")
    )
    assert selectors.hosted_domain("victim.example") is False
    assert split_recipients(["ceo@victim.example"]) == ([], ["ceo@victim.example"])
    verified_domain(workspace, "mine.example")
    assert split_recipients(["a@mine.example"]) == (["a@mine.example"], [])


def test_operator_vouched_domains_are_not_taken_away(
    workspace: Workspace, dns_server: DnsServer, settings
) -> None:  # type: ignore[no-untyped-def]
    """Grandfathered or vouched for (verified, never proven): a missing record keeps it."""
    domain = services.domain_add(
        workspace=workspace, domain="vouched.example", verified=True, by=Actor.system("tests")
    )
    for _ in range(settings.DOMAIN_UNVERIFY_AFTER + 1):
        domain = services.domain_check(domain=domain)
    assert domain.verified is True and domain.verified_at is None
    assert "vouched" in domain.last_check_detail
    dns_server.publish(domain.record_name, domain.record_value)
    domain = services.domain_check(domain=domain)
    assert domain.verified is True and domain.verified_at is not None  # now proven by DNS


def _admin_add(client: Client, workspace: Workspace, name: str, **extra: str) -> HttpResponse:
    data = {"workspace": workspace.pk, "domain": name, **extra}
    return client.post(reverse("admin:inboxes_domain_add"), data)


def test_the_admin_refuses_subdomains_of_shared_domains_and_vouches(
    client: Client, workspace: Workspace, dns_server: DnsServer
) -> None:
    client.force_login(UserFactory(is_staff=True, is_superuser=True))
    answer = _admin_add(client, workspace, "mail.pigeonhole.test")
    assert answer.status_code == 200 and "subdomain" in answer.content.decode()
    assert not Domain.objects.exists()
    answer = _admin_add(client, workspace, "ops.example", verified="on")
    assert answer.status_code == 302
    domain = Domain.objects.get(domain="ops.example")
    assert domain.verified is True and domain.verified_at is None  # vouched for, not proven
    other = Workspace.objects.create(name="other")
    answer = _admin_add(client, other, "ops.example", verified="on")
    assert answer.status_code == 200 and "Another workspace has this domain verified" in (
        answer.content.decode()
    )
    # The admin action looks the record up like the dashboard does.
    dns_server.publish(domain.record_name, domain.record_value)
    client.post(
        reverse("admin:inboxes_domain_changelist"),
        {"action": "check_now", "_selected_action": [domain.pk]},
    )
    domain.refresh_from_db()
    assert domain.last_check_result == "found" and domain.verified_at is not None


def test_the_upgrade_keeps_existing_domains_receiving(transactional_db: None) -> None:
    """0002_domain_verification on a database with custom domains: each keeps receiving
    (vouched for, with a token of its own), except a shared domain's subdomain."""
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    before, after = [("inboxes", "0001_initial")], [("inboxes", "0002_domain_verification")]
    executor = MigrationExecutor(connection)
    latest = executor.loader.graph.leaf_nodes()
    try:
        executor.migrate(before)
        old = executor.loader.project_state(before).apps
        workspace = old.get_model("apikeys", "Workspace").objects.create(name="Upgraded")
        for name in ("one.example", "two.example", "sub.pigeonhole.test"):
            old.get_model("inboxes", "Domain").objects.create(
                id=f"dom_{name}", workspace_id=workspace.pk, domain=name
            )
        executor = MigrationExecutor(connection)
        executor.loader.build_graph()
        executor.migrate(after)
    finally:  # every later test needs the whole schema (the other migrations of inboxes too)
        executor = MigrationExecutor(connection)
        executor.loader.build_graph()
        executor.migrate(latest)
    rows = {d.domain: d for d in Domain.objects.filter(workspace_id=workspace.pk)}
    assert {name: (d.verified, d.verified_at) for name, d in rows.items()} == {
        "one.example": (True, None),
        "two.example": (True, None),
        "sub.pigeonhole.test": (False, None),
    }
    assert len({d.verification_token for d in rows.values()}) == 3


@pytest.mark.parametrize("value", ["dns.example:53", "127.0.0.1:99999", "127.0.0.1:x"])
def test_a_bad_dns_resolver_setting_is_a_dns_error_that_says_so(
    api: Api, workspace: Workspace, settings, value: str
) -> None:  # type: ignore[no-untyped-def]
    verified_domain(workspace, "configured.example")
    settings.DNS_RESOLVER = value
    body = api.call("POST", "domains/configured.example/verify").json()
    assert body["verified"] is True  # unchanged
    assert body["verification"]["result"] == "dns_error"
    assert "DNS_RESOLVER" in body["verification"]["detail"]


@pytest.mark.parametrize(
    ("value", "parsed"),
    [
        ("127.0.0.1:5353", ("127.0.0.1", 5353)),
        ("[::1]:53", ("::1", 53)),
        ("10.0.0.2", ("10.0.0.2", 53)),
    ],
)
def test_dns_resolver_forms(value: str, parsed: tuple[str, int]) -> None:
    from inboxes.verification import parse_resolver

    assert parse_resolver(value) == parsed


def test_bootstrap_prints_the_record_or_vouches_with_verified(db: None) -> None:
    def bootstrap(*extra: str) -> dict:
        out = StringIO()
        call_command(
            "bootstrap",
            "--workspace",
            "Ops",
            "--owner",
            "ops@example.com",
            "--password",
            "pw-12345678",
            "--json",
            *extra,
            stdout=out,
        )
        return json.loads(out.getvalue())

    pending = bootstrap("--domain", "later.example")
    row = Domain.objects.get(domain="later.example")
    assert pending["domain_verification"] == f"{row.record_name} TXT {row.record_value}"
    assert row.verified is False
    vouched = bootstrap("--domain", "ops.example", "--verified")
    assert vouched["domain_verification"] is None
    assert Domain.objects.get(domain="ops.example").verified is True


def test_a_name_too_long_for_its_record_is_refused(workspace: Workspace) -> None:
    name = ".".join(["a" * 60] * 4) + ".example"  # 251 characters: a name, but not its record's
    with pytest.raises(Exception) as refused:
        services.domain_add(workspace=workspace, domain=name, by=Actor.system("tests"))
    assert getattr(refused.value, "code", None) == "validation_error"
    assert "verification record" in str(refused.value)


@pytest.mark.parametrize("name", ["sub.pigeonhole.test", "pigeonhole.test"])
def test_a_claim_under_a_shared_domain_from_before_never_verifies(
    api: Api, workspace: Workspace, dns_server: DnsServer, name: str
) -> None:
    """A row made before the rule (the migration leaves it unverified) stays unverified, even
    with a record published."""
    legacy = Domain.objects.create(workspace=workspace, domain=name, verified=True)
    dns_server.publish(legacy.record_name, legacy.record_value)
    body = api.call("POST", f"domains/{name}/verify").json()
    assert body["verified"] is False and body["verification"]["result"] == "refused"
    legacy.refresh_from_db()
    assert (legacy.verified, legacy.last_check_result) == (False, "refused")
    if name != "pigeonhole.test":
        assert not selectors.inboxes_receiving({"x": Inbox(workspace=workspace, domain=name)})
