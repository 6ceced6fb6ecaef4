"""The ``pigeonhole`` CLI (issue 27, item 3) end to end, as a shell step would run it: a
subprocess (``python -m pigeonhole_client``, what the console script calls) against a live
server, with the mail sent over SMTP by smtplib."""

from __future__ import annotations

import json
import subprocess
import sys

from pigeonhole_client import Pigeonhole

from tests.client.conftest import client_env, send_mail
from tests.live import ROOT, Stack


def cli(stack: Stack, key: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pigeonhole_client", *args],
        cwd=ROOT,
        env=client_env(stack, key),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_create_send_and_wait_for_the_code(stack: Stack, api_key: str, ph: Pigeonhole) -> None:
    created = cli(stack, api_key, "inbox", "create", "--local-part", "signup", "--json")
    assert created.returncode == 0, created.stderr
    address = json.loads(created.stdout)["address"]
    assert address.startswith("signup@")

    body = "Welcome!\n\nYour code is 739201.\nConfirm: https://app.example/verify-email?t=1\n"
    send_mail(stack, address, "Your sign-up code", body)

    waited = cli(stack, api_key, "wait", "--inbox", address, "--code", "--timeout", "30")
    assert (waited.returncode, waited.stdout) == (0, "739201\n"), waited.stderr
    link = cli(stack, api_key, "wait", "--inbox", address, "--link", "verify", "--from", "shop")
    assert (link.returncode, link.stdout) == (0, "https://app.example/verify-email?t=1\n")
    whole = cli(stack, api_key, "--json", "wait", "--inbox", address, "--subject", "sign-up")
    assert json.loads(whole.stdout)["extracted"]["code"] == "739201"

    emails = cli(stack, api_key, "emails", "--inbox", address, "--json")
    assert [item["subject"] for item in json.loads(emails.stdout)] == ["Your sign-up code"]
    listed = cli(stack, api_key, "inbox", "list")
    assert address in listed.stdout
    sent = cli(
        stack,
        api_key,
        "send",
        "--inbox",
        address,
        "--to",
        address,
        "--subject",
        "Echo",
        "--text",
        "Hi.",
        "--json",
    )
    assert json.loads(sent.stdout)["status"] == "sent", sent.stderr
    streamed = cli(
        stack,
        api_key,
        "stream",
        "--inbox",
        address,
        "--last-event-id",
        "0",
        "--timeout",
        "0",
        "--json",
    )
    first = json.loads(streamed.stdout.splitlines()[0])
    assert (first["event"], first["data"]["code"]) == ("email.received", "739201")

    deleted = cli(stack, api_key, "inbox", "delete", address)
    assert deleted.returncode == 0 and address in deleted.stdout
    assert address not in {inbox.address for inbox in ph.inboxes.list()}


def test_a_wait_that_times_out_exits_1(stack: Stack, api_key: str) -> None:
    created = cli(stack, api_key, "inbox", "create")
    address = created.stdout.strip()
    waited = cli(stack, api_key, "wait", "--inbox", address, "--code", "--timeout", "1")
    assert (waited.returncode, waited.stdout) == (1, "")
    assert "no email matching" in waited.stderr
    unknown = cli(stack, api_key, "wait", "--inbox", "nobody@nowhere.example", "--timeout", "1")
    assert unknown.returncode == 2 and "not_found" in unknown.stderr
