"""Issue 23, item 9: a key holds at most ``MAX_OPEN_STREAMS_PER_KEY`` open streams and waits
together (wait, stream, and the outbox's ``?wait=``), across web processes.

Live: the web processes run with a cap of 3 (two processes sharing it through Redis in the
production configuration, the one ``serve`` process in embedded mode). The 4th concurrent one
answers 429 ``rate_limited`` with a message naming the limit, whichever process it reaches;
another key of the same workspace and another workspace's key are unaffected; once one closes, a
new one is accepted. The leases behind the slots expire when a process stops renewing them
(a crashed process), tested against Redis with a moved clock.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack

import httpx
import pytest

from apikeys import services as key_services
from apikeys import throttling
from apikeys.audit import Actor
from apikeys.gate import principal_for_key
from apikeys.models import Workspace
from config.api.errors import RateLimited
from inboxes import services as inbox_services
from outbox.models import OutboxItem
from tests.live import Process, Stack, embedded, free_port

CAP = 3


@pytest.fixture(scope="module")
def stack(django_db_setup: None, django_db_blocker) -> Iterator[tuple[Stack, list[int]]]:  # type: ignore[no-untyped-def]
    """The stack with a cap of 3, and the ports of its web processes (two in production)."""
    from django.db import connection

    running = Stack(connection.settings_dict["NAME"])
    running.env["MAX_OPEN_STREAMS_PER_KEY"] = str(CAP)  # the processes' shared environment
    running.start()
    ports = [running.http_port]
    second: Process | None = None
    if not embedded():
        port = free_port()
        argv = [str(port) if arg == str(running.http_port) else arg for arg in running.web.argv]
        second = Process(argv, port, running.env).start()
        ports.append(port)
    yield running, ports
    if second is not None:
        second.stop()
    running.stop()


def _client(port: int, key: str) -> httpx.Client:
    return httpx.Client(
        base_url=f"http://127.0.0.1:{port}/api/v1",
        headers={"Authorization": f"Bearer {key}"},
        timeout=httpx.Timeout(30, connect=5),
    )


def _open_stream(exits: ExitStack, port: int, key: str, inbox_id: str) -> httpx.Response:
    """A stream held open until ``exits`` closes it (200 once its headers arrived)."""
    client = exits.enter_context(_client(port, key))
    response = exits.enter_context(client.stream("GET", f"inboxes/{inbox_id}/stream"))
    return response


def _stream_refused(client: httpx.Client, inbox_id: str) -> None:
    """A stream that must be refused; one that is accepted is closed at once (not followed)."""
    with client.stream("GET", f"inboxes/{inbox_id}/stream") as response:
        assert response.status_code == 429, "the stream was accepted"
        response.read()
        _refused(response)


def _refused(response: httpx.Response) -> None:
    assert response.status_code == 429, response.text
    error = response.json()["error"]
    assert error["code"] == "rate_limited"
    assert "MAX_OPEN_STREAMS_PER_KEY" in error["message"] and "at most 3" in error["message"]
    assert response.headers["retry-after"].isdigit()


def test_open_streams_and_waits_per_key_are_capped(
    stack: tuple[Stack, list[int]],
    transactional_db: None,
    workspace: Workspace,
    other_workspace: Workspace,
) -> None:
    _, ports = stack
    inbox = inbox_services.inbox_create(workspace=workspace, local_part="capped")
    other_inbox = inbox_services.inbox_create(workspace=other_workspace, local_part="free")
    key = key_services.api_key_create(
        workspace=workspace, name="k", scopes=["read", "send"], by=Actor.system("tests")
    ).plain
    sibling = key_services.api_key_create(
        workspace=workspace, name="s", scopes=["read"], by=Actor.system("tests")
    ).plain
    other = key_services.api_key_create(
        workspace=other_workspace, name="o", scopes=["read"], by=Actor.system("tests")
    ).plain
    first, last = ports[0], ports[-1]
    with ExitStack() as held:
        # Two streams (on the first process) and a wait (on the last) hold the key's 3 slots.
        for _ in range(2):
            assert _open_stream(held, first, key, inbox.pk).status_code == 200
        parked: list[httpx.Response] = []
        waiter = threading.Thread(
            target=lambda: parked.append(
                _client(last, key).get(f"inboxes/{inbox.pk}/wait", params={"timeout": 3})
            )
        )
        waiter.start()
        time.sleep(0.5)  # the wait is parked
        assert waiter.is_alive()
        for port in ports:  # the 4th, of any kind, on any process
            with _client(port, key) as client:
                _stream_refused(client, inbox.pk)
                _refused(client.get(f"inboxes/{inbox.pk}/wait", params={"timeout": 0}))
                _refused(client.get("outbox/out_doesnotexist", params={"wait": 5}))
                send = {"to": ["x@external.test"], "subject": "s", "text": "t"}
                _refused(client.post(f"inboxes/{inbox.pk}/send", params={"wait": 5}, json=send))
                # Without ?wait= the same requests are not long-lived and not counted.
                assert client.get("outbox/out_doesnotexist").status_code == 404
                assert client.get(f"inboxes/{inbox.pk}").status_code == 200
        assert not OutboxItem.objects.unscoped().filter(workspace=workspace).exists()  # not sent
        # Other keys have slots of their own.
        for plain, target in ((sibling, inbox.pk), (other, other_inbox.pk)):
            with _client(last, plain) as client:
                assert (
                    client.get(f"inboxes/{target}/wait", params={"timeout": 0}).status_code == 204
                )
            assert _open_stream(held, first, plain, target).status_code == 200
        # The wait ends at its timeout and gives its slot back.
        waiter.join(10)
        assert parked and parked[0].status_code == 204
        with _client(last, key) as client:
            assert client.get(f"inboxes/{inbox.pk}/wait", params={"timeout": 0}).status_code == 204
            holding = _open_stream(held, last, key, inbox.pk)  # the 3rd slot again
            assert holding.status_code == 200
            _refused(client.get(f"inboxes/{inbox.pk}/wait", params={"timeout": 0}))
    # Every stream closed by the client: the slots come back (the server notices a closed
    # connection within a moment, so allow a few tries).
    with _client(first, key) as client:
        deadline = time.monotonic() + 10
        opened: list[int] = []
        while time.monotonic() < deadline and len(opened) < CAP:
            with ExitStack() as again:
                opened = []
                for _ in range(CAP):
                    status = _open_stream(again, first, key, inbox.pk).status_code
                    if status != 200:
                        break
                    opened.append(status)
            if len(opened) < CAP:
                time.sleep(0.2)
        assert len(opened) == CAP


@pytest.mark.topology_production  # the leases live in Redis; embedded mode is one process
def test_a_dead_process_slots_come_free_after_the_lease(
    transactional_db: None, workspace: Workspace, settings
) -> None:  # type: ignore[no-untyped-def]
    settings.MAX_OPEN_STREAMS_PER_KEY = CAP
    plain = key_services.api_key_create(
        workspace=workspace, name="k", scopes=["read"], by=Actor.system("tests")
    ).plain
    principal = principal_for_key(plain)
    now = time.time()
    # Slots taken and never given back or renewed: a process that died holding them.
    leases = [throttling.open_slot(principal, now=now) for _ in range(CAP)]
    try:
        with pytest.raises(RateLimited):
            throttling.open_slot(principal, now=now + throttling.LEASE_SECONDS - 1)
        later = throttling.open_slot(principal, now=now + throttling.LEASE_SECONDS + 1)
        throttling.close_slot(later)
    finally:
        for lease in leases:
            throttling.close_slot(lease)


@pytest.mark.topology_production  # the leases live in Redis; embedded mode is one process
def test_renewal_keeps_held_slots_and_not_given_back_ones(
    transactional_db: None, workspace: Workspace, other_workspace: Workspace, settings
) -> None:  # type: ignore[no-untyped-def]
    """A process renews every slot it holds, of every credential, past the lease, and a slot
    given back meanwhile stays given back (the cap counts only live waits and streams)."""
    settings.MAX_OPEN_STREAMS_PER_KEY = CAP
    principals = [
        principal_for_key(
            key_services.api_key_create(
                workspace=where, name="k", scopes=["read"], by=Actor.system("tests")
            ).plain
        )
        for where in (workspace, other_workspace)
    ]
    now = time.time()
    leases = [throttling.open_slot(p, now=now) for p in principals for _ in range(2)]
    given_back = leases.pop()
    throttling.close_slot(given_back)
    taken: list[throttling.Lease] = []
    more: list[throttling.Lease] = []
    try:
        assert throttling._slots.renew(now=now + 30) >= len(leases)
        # Past the first lease, before the renewed one: the renewed slots still count.
        later = now + throttling.LEASE_SECONDS + 10
        taken += [throttling.open_slot(principals[0], now=later) for _ in range(CAP - 2)]
        with pytest.raises(RateLimited):
            throttling.open_slot(principals[0], now=later)
        # The other credential gave one back: one more than the renewed one fits beside it.
        more += [throttling.open_slot(principals[1], now=later) for _ in range(CAP - 1)]
        with pytest.raises(RateLimited):
            throttling.open_slot(principals[1], now=later)
    finally:
        for lease in [*leases, *taken, *more]:
            throttling.close_slot(lease)
