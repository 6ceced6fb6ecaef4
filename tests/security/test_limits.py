"""Rate limits under concurrency (issue 11, matrix 8): ``RATE_LIMIT_PER_MINUTE`` holds for one key
hammered by 50 concurrent clients spread over two web processes (daphne, sharing the limit
through Redis), on the Django path (``GET /me``) and the raw ASGI one (``wait``) alike: accepted
answers ≤ limit × 1.02 within the window (in fact exactly the limit), every other answer 429
``rate_limited`` with a ``Retry-After`` that points at the end of the window. Meanwhile another
workspace's key, and another key of the same workspace, are never limited.

The limit is a fixed one-minute window (``apikeys.throttling``); the run is placed inside one
window (it waits for the next one when too little of the current is left), so every answer is
counted against the window it belongs to.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

from apikeys import services as key_services
from apikeys.audit import Actor
from apikeys.models import Workspace
from inboxes import services as inbox_services
from tests.factories import WorkspaceFactory
from tests.live import Stack, free_port
from tests.security.logged_process import LoggingToFile

LIMIT = 120  # requests per key per minute, for these web processes
CLIENTS = 50
ENOUGH = (2.5 * LIMIT, 10)  # requests of the hammered key, of the others, before the run stops
MARGIN = 3.0  # seconds before the window's end by which the run stops in any case
WINDOW = 60


@dataclass
class Answer:
    who: str  # "hammered", "other workspace", "same workspace"
    path: str
    sent: float
    received: float
    status: int
    code: str = ""
    retry_after: str | None = None


@pytest.fixture
def web_processes(transactional_db: None) -> Iterator[list[LoggingToFile]]:
    """Two web processes with a low limit, sharing Redis and the test database."""
    from django.db import connection

    processes = []
    for _ in range(2):
        template = Stack(connection.settings_dict["NAME"]).web
        port = free_port()
        argv = [str(port) if arg == str(template.port) else arg for arg in template.argv]
        env = {**template.env, "RATE_LIMIT_PER_MINUTE": str(LIMIT), "DB_POOL_TIMEOUT": "60"}
        processes.append(LoggingToFile(argv, port, env))
    try:
        for process in processes:
            process.start()
        yield processes
    finally:
        for process in processes:
            process.stop()


def _window_of(moment: float) -> int:
    return int(moment // WINDOW)


@pytest.mark.topology_production  # two web processes share the limit through Redis
def test_rate_limit_holds_under_50_clients_on_two_processes(
    web_processes: list[LoggingToFile], workspace: Workspace
) -> None:
    other_workspace = WorkspaceFactory(name="Someone else")
    hammered = key_services.api_key_create(
        workspace=workspace, name="hammered", scopes=["read"], by=Actor.system("tests")
    )
    sibling = key_services.api_key_create(
        workspace=workspace, name="sibling", scopes=["read"], by=Actor.system("tests")
    )
    other = key_services.api_key_create(
        workspace=other_workspace, name="other", scopes=["read"], by=Actor.system("tests")
    )
    inbox = inbox_services.inbox_create(workspace=workspace, local_part="limited")
    other_inbox = inbox_services.inbox_create(workspace=other_workspace, local_part="free")
    answers: list[Answer] = []
    lock = threading.Lock()
    stop = threading.Event()

    def client(who: str, plain: str, port: int, paths: list[str], pause: float) -> None:
        with httpx.Client(
            base_url=f"http://127.0.0.1:{port}/api/v1",
            headers={"Authorization": f"Bearer {plain}"},
            timeout=60,
        ) as http:
            n = 0
            while not stop.is_set():
                path = paths[n % len(paths)]
                sent = time.time()
                try:
                    response = http.get(path)
                    status = response.status_code
                    code = response.json()["error"]["code"] if status >= 400 else ""
                    retry_after = response.headers.get("retry-after")
                except httpx.HTTPError as exc:
                    status, code, retry_after = 0, repr(exc), None
                with lock:
                    answers.append(Answer(who, path, sent, time.time(), status, code, retry_after))
                n += 1
                time.sleep(pause)

    ports = [process.port for process in web_processes]
    mine = ["me", f"inboxes/{inbox.pk}/wait?timeout=0"]
    theirs = ["me", f"inboxes/{other_inbox.pk}/wait?timeout=0"]
    threads = [
        threading.Thread(
            target=client, args=("hammered", hammered.plain, ports[n % 2], mine, 0), daemon=True
        )
        for n in range(CLIENTS)
    ]
    threads += [
        threading.Thread(
            target=client,
            args=("other workspace", other.plain, ports[0], theirs, 0.1),
            daemon=True,
        ),
        threading.Thread(
            target=client, args=("same workspace", sibling.plain, ports[1], mine, 0.1), daemon=True
        ),
    ]
    for port in ports:  # a fresh process answers its first requests slowly: not in the run
        for _ in range(3):
            assert httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=60).status_code == 200
    left = WINDOW - time.time() % WINDOW
    if left < 15:  # too little of this window left: the run starts with the next one
        time.sleep(left + 0.2)
    started = time.time()
    window_end = (_window_of(started) + 1) * WINDOW
    for thread in threads:
        thread.start()
    while time.time() < window_end - MARGIN:
        time.sleep(0.1)
        with lock:
            hammered = sum(a.who == "hammered" for a in answers)
        if hammered >= ENOUGH[0] and len(answers) - hammered >= ENOUGH[1]:
            break
    stop.set()
    for thread in threads:
        thread.join(90)
    assert not any(thread.is_alive() for thread in threads), "a client hung"

    hammering = [a for a in answers if a.who == "hammered"]
    run = time.time() - started
    accepted = [a for a in hammering if a.status in (200, 204)]
    # an answer that came after the window's end may have been counted in the next window; the
    # check below counts it in this one (an upper bound), so the figure can only be too high
    straddling = [a for a in accepted if a.received >= window_end]
    limited = [a for a in hammering if a.status == 429]
    unexpected = [a for a in hammering if a.status not in (200, 204, 429)]
    bad_retry_after = [
        a
        for a in limited
        if a.code != "rate_limited"
        or a.retry_after is None
        or not a.retry_after.isdigit()
        or not 1 <= int(a.retry_after) <= WINDOW
        or not math.floor(window_end - a.received) - 2
        <= int(a.retry_after)
        <= math.ceil(window_end - a.sent) + 1
    ]
    bystanders = [a for a in answers if a.who != "hammered"]
    bystanders_refused = [a for a in bystanders if a.status not in (200, 204)]
    print(
        f"\nrate limit {LIMIT}/min, {CLIENTS} clients on 2 web processes, {run:.1f} s: "
        f"{len(hammering):,} requests, {len(accepted)} accepted "
        f"({sum(a.path.endswith('timeout=0') for a in accepted)} of them waits), "
        f"{len(limited):,} answered 429; bystander keys: {len(bystanders)} requests, "
        f"{len(bystanders_refused)} refused"
    )
    assert len(hammering) > LIMIT * 1.5, "too few requests to test the limit"
    assert unexpected == [], sorted({(a.status, a.code) for a in unexpected})
    assert all(_window_of(a.sent) == _window_of(started) for a in answers)
    assert len(accepted) <= LIMIT * 1.02, f"{len(accepted)} accepted ({len(straddling)} late)"
    assert len(accepted) >= LIMIT * 0.98, "the limit refused requests it should have served"
    assert bad_retry_after == [], [(a.code, a.retry_after) for a in bad_retry_after[:5]]
    assert {a.path for a in limited} == set(mine), "both paths are limited"
    assert len(bystanders) >= 10 and bystanders_refused == [], bystanders_refused[:5]
