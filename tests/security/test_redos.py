"""Issue 23, item 1: a user's regular expression cannot freeze a web process (ReDoS).

Over the real protocols: mail arrives by SMTP (smtplib), a ``read`` key of one workspace parks
waits whose ``subject`` filter backtracks catastrophically on the stored subjects (and on one that
arrives while they wait), while another workspace's key keeps calling the API. The waits answer
within their timeout plus one second, and the other workspace's answers keep their normal latency
(loosely: under one second each). Two patterns: the issue's ``^(a+)+$``, catastrophic for the
stdlib ``re`` the wait used to compile with, and ``^(a|aa)+$``, catastrophic for the ``regex``
engine too (so the time limit and the wait's budget are what hold it). Each against the
``subject`` filter and the ``body`` filter (issue 28: a regular expression over the text body,
bounded the same way), the mail carrying the hostile text in that part.
"""

from __future__ import annotations

import smtplib
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from apikeys import services as key_services
from apikeys.audit import Actor
from apikeys.models import Workspace
from inboxes import services as inbox_services
from tests.live import Stack
from tests.mail.messages import message

SUBJECT = "a" * 28 + "!"  # the subject: 2^28 paths for ^(a+)+$ in the stdlib engine
STORED = 6  # emails with that subject before the waits start (more than the budget's timeouts)
WAITS = 4  # concurrent waits of the attacking key
TIMEOUT = 1  # seconds, the waits' own timeout


@pytest.fixture(scope="module")
def stack(django_db_setup: None, django_db_blocker) -> Iterator[Stack]:  # type: ignore[no-untyped-def]
    from django.db import connection

    running = Stack(connection.settings_dict["NAME"]).start()
    yield running
    running.stop()


def _send(stack: Stack, to: str, subject: str, text: str = "Hello there.") -> None:
    with smtplib.SMTP("127.0.0.1", stack.smtp_port, timeout=30) as smtp:
        smtp.sendmail("sender@example.org", [to], message(to=to, subject=subject, text=text))


class Bystander(threading.Thread):
    """Another workspace's client calling ``GET /inboxes`` and a wait of its own, one after the
    other, until told to stop; records each answer's status and latency."""

    def __init__(self, stack: Stack, key: str, inbox_id: str) -> None:
        super().__init__(daemon=True)
        self.stack, self.key, self.inbox_id = stack, key, inbox_id
        self.stop = threading.Event()
        self.answers: list[tuple[str, int, float]] = []

    def run(self) -> None:
        with self.stack.client(self.key) as client:
            client.timeout = httpx.Timeout(15, connect=5)
            paths = ["inboxes", f"inboxes/{self.inbox_id}/wait?timeout=0"]
            n = 0
            while not self.stop.is_set():
                path = paths[n % 2]
                started = time.monotonic()
                try:
                    status = client.get(path).status_code
                except httpx.HTTPError:
                    status = 0
                self.answers.append((path, status, time.monotonic() - started))
                n += 1
                self.stop.wait(0.05)  # well inside RATE_LIMIT_PER_MINUTE


@pytest.mark.parametrize("field", ["subject", "body"])
@pytest.mark.parametrize("pattern", [r"^(a+)+$", r"^(a|aa)+$"])
def test_catastrophic_wait_pattern_stalls_nobody(
    stack: Stack,
    transactional_db: None,
    workspace: Workspace,
    other_workspace: Workspace,
    pattern: str,
    field: str,
) -> None:
    def send() -> None:
        if field == "subject":
            _send(stack, inbox.address, SUBJECT)
        else:  # the hostile text is the body (a line of its own: `$` matches before its newline)
            _send(stack, inbox.address, "Hello", text=SUBJECT)

    inbox = inbox_services.inbox_create(workspace=workspace, local_part="victim")
    attacker = key_services.api_key_create(
        workspace=workspace, name="a", scopes=["read"], by=Actor.system("tests")
    ).plain
    other_inbox = inbox_services.inbox_create(workspace=other_workspace, local_part="bystander")
    other = key_services.api_key_create(
        workspace=other_workspace, name="b", scopes=["read"], by=Actor.system("tests")
    ).plain
    before = datetime.now(UTC) - timedelta(seconds=5)
    for _ in range(STORED):
        send()
    with stack.client(other) as warm:  # a fresh process answers its first requests slowly
        for _ in range(3):
            assert warm.get("inboxes").status_code == 200
    bystander = Bystander(stack, other, other_inbox.pk)
    bystander.start()
    waits: list[tuple[int, float]] = []

    def wait(params: dict) -> None:
        with stack.client(attacker) as client:
            client.timeout = httpx.Timeout(15, connect=5)
            started = time.monotonic()
            try:
                status = client.get(f"inboxes/{inbox.pk}/wait", params=params).status_code
            except httpx.HTTPError:
                status = 0
            waits.append((status, time.monotonic() - started))

    try:
        # The stored subjects: matched while the wait looks at what arrived since `since`.
        params = {field: pattern, "timeout": TIMEOUT, "since": before.isoformat()}
        threads = [threading.Thread(target=wait, args=(params,)) for _ in range(WAITS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        # A subject that arrives while the waits are parked: matched on the wake-up.
        threads = [
            threading.Thread(target=wait, args=({field: pattern, "timeout": 3},))
            for _ in range(WAITS)
        ]
        for thread in threads:
            thread.start()
        time.sleep(0.5)  # the waiters are parked
        send()
        for thread in threads:
            thread.join(60)
    finally:
        bystander.stop.set()
        bystander.join(60)
    assert len(waits) == 2 * WAITS
    assert all(status == 204 for status, _ in waits), waits  # a timed-out match is no match
    first, woken = waits[:WAITS], waits[WAITS:]
    # Bounds a stall would blow through (2^28 paths take minutes in a backtracking engine) but
    # a busy machine does not: make test on two cores measured 2.2 s for a 1 s wait.
    assert max(took for _, took in first) < TIMEOUT + 4, first
    assert max(took for _, took in woken) < 3 + 4, woken
    assert len(bystander.answers) >= 10
    assert [a for a in bystander.answers if a[1] not in (200, 204)] == []
    slowest = max(bystander.answers, key=lambda answer: answer[2])
    print(f"\nReDoS bystander: {len(bystander.answers)} answers, slowest {slowest}")
    # As the waits' bounds: a stall is minutes, a busy machine is seconds (make test's embedded
    # pass, four workers on two cores, once took 3.1 s for a GET /inboxes; alone: under 0.1 s).
    assert slowest[2] < 4.0, slowest
    # The bounded matcher still matches what a pattern describes.
    with stack.client(attacker) as client:
        found = client.get(
            f"inboxes/{inbox.pk}/wait",
            params={field: r"^A+!$", "timeout": 0, "since": before.isoformat()},
        )
    assert found.status_code == 200
    assert (found.json()[field] if field == "subject" else found.json()["text"].strip()) == SUBJECT


def test_a_pattern_that_unrolls_into_a_huge_program_is_refused(
    stack: Stack, transactional_db: None, workspace: Workspace
) -> None:
    inbox = inbox_services.inbox_create(workspace=workspace, local_part="bomb")
    key = key_services.api_key_create(
        workspace=workspace, name="a", scopes=["read"], by=Actor.system("tests")
    ).plain
    with stack.client(key) as client:
        response = client.get(
            f"inboxes/{inbox.pk}/wait",
            params={"subject": "((((a{100}){100}){100}){100})", "timeout": 0},
        )
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "validation_error" and error["issues"][0]["path"] == "subject"
    assert "repeat counts multiply" in error["issues"][0]["message"]
