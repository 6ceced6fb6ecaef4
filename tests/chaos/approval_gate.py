"""Scenario 5 of the fault issue: approval is a hard gate.

Two workspaces send through the real HTTP API of a daphne process: one whose key was created
with ``require_approval``, one whose workspace requires approval. Outbound delivery is done by
real Celery worker processes, one of which is ``kill -9``ed every 3 s and started again (from
the first task on: the sends need no worker), to a real SMTP sink on 127.0.0.1 (``EMAIL_URL``
points at it); the sink notes when each message arrived. The items are split by their index into four fates:

- **expire** (i % 10 == 0): sent first; then the expiry service runs with its clock moved
  ``OUTBOX_APPROVAL_HOURS`` past the moment this batch was done, so exactly these expire; an
  approval afterwards must answer ``409 invalid_state``;
- **reject** (i % 10 in 1, 2): rejected with a note; a late approval must answer ``409``;
- **pending** (i % 10 == 3): never decided;
- **approve** (the rest): 10 concurrent approve requests, each with its own edits of subject and
  text, over real HTTP from the dashboard sessions of the workspace's owner and an admin (five
  each, with their CSRF tokens): exactly one ``200`` and nine ``409 invalid_state``; the
  winner's edits are what must arrive.

While items wait, and again after the decisions, a ``outbox.deliver`` task is queued by hand for
every item that is not approved (a forged or stale task must not open the gate). A sweeper does
what the beat schedule does (re-queues due deliveries the broker lost with a killed worker).
The web process runs with ``RATE_LIMIT_PER_MINUTE`` raised: rate limits are not under test.

Figures from the sink's own bytes: messages of items that were never approved (``leaked``),
messages that arrived before their item's approvals were sent (``early``), approved items that
arrived zero times (``missing``) or more than once, and approved items whose bytes at the sink
are not the winner's edited subject and text or differ from the stored copy
(``content_mismatches``). A second copy is *explained* when the item records an interrupted
hand-over — a worker killed after it sent ``DATA`` and before it recorded the relay's ``250``,
where no SMTP client can know whether the relay kept the message and sends again rather than
lose it (RFC 1047) — and counted in ``duplicates`` otherwise.
"""

from __future__ import annotations

import contextlib
import email
import random
import signal
import subprocess
import threading
import time
import uuid
from collections import Counter, defaultdict, deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import timedelta
from email import policy
from typing import Any

import httpx
from aiosmtpd.controller import Controller

from apikeys.audit import Actor
from tests.live import CELERY_WORKER, ROOT, Stack, drain, free_port

PASSWORD = "chaos-gate-password-5"
FATES = ("expire", "reject", "reject", "pending", *["approve"] * 6)
APPROVERS = 10  # concurrent approve requests per approved item
SINK_DOMAIN = "sink.chaos.example"
_tally = threading.Lock()  # figures are counted from many request threads


def fate(index: int) -> str:
    return FATES[index % len(FATES)]


@dataclass
class Arrival:
    at: float  # time.monotonic() of the test process
    mail_from: str
    rcpts: list[str]
    raw: bytes


class Sink:
    """A real SMTP server on 127.0.0.1 standing in for the relay; notes what arrived and when."""

    def __init__(self) -> None:
        self.port = free_port()
        self.arrivals: list[Arrival] = []
        self._lock = threading.Lock()
        self._controller = Controller(self, hostname="127.0.0.1", port=self.port)

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        arrival = Arrival(
            time.monotonic(), envelope.mail_from, list(envelope.rcpt_tos), envelope.original_content
        )
        with self._lock:
            self.arrivals.append(arrival)
        return "250 OK"

    def start(self) -> Sink:
        self._controller.start()
        return self

    def stop(self) -> None:
        self._controller.stop()

    def snapshot(self) -> list[Arrival]:
        with self._lock:
            return list(self.arrivals)


class Workers(threading.Thread):
    """Celery worker processes; while the chaos runs, one of them (at random) is ``kill -9``ed
    every ``period`` seconds and started again."""

    def __init__(self, env: dict[str, str], count: int, period: float) -> None:
        super().__init__(daemon=True)
        self.env, self.period = env, period
        self.procs: list[subprocess.Popen | None] = [None] * count
        self.logs: deque[str] = deque(maxlen=300)
        self.kills = 0
        self.killed_at: list[float] = []  # time.monotonic() of each kill
        self._halt = threading.Event()
        for slot in range(count):
            self._spawn(slot)

    def _spawn(self, slot: int) -> None:
        name = f"gate{slot}-{uuid.uuid4().hex[:6]}@%h"
        proc = subprocess.Popen(
            [*CELERY_WORKER, "-n", name],
            cwd=ROOT,
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        assert proc.stderr is not None
        drain(proc.stderr, self.logs)
        self.procs[slot] = proc

    def run(self) -> None:
        while not self._halt.wait(self.period):
            slot = random.randrange(len(self.procs))
            proc = self.procs[slot]
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                self.killed_at.append(time.monotonic())
                proc.wait(10)
                self.kills += 1
            self._spawn(slot)

    def wait_for_kills(self, count: int, limit: float) -> None:
        """Lets the chaos run on until it has killed ``count`` workers (or ``limit`` seconds
        passed): on a quiet machine the decisions can finish before the first kill."""
        deadline = time.monotonic() + limit
        while self.kills < count and time.monotonic() < deadline:
            time.sleep(0.1)

    def calm(self) -> None:
        """Stops the chaos; every worker is running afterwards."""
        self._halt.set()
        self.join(30)
        for slot, proc in enumerate(self.procs):
            if proc is None or proc.poll() is not None:
                self._spawn(slot)

    def shutdown(self) -> None:
        self._halt.set()
        for proc in self.procs:
            if proc is not None and proc.poll() is None:
                proc.terminate()
        for proc in self.procs:
            if proc is not None:
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(10)


class Sweeper(threading.Thread):
    """What the beat schedule's ``outbox.sweep`` does, every ``period`` seconds."""

    def __init__(self, period: float) -> None:
        super().__init__(daemon=True)
        self.period = period
        self._halt = threading.Event()
        self.requeued = 0

    def run(self) -> None:
        from django.db import connection

        from outbox import services

        try:
            while not self._halt.wait(self.period):
                self.requeued += services.sweep()
        finally:
            connection.close()

    def stop(self) -> None:
        self._halt.set()
        if self.ident is not None:
            self.join(30)


@dataclass
class Item:
    kind: str  # "key" (a require_approval key) or "workspace" (the workspace requires approval)
    index: int
    fate: str
    id: str = ""
    decided_at: float = 0.0  # time.monotonic() just before its approve requests went out
    winner: int | None = None  # which of the concurrent approve requests won
    subject: str = ""  # the winner's edits
    text: str = ""


@dataclass
class Figures:
    sends: int
    by_key: int
    by_workspace: int
    fates: dict[str, int]
    approve_requests: int = 0
    approve_200: int = 0
    approve_409: int = 0
    late_decisions: int = 0  # approvals of rejected or expired items
    late_409: int = 0
    forged_tasks: int = 0
    held_while_pending: int = 0  # sink messages while everything was pending (must be 0)
    swept_while_pending: int = 0  # items the sweeper queued while everything was pending
    sink_messages: int = 0
    delivered_once: int = 0
    delivered_again: int = 0  # approved items at the sink more than once
    missing: int = 0
    duplicates: int = 0  # copies beyond the first that no interrupted hand-over explains
    explained_duplicates: int = 0  # a worker killed between DATA and the record of its 250
    interrupted_handovers: int = 0
    leaked: int = 0  # messages of items never approved
    early: int = 0  # messages that arrived before their item's approvals were sent
    content_mismatches: int = 0
    unknown_messages: int = 0
    wrong_status: int = 0
    kills: int = 0
    requeued_by_sweeper: int = 0
    seconds: dict[str, float] = field(default_factory=dict)
    details: list[str] = field(default_factory=list)


def _setup(run_id: str) -> dict[str, dict[str, str]]:
    """Both workspaces with an owner, an admin, a sending key and an inbox."""
    from apikeys import services as keys
    from apikeys.models import Role
    from inboxes import services as inboxes

    parties: dict[str, dict[str, str]] = {}
    for kind, workspace_approval, key_approval in (
        ("key", False, True),
        ("workspace", True, False),
    ):
        workspace = keys.workspace_get_or_create(
            name=f"gate {kind} {run_id}", require_approval=workspace_approval
        )
        owner = f"owner-{kind}-{run_id}@chaos.example"
        admin = f"admin-{kind}-{run_id}@chaos.example"
        for person, role in ((owner, Role.OWNER), (admin, Role.ADMIN)):
            keys.membership_set(
                workspace=workspace,
                user=keys.user_get_or_create(email=person, password=PASSWORD),
                role=role,
                by=Actor.system("tests"),
            )
        key = keys.api_key_create(
            workspace=workspace,
            name=f"agent {kind}",
            scopes=("read", "send"),
            require_approval=key_approval,
            by=Actor.system("tests"),
        ).plain
        inbox = inboxes.inbox_create(
            workspace=workspace, local_part=f"agent-{kind}-{run_id}", ttl_minutes=None
        )
        parties[kind] = {"owner": owner, "admin": admin, "key": key, "inbox": inbox.pk}
    return parties


def session(base_url: str, owner: str) -> httpx.Client:
    """An owner's dashboard session, signed in through ``/login/``, sending its CSRF token."""
    client = httpx.Client(
        base_url=base_url,
        timeout=httpx.Timeout(60, connect=5),
        limits=httpx.Limits(max_connections=100, max_keepalive_connections=100),
    )
    client.get("/login/").raise_for_status()
    response = client.post(
        "/login/",
        data={
            "username": owner,
            "password": PASSWORD,
            "csrfmiddlewaretoken": client.cookies["csrftoken"],
        },
    )
    assert response.status_code == 302 and "sessionid" in client.cookies, response.text[:500]
    client.headers["X-CSRFToken"] = client.cookies["csrftoken"]  # rotated at sign-in
    return client


def _send(client: httpx.Client, inbox_id: str, item: Item, run_id: str) -> None:
    body = {
        "to": [f"{item.kind}-{item.index}@{SINK_DOMAIN}"],
        "subject": f"draft {item.kind} {item.index}",
        "text": f"Draft {item.index} written by the agent.\n",
        "reason": f"chaos {item.kind} {item.index}",
    }
    headers = {"Idempotency-Key": f"{run_id}-{item.kind}-{item.index}"}
    for attempt in range(5):
        try:
            response = client.post(f"inboxes/{inbox_id}/send", json=body, headers=headers)
            break
        except httpx.TransportError:
            if attempt == 4:
                raise
            time.sleep(0.5)
    assert response.status_code == 202, response.text[:500]
    assert response.json()["status"] == "pending", response.text[:500]
    item.id = response.json()["id"]


def _edits(item: Item, request: int) -> tuple[str, str]:
    subject = f"approved {item.kind} {item.index} by request {request} ✓"
    text = (
        f"Edited by request {request} of the approver.\n"
        f"Item {item.kind} {item.index}: ünïcödé survives the relay.\n"
    )
    return subject, text


def _approve_concurrently(approvers: list[httpx.Client], item: Item, figures: Figures) -> None:
    barrier = threading.Barrier(APPROVERS)
    answers: list[tuple[int, int, str]] = []
    lock = threading.Lock()

    def approve(request: int) -> None:
        subject, text = _edits(item, request)
        barrier.wait(30)
        response = approvers[request % len(approvers)].post(
            f"/api/v1/outbox/{item.id}/decision",
            json={"decision": "approve", "subject": subject, "text": text, "note": f"r{request}"},
        )
        code = ""
        if response.status_code != 200:
            with contextlib.suppress(ValueError, KeyError, TypeError):
                code = response.json()["error"]["code"]
        with lock:
            answers.append((request, response.status_code, code))

    threads = [threading.Thread(target=approve, args=(r,)) for r in range(APPROVERS)]
    item.decided_at = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    won = [request for request, status, _ in answers if status == 200]
    lost = [a for a in answers if a[1] == 409 and a[2] == "invalid_state"]
    with _tally:
        figures.approve_requests += len(answers)
        figures.approve_200 += len(won)
        figures.approve_409 += len(lost)
        if len(won) != 1 or len(lost) != APPROVERS - 1:
            figures.details.append(f"{item.id}: approve answers {sorted(answers)}")
    if won:
        item.winner = won[0]
        item.subject, item.text = _edits(item, won[0])


def _reject(client: httpx.Client, item: Item, figures: Figures) -> None:
    response = client.post(
        f"/api/v1/outbox/{item.id}/decision", json={"decision": "reject", "note": "not this one"}
    )
    if response.status_code != 200 or response.json()["status"] != "rejected":
        with _tally:
            figures.details.append(f"{item.id}: reject answered {response.status_code}")
    _late_approval(client, item, figures)


def _late_approval(client: httpx.Client, item: Item, figures: Figures) -> None:
    response = client.post(f"/api/v1/outbox/{item.id}/decision", json={"decision": "approve"})
    refused = response.status_code == 409 and response.json()["error"]["code"] == "invalid_state"
    with _tally:
        figures.late_decisions += 1
        figures.late_409 += refused
        if not refused:
            figures.details.append(f"{item.id} ({item.fate}): late approval {response.status_code}")


def _forge_tasks(items: list[Item]) -> int:
    """Queues a delivery task for every item that is not approved: it must not open the gate."""
    from outbox.tasks import deliver

    forged = [item for item in items if item.fate != "approve"]
    for item in forged:
        deliver.apply_async((item.id,))
    return len(forged)


def _message_id(raw: bytes) -> str:
    parsed = email.message_from_bytes(raw, policy=policy.default)
    return str(parsed["Message-ID"] or "").strip("<>")


def _check(
    items: list[Item], arrivals: list[Arrival], figures: Figures, killed_at: list[float]
) -> None:
    from outbox.models import DeliveryState, OutboxItem, Status

    rows = {
        row.pk: row
        for row in OutboxItem.objects.filter(pk__in=[i.id for i in items]).only(
            "id", "message_id", "raw", "status", "delivery", "interrupted_handovers"
        )
    }
    by_message_id = {rows[i.id].message_id: i for i in items}
    copies: dict[str, list[Arrival]] = defaultdict(list)
    for arrival in arrivals:
        item = by_message_id.get(_message_id(arrival.raw))
        if item is None:
            figures.unknown_messages += 1
            continue
        copies[item.id].append(arrival)
    figures.sink_messages = len(arrivals)
    expected = {
        "approve": (Status.SENT, DeliveryState.DONE),
        "reject": (Status.REJECTED, DeliveryState.WAITING),
        "expire": (Status.EXPIRED, DeliveryState.WAITING),
        "pending": (Status.PENDING, DeliveryState.WAITING),
    }
    for item in items:
        row, got = rows[item.id], copies.get(item.id, [])
        if (row.status, row.delivery) != expected[item.fate]:
            figures.wrong_status += 1
            figures.details.append(f"{item.id} ({item.fate}): {row.status}/{row.delivery}")
        if item.fate != "approve":
            if got:
                figures.leaked += len(got)
                figures.details.append(f"{item.id} ({item.fate}) reached the sink {len(got)}×")
            continue
        if not got:
            figures.missing += 1
            figures.details.append(f"{item.id}: approved, never reached the sink")
            continue
        figures.interrupted_handovers += row.interrupted_handovers
        if len(got) > 1:
            first = got[0].at
            after = [round((k - first) * 1000, 1) for k in killed_at if first <= k <= got[-1].at]
            if row.interrupted_handovers >= len(got) - 1:
                figures.explained_duplicates += len(got) - 1
            else:
                figures.duplicates += len(got) - 1
            figures.delivered_again += 1
            figures.details.append(
                f"{item.id}: reached the sink {len(got)}× after {row.interrupted_handovers} "
                f"interrupted hand-overs (kills after the first copy, ms: {after})"
            )
        else:
            figures.delivered_once += 1
        for arrival in got:
            if arrival.at < item.decided_at:
                figures.early += 1
                figures.details.append(f"{item.id}: arrived before its approval")
            if not _carries_edits(arrival, item, bytes(row.raw)):
                figures.content_mismatches += 1
                figures.details.append(f"{item.id}: the sink's bytes are not the edited message")


def _carries_edits(arrival: Arrival, item: Item, stored: bytes) -> bool:
    parsed = email.message_from_bytes(arrival.raw, policy=policy.default)
    text = parsed.get_body(("plain",))
    return (
        arrival.raw.rstrip(b"\r\n") == stored.rstrip(b"\r\n")
        and str(parsed["Subject"]) == item.subject
        and text is not None
        and text.get_content().replace("\r\n", "\n") == item.text
        and arrival.rcpts == [f"{item.kind}-{item.index}@{SINK_DOMAIN}"]
        and b"draft " not in arrival.raw.lower()  # nothing of the agent's draft subject or text
    )


def run(
    database_name: str,
    *,
    per_kind: int,
    workers: int = 3,
    kill_every: float = 3.0,
    lease_seconds: int = 8,
    sweep_every: float = 5.0,
    parallel_items: int = 4,
    stall_limit: float = 60.0,
    min_kills: int = 3,
) -> Figures:
    """Runs the scenario against ``database_name`` with ``per_kind`` sends of each kind.

    The chaos goes on after the decisions until ``min_kills`` workers were killed (the queued
    deliveries are moving meanwhile). After the chaos the workers drain what the approvals
    queued until every approved item arrived and its delivery is recorded done, or nothing
    moved for ``stall_limit`` seconds.
    """
    from django.conf import settings
    from django.db import connection
    from django.utils import timezone

    from config.celery import app
    from outbox import services
    from outbox.models import DeliveryState, OutboxItem

    run_id = uuid.uuid4().hex[:8]
    queue = f"chaos-gate-{run_id}"
    parties = _setup(run_id)
    items = [Item(kind, n, fate(n)) for kind in ("key", "workspace") for n in range(per_kind)]
    figures = Figures(
        sends=len(items),
        by_key=per_kind,
        by_workspace=per_kind,
        fates=dict(Counter(item.fate for item in items)),
    )
    sink = Sink().start()
    stack = Stack(database_name)
    extra = {
        "CELERY_TASK_ALWAYS_EAGER": "false",
        "CELERY_QUEUE": queue,
        "EMAIL_URL": f"smtp://127.0.0.1:{sink.port}",
        "EMAIL_TIMEOUT": "3",
        "OUTBOX_LEASE_SECONDS": str(lease_seconds),
        "RATE_LIMIT_PER_MINUTE": "1000000",
    }
    stack.web.env.update(extra)
    previous = (app.conf.task_always_eager, app.conf.task_default_queue)
    app.conf.task_always_eager, app.conf.task_default_queue = False, queue
    pool = Workers(dict(stack.web.env), workers, kill_every)
    sweeper = Sweeper(sweep_every)
    clients: list[httpx.Client] = []
    started = time.monotonic()
    try:
        stack.web.start()
        sweeper.start()
        agents = {kind: stack.client(party["key"]) for kind, party in parties.items()}
        approvers = {
            kind: [session(stack.base_url, party[who]) for who in ("owner", "admin")]
            for kind, party in parties.items()
        }
        clients += [*agents.values(), *(c for pair in approvers.values() for c in pair)]

        def send(item: Item) -> None:
            _send(agents[item.kind], parties[item.kind]["inbox"], item, run_id)

        # The batch that will expire goes first; the clock of the expiry is moved past it.
        with ThreadPoolExecutor(8) as executor:
            list(executor.map(send, [i for i in items if i.fate == "expire"]))
            time.sleep(0.05)
            expiry_line = timezone.now()
            time.sleep(0.05)
            list(executor.map(send, [i for i in items if i.fate != "expire"]))
        figures.seconds["started and sent"] = round(time.monotonic() - started, 1)
        connection.close()

        # The chaos starts (the sends need no worker). Everything is pending: forged tasks
        # (taken by the workers) and the sweeper must not move anything.
        pool.start()
        figures.forged_tasks += _forge_tasks(items)
        _until_taken(queue, limit=60)
        figures.swept_while_pending = services.sweep()
        time.sleep(1.0)
        figures.held_while_pending = len(sink.snapshot())
        figures.seconds["held"] = round(time.monotonic() - started, 1)

        moved = expiry_line + timedelta(hours=settings.OUTBOX_APPROVAL_HOURS)
        expired = 0
        while batch := services.expire_pending(now=moved):
            expired += batch
        if expired != figures.fates.get("expire", 0):
            figures.details.append(f"the expiry service expired {expired} items")

        work = [i for i in items if i.fate in ("approve", "reject", "expire")]
        random.Random(run_id).shuffle(work)

        def decide(item: Item) -> None:
            owner, admin = approvers[item.kind]
            if item.fate == "approve":
                _approve_concurrently([owner, admin], item, figures)
            elif item.fate == "reject":
                _reject(admin, item, figures)
            else:
                _late_approval(owner, item, figures)

        with ThreadPoolExecutor(parallel_items) as executor:
            list(executor.map(decide, work))
        figures.seconds["decided"] = round(time.monotonic() - started, 1)
        figures.forged_tasks += _forge_tasks(items)

        # The chaos stops; the workers (and the sweeper) finish what the approvals queued. Once
        # every approved item's delivery is recorded done, no attempt can follow (a claim needs
        # a queued or retrying delivery): a late duplicate could only come before that.
        pool.wait_for_kills(min_kills, limit=min_kills * kill_every + 30)
        pool.calm()
        figures.kills = pool.kills
        approved = OutboxItem.objects.filter(pk__in=[i.id for i in items if i.fate == "approve"])
        wanted = set(approved.values_list("message_id", flat=True))
        progress = (-1, time.monotonic())
        while time.monotonic() - progress[1] < stall_limit:
            arrivals = sink.snapshot()
            done = approved.filter(delivery=DeliveryState.DONE).count()
            if done == len(wanted) and wanted <= {_message_id(a.raw) for a in arrivals}:
                break
            if len(arrivals) + done > progress[0]:
                progress = (len(arrivals) + done, time.monotonic())
            time.sleep(0.5)
        time.sleep(1.0)  # the sink's last answers
        figures.seconds["drained"] = round(time.monotonic() - started, 1)
        sweeper.stop()
        figures.requeued_by_sweeper = sweeper.requeued
        _check(items, sink.snapshot(), figures, pool.killed_at)
    finally:
        sweeper.stop()
        pool.shutdown()
        for client in clients:
            client.close()
        stack.stop()
        sink.stop()
        app.conf.task_always_eager, app.conf.task_default_queue = previous
        connection.close()
        with contextlib.suppress(Exception):
            _purge(queue)
    figures.seconds["total"] = round(time.monotonic() - started, 1)
    if figures.details and pool.logs:
        figures.details += [f"worker: {line}" for line in list(pool.logs)[-10:]]
    return figures


def _until_taken(queue: str, *, limit: float) -> None:
    """Returns once the broker holds no task of ``queue`` (the workers took them all)."""
    from config.celery import app

    deadline = time.monotonic() + limit
    with app.connection_for_write() as conn:
        client = conn.default_channel.client
        while client.llen(queue) and time.monotonic() < deadline:
            time.sleep(0.2)


def _purge(queue: str) -> None:
    """Drops the run's queue from the broker (forged tasks nobody needs any more)."""
    from config.celery import app

    with app.connection_for_write() as conn:
        conn.default_channel.queue_purge(queue)
        conn.default_channel.queue_delete(queue)
