"""Scenario 6 of the fault issue: real time without gaps.

``manage.py smtpd`` and daphne run as separate processes (:class:`tests.live.Stack`); in embedded
mode both are the one ``manage.py serve`` process, so mail cannot arrive while it is down: the
sender waits for it to come back.

**Waiters.** Lanes of trials run side by side, each on an inbox of its own. A trial parks a
waiter (``GET /inboxes/{id}/wait`` with a subject filter naming the trial, and ``since`` taken
before the request, so a slow start can delay it but never make it miss), gives it a moment to
park, sends the trial's message over SMTP and notes when the ``250`` to DATA arrived; the figure
is the time from that ``250`` to the waiter's answer (negative when the answer overtook the
``250`` on its way back). A trial is *within* when the answer is the trial's email and came at
most 1 s after the ``250``.

**Stream.** One SSE client follows an inbox while a sender delivers messages to it over SMTP,
every tenth from a blocked sender (refused with ``550``: a ``mail.rejected`` event) and the rest
accepted (``email.received``), and a chaos thread ``kill -9``s the web process and starts it again
at evenly spaced points of the run. The client reconnects with ``Last-Event-ID`` (the id of the
last event it dispatched; a frame cut off by the kill is not dispatched, as in a browser) until it
holds as many events as the log of the inbox. Figures: events the log has that the client never
got (``missing``), events it got more than once (``duplicates``), ids that did not increase
(``out_of_order``), and events whose payload is not the message that caused them.
"""

from __future__ import annotations

import contextlib
import itertools
import signal
import smtplib
import statistics
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.utils import formatdate
from typing import Any

import httpx

from apikeys.audit import Actor
from tests.live import Stack

BLOCKED_DOMAIN = "blocked.chaos.example"


def _message(to: str, subject: str, sender: str) -> bytes:
    return (
        f"From: {sender}\r\nTo: {to}\r\nSubject: {subject}\r\nDate: {formatdate()}\r\n"
        f"Message-ID: <{uuid.uuid4().hex}@chaos.example>\r\nMIME-Version: 1.0\r\n"
        "Content-Type: text/plain; charset=utf-8\r\n\r\n"
        f"{subject}: a message of the real-time chaos run.\r\n"
    ).encode()


Lane = tuple[str, str, str]  # inbox id, address, read key


def setup(run_id: str, lanes: int) -> tuple[list[Lane], Lane]:
    """An inbox and a read key per waiter lane (the per-key rate limit stays the default), and the
    stream's inbox (which blocks a domain) with its key."""
    from apikeys import services as keys
    from inboxes import services as inboxes

    workspace = keys.workspace_get_or_create(name=f"realtime {run_id}")

    def key(name: str) -> str:
        return keys.api_key_create(
            workspace=workspace, name=name, scopes=("read",), by=Actor.system("tests")
        ).plain

    waiters = []
    for lane in range(lanes):
        inbox = inboxes.inbox_create(
            workspace=workspace, local_part=f"wait{lane}-{run_id}", ttl_minutes=None
        )
        waiters.append((inbox.pk, inbox.address, key(f"lane {lane}")))
    stream = inboxes.inbox_create(
        workspace=workspace, local_part=f"stream-{run_id}", ttl_minutes=None
    )
    inboxes.inbox_update(inbox=stream, block_senders=[BLOCKED_DOMAIN])
    return waiters, (stream.pk, stream.address, key("stream"))


# --- waiters ------------------------------------------------------------------------------------


@dataclass
class WaiterFigures:
    trials: int
    lanes: int
    within_1s: int = 0
    late: int = 0  # the right email, more than 1 s after the 250
    wrong: int = 0  # no email (timeout), another email, or an error
    share_within: float = 0.0
    ms: dict[str, float] = field(default_factory=dict)  # 250 → answer: min, p50, p90, p99, max
    seconds: float = 0.0
    details: list[str] = field(default_factory=list)


def _trial(stack: Stack, client: httpx.Client, lane: Lane, token: str) -> float | str:
    """One trial: the time from the DATA 250 to the waiter's answer, or what went wrong."""
    inbox_id, address, _ = lane
    since = (datetime.now(UTC) - timedelta(seconds=1)).isoformat()
    answer: dict[str, Any] = {}

    def wait() -> None:
        try:
            response = client.get(
                f"inboxes/{inbox_id}/wait",
                params={"timeout": 30, "subject": f"^{token}$", "since": since},
            )
            answer["response"] = response
        except httpx.HTTPError as exc:
            answer["error"] = repr(exc)
        answer["at"] = time.monotonic()

    waiter = threading.Thread(target=wait, daemon=True)
    waiter.start()
    time.sleep(0.2)  # parked (and if not yet, ``since`` still finds the email)
    with smtplib.SMTP("127.0.0.1", stack.smtp_port, timeout=30) as smtp:
        smtp.sendmail("trials@sender.example", [address], _message(address, token, "t@x.example"))
        acked = time.monotonic()
    waiter.join(40)
    response = answer.get("response")
    if response is None:
        return f"{token}: {answer.get('error', 'no answer')}"
    if response.status_code != 200 or response.json().get("subject") != token:
        return f"{token}: {response.status_code} {response.text[:200]}"
    return answer["at"] - acked


def run_waiters(stack: Stack, lanes: list[Lane], trials: int) -> WaiterFigures:
    """``trials`` trials spread over the lanes."""
    figures = WaiterFigures(trials=trials, lanes=len(lanes))
    delays: list[float] = []
    lock = threading.Lock()
    started = time.monotonic()

    def lane(number: int) -> None:
        with stack.client(lanes[number][2]) as client:
            for k in range(number, trials, len(lanes)):
                outcome = _trial(stack, client, lanes[number], f"trial-{k}-{uuid.uuid4().hex}")
                with lock:
                    if isinstance(outcome, str):
                        figures.wrong += 1
                        figures.details.append(outcome)
                    else:
                        delays.append(outcome)

    threads = [threading.Thread(target=lane, args=(n,)) for n in range(len(lanes))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    figures.seconds = round(time.monotonic() - started, 1)
    figures.within_1s = sum(d <= 1.0 for d in delays)
    figures.late = len(delays) - figures.within_1s
    figures.share_within = round(figures.within_1s / trials, 4)
    if delays:
        ordered = sorted(delays)

        def at(q: float) -> float:
            return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000, 1)

        figures.ms = {
            "min": round(ordered[0] * 1000, 1),
            "p50": round(statistics.median(ordered) * 1000, 1),
            "p90": at(0.90),
            "p99": at(0.99),
            "max": round(ordered[-1] * 1000, 1),
        }
        figures.details += [f"late: {d * 1000:.0f} ms" for d in ordered if d > 1.0]
    return figures


# --- the stream across web restarts -------------------------------------------------------------


@dataclass
class StreamFigures:
    events: int  # what the sender caused (accepted + refused messages)
    restarts: int = 0
    restart_seconds: list[float] = field(default_factory=list)  # kill to port open
    connections: int = 0
    logged: int = 0  # stream events of the inbox in the log
    received: int = 0
    missing: int = 0
    duplicates: int = 0
    out_of_order: int = 0
    wrong_payload: int = 0
    accepted: int = 0  # the sender's 250s
    refused: int = 0  # the sender's 550s (the blocked sender)
    refusals: set[str] = field(default_factory=set)
    seconds: float = 0.0
    details: list[str] = field(default_factory=list)


class Follower(threading.Thread):
    """An SSE client that reconnects with ``Last-Event-ID`` until told to stop."""

    def __init__(self, stack: Stack, key: str, inbox_id: str) -> None:
        super().__init__(daemon=True)
        self.stack, self.key, self.inbox_id = stack, key, inbox_id
        self.got: list[dict[str, Any]] = []
        self.connections = 0
        self.connected = threading.Event()
        self.halt = threading.Event()
        self.errors: list[str] = []

    def run(self) -> None:
        last: str | None = None
        while not self.halt.is_set():
            headers = {"Last-Event-ID": last} if last is not None else {}
            try:
                with (
                    httpx.Client(
                        base_url=self.stack.base_url + "/api/v1",
                        headers={"Authorization": f"Bearer {self.key}"},
                        timeout=httpx.Timeout(5, read=30),
                    ) as client,
                    client.stream(
                        "GET", f"inboxes/{self.inbox_id}/stream", headers=headers
                    ) as response,
                ):
                    if response.status_code != 200:
                        self.errors.append(f"stream answered {response.status_code}")
                        time.sleep(0.2)
                        continue
                    self.connections += 1
                    for event in self._events(response):
                        self.got.append(event)
                        last = event["id"]
                        if self.halt.is_set():
                            return
            except httpx.HTTPError as exc:
                if len(self.errors) < 50:
                    self.errors.append(type(exc).__name__)
                time.sleep(0.1)

    def _events(self, response: httpx.Response) -> Any:
        """Dispatches an event only at its blank line, as EventSource does."""
        import json

        current: dict[str, str] = {}
        for line in response.iter_lines():
            if line == ": connected":
                self.connected.set()
            if line == "":
                if "data" in current:
                    yield {**current, "data": json.loads(current["data"])}
                current = {}
            elif not line.startswith(":"):
                name, _, value = line.partition(":")
                current[name] = value[1:] if value.startswith(" ") else value


def run_stream(
    stack: Stack,
    inbox: Lane,
    *,
    events: int,
    restarts: int = 5,
    rate: float = 40.0,
    limit_s: float = 180.0,
) -> StreamFigures:
    """``events`` messages at about ``rate`` per second; ``restarts`` web restarts among them."""
    from events.models import Event

    inbox_id, address, key = inbox
    figures = StreamFigures(events=events)
    follower = Follower(stack, key, inbox_id)
    follower.start()
    assert follower.connected.wait(30), follower.errors
    marks = {round(events * (n + 1) / (restarts + 1)) for n in range(restarts)}
    restarter: threading.Thread | None = None

    def restart(killed: threading.Event) -> None:
        began = time.monotonic()
        stack.web.stop(signal.SIGKILL)
        killed.set()  # the sender goes on while the web process is down
        stack.web.start()  # and waits for its port
        figures.restarts += 1
        figures.restart_seconds.append(round(time.monotonic() - began, 2))

    started = time.monotonic()
    smtp: smtplib.SMTP | None = None
    try:
        for seq in range(events):
            if seq in marks:  # one restart at a time, each with mail arriving while it is down
                if restarter is not None:
                    restarter.join(120)
                    # ... and the client back on the stream before the next kill
                    deadline = time.monotonic() + 30
                    while follower.connections <= figures.restarts and time.monotonic() < deadline:
                        time.sleep(0.05)
                killed = threading.Event()
                restarter = threading.Thread(target=restart, args=(killed,), daemon=True)
                restarter.start()
                killed.wait(30)
            blocked = seq % 10 == 9
            sender = f"s{seq}@{BLOCKED_DOMAIN}" if blocked else f"s{seq}@sender.example"
            raw = _message(address, f"event {seq}", sender)
            # Embedded: the SMTP server goes down with the web process; the sender waits for it.
            tries = 3 if stack.smtp is not stack.web else 300
            for attempt in range(tries):
                try:
                    if smtp is None:
                        smtp = smtplib.SMTP("127.0.0.1", stack.smtp_port, timeout=30)
                    smtp.sendmail(sender, [address], raw)
                    figures.accepted += 1
                    break
                except (smtplib.SMTPRecipientsRefused, smtplib.SMTPDataError) as exc:
                    if not blocked:
                        raise
                    figures.refused += 1
                    figures.refusals.add(str(getattr(exc, "smtp_code", "rcpt")))
                    break
                except (OSError, smtplib.SMTPException) as exc:  # smtpd is never killed here
                    figures.details.append(f"send {seq}: {exc!r}")
                    with contextlib.suppress(Exception):
                        smtp.close()  # type: ignore[union-attr]
                    smtp = None
                    if attempt == tries - 1:
                        raise
                    if stack.smtp is stack.web:
                        time.sleep(0.2)
            pause = started + (seq + 1) / rate - time.monotonic()
            if pause > 0:
                time.sleep(pause)
    finally:
        if smtp is not None:
            with contextlib.suppress(Exception):
                smtp.quit()
        if restarter is not None:
            restarter.join(120)
    from mail.realtime import STREAM_EVENTS

    log = list(
        Event.objects.filter(inbox_id=inbox_id, type__in=STREAM_EVENTS)
        .order_by("id")
        .values_list("id", "type", "data")
    )
    figures.logged = len(log)
    deadline = time.monotonic() + limit_s
    while len(follower.got) < len(log) and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(1.0)  # room for a late duplicate to show
    follower.halt.set()
    figures.seconds = round(time.monotonic() - started, 1)
    figures.connections = follower.connections
    _check_stream(log, list(follower.got), figures)
    if figures.details:
        figures.details += follower.errors[:10]
    return figures


def _check_stream(
    log: list[tuple[int, str, dict]], got: list[dict[str, Any]], figures: StreamFigures
) -> None:
    figures.received = len(got)
    ids = [int(event["id"]) for event in got]
    counts: dict[int, int] = {}
    for event_id in ids:
        counts[event_id] = counts.get(event_id, 0) + 1
    figures.duplicates = sum(n - 1 for n in counts.values())
    figures.out_of_order = sum(1 for a, b in itertools.pairwise(ids) if b <= a)
    by_id = {int(event["id"]): event for event in got}
    for event_id, event_type, data in log:
        event = by_id.get(event_id)
        if event is None:
            figures.missing += 1
            if figures.missing <= 20:
                figures.details.append(f"missing event {event_id} ({event_type})")
            continue
        payload = event["data"]
        if event_type == "email.received":
            expected = data["email"]["subject"]
            ok = event["event"] == event_type and payload["subject"] == expected
        else:
            ok = event["event"] == event_type and payload["from"] == data["from"]
        if not ok:
            figures.wrong_payload += 1
            figures.details.append(f"event {event_id}: {event}")
    unknown = set(counts) - {event_id for event_id, _, _ in log}
    if unknown:
        figures.details.append(f"events not in the log: {sorted(unknown)[:20]}")
        figures.wrong_payload += len(unknown)
    if figures.logged != figures.events:
        figures.details.append(f"the log holds {figures.logged} events for {figures.events} sent")


# --- both ---------------------------------------------------------------------------------------


@dataclass
class Figures:
    waiters: WaiterFigures
    stream: StreamFigures


def run(
    database_name: str,
    *,
    trials: int,
    events: int,
    lanes: int = 8,
    restarts: int = 5,
) -> Figures:
    """Both parts against ``database_name`` on one stack (its web process restarted 5 times by
    the stream part, which runs second)."""
    from django.db import connection

    run_id = uuid.uuid4().hex[:8]
    waiter_lanes, stream_inbox = setup(run_id, lanes)
    stack = Stack(database_name).start()
    try:
        waiters = run_waiters(stack, waiter_lanes, trials)
        stream = run_stream(stack, stream_inbox, events=events, restarts=restarts)
    finally:
        stack.stop()
        connection.close()
    return Figures(waiters, stream)
