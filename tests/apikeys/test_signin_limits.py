"""Failed sign-ins are limited per account and per client address on ``/login/`` and
``/admin/login/`` (issue 23, item 6), over HTTP against a live server.

Each client connects from an address of its own in 127.0.0.0/8 (the whole block is loopback), so
the account's count and the address's count are seen apart: failures spread over many addresses
lock the account, failures against many accounts from one address lock that address, and a
forged ``X-Forwarded-For`` changes neither.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from io import StringIO

import httpx
import pytest
import time_machine
from django.conf import settings
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from apikeys import services as key_services
from apikeys.audit import Actor
from tests.factories import UserFactory
from tests.live import Stack

PASSWORD = "the-right-pass-4"
LIMIT = 10  # LOGIN_FAILURE_LIMIT's default (a plain number: this module also runs on 532b332)


@pytest.fixture(scope="module")
def stack(django_db_setup: None, django_db_blocker) -> Iterator[Stack]:  # type: ignore[no-untyped-def]
    from django.db import connection

    running = Stack(connection.settings_dict["NAME"]).start()
    yield running
    running.stop()


@pytest.fixture
def people(transactional_db: None) -> list[str]:
    workspace = key_services.workspace_get_or_create(name="Acme")
    emails = ["owner@acme.test", "member@acme.test", "third@acme.test"]
    for email in emails:
        user = key_services.user_get_or_create(email=email, password=PASSWORD)
        key_services.membership_set(
            workspace=workspace, user=user, role="owner", by=Actor.system("tests")
        )
    return emails


def _client(stack: Stack, address: str) -> httpx.Client:
    """A client whose connections come from ``address`` (the server's ``REMOTE_ADDR``)."""
    return httpx.Client(
        base_url=stack.base_url,
        transport=httpx.HTTPTransport(local_address=address),
        timeout=httpx.Timeout(30, connect=5),
    )


def _sign_in(
    stack: Stack,
    address: str,
    username: str,
    password: str,
    path: str = "/login/",
    headers: dict[str, str] | None = None,
) -> httpx.Response:
    with _client(stack, address) as client:
        client.get(path).raise_for_status()
        return client.post(
            path,
            data={
                "username": username,
                "password": password,
                "csrfmiddlewaretoken": client.cookies["csrftoken"],
                "next": "/",
            },
            headers=headers or {},
        )


def _signed_in(response: httpx.Response) -> bool:
    return response.status_code == 302 and "sessionid" in response.cookies


def _locked_out(response: httpx.Response) -> bool:
    return (
        response.status_code == 429
        and "Too many failed sign-ins" in response.text
        and "sessionid" not in response.cookies
        and int(response.headers["retry-after"]) > 0
    )


def test_wrong_passwords_lock_the_account_whatever_the_address(
    stack: Stack, people: list[str]
) -> None:
    answers = [
        _sign_in(stack, f"127.0.1.{n}", "owner@acme.test", f"guess-{n}")
        for n in range(1, LIMIT + 1)
    ]
    assert all(r.status_code == 200 and "didn't match" in r.text for r in answers[:-1])
    assert _locked_out(answers[-1]), answers[-1].status_code
    # The right password from an address that never failed: refused, in plain words.
    right = _sign_in(stack, "127.0.1.200", "owner@acme.test", PASSWORD)
    assert _locked_out(right), (right.status_code, right.text[:300])
    assert "axes_reset_username" in right.text
    # Only that account: another one signs in from the same fresh address.
    assert _signed_in(_sign_in(stack, "127.0.1.200", "member@acme.test", PASSWORD))
    assert settings.AXES_FAILURE_LIMIT == LIMIT
    # The operator's unlock path.
    call_command("axes_reset_username", "owner@acme.test", stdout=StringIO())
    assert _signed_in(_sign_in(stack, "127.0.1.200", "owner@acme.test", PASSWORD))


def test_one_address_guessing_many_accounts_is_locked_out(stack: Stack, people: list[str]) -> None:
    attacker = "127.0.2.1"
    answers = [
        # A forged X-Forwarded-For on every try: the count follows the connection's address.
        _sign_in(
            stack,
            attacker,
            f"nobody-{n}@acme.test",
            "guess",
            headers={"X-Forwarded-For": f"10.0.0.{n}"},
        )
        for n in range(LIMIT)
    ]
    assert all(r.status_code == 200 for r in answers[:-1])
    assert _locked_out(answers[-1])
    # From that address even an untried account with its right password is refused ...
    assert _locked_out(_sign_in(stack, attacker, "third@acme.test", PASSWORD))
    # ... while the account itself is not locked: from elsewhere it signs in.
    assert _signed_in(_sign_in(stack, "127.0.2.2", "third@acme.test", PASSWORD))
    call_command("axes_reset_ip", attacker, stdout=StringIO())
    assert _signed_in(_sign_in(stack, attacker, "third@acme.test", PASSWORD))


def test_the_admin_sign_in_is_limited_too(stack: Stack, transactional_db: None) -> None:
    UserFactory(
        username="ops@acme.test",
        is_staff=True,
        is_superuser=True,
        password=PASSWORD,
    )
    # The admin's form keeps the case as typed: Ops@ and OPS@ still count against ops@.
    spellings = ["ops@acme.test", "Ops@acme.test", "OPS@ACME.TEST", " ops@acme.test"]
    answers = [
        _sign_in(stack, f"127.0.3.{n}", spellings[n % 4], f"guess-{n}", path="/admin/login/")
        for n in range(1, LIMIT + 1)
    ]
    assert all(r.status_code == 200 for r in answers[:-1])
    assert _locked_out(answers[-1])
    refused = _sign_in(stack, "127.0.3.200", "ops@acme.test", PASSWORD, path="/admin/login/")
    assert _locked_out(refused)
    # And the dashboard's form counts against the same account.
    assert _locked_out(_sign_in(stack, "127.0.3.201", "ops@acme.test", PASSWORD))


def test_the_lock_lifts_after_the_cool_off(transactional_db: None) -> None:
    workspace = key_services.workspace_get_or_create(name="Acme")
    user = key_services.user_get_or_create(email="owner@acme.test", password=PASSWORD)
    key_services.membership_set(
        workspace=workspace, user=user, role="owner", by=Actor.system("tests")
    )
    client = Client()
    for n in range(LIMIT):
        client.post("/login/", {"username": "owner@acme.test", "password": f"guess-{n}"})
    refused = client.post("/login/", {"username": "owner@acme.test", "password": PASSWORD})
    assert refused.status_code == 429 and b"Too many failed sign-ins" in refused.content
    later = timezone.now() + settings.AXES_COOLOFF_TIME + timedelta(seconds=1)
    with time_machine.travel(later):
        good = client.post("/login/", {"username": "owner@acme.test", "password": PASSWORD})
    assert good.status_code == 302 and good["Location"] == "/"
