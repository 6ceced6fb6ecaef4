"""The Python client (issue 27, item 1) against a live server — daphne and ``manage.py smtpd``
with PostgreSQL and Redis, or ``manage.py serve`` in embedded mode — with mail sent over SMTP:
every resource and helper, errors by code, a wait longer than one server wait, a stream that
resumes after the web process restarts, a 429 honoured, and a send retried after a dropped
connection that mails once."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from pigeonhole_client import (
    AddressTaken,
    AsyncPigeonhole,
    InsufficientScope,
    NotFound,
    Pigeonhole,
    RateLimited,
    Unauthorized,
    ValidationError,
    WaitTimeout,
)

from apikeys import services as key_services
from apikeys.audit import Actor
from apikeys.models import Workspace
from tests.client.conftest import send_mail
from tests.live import Stack

CODE_MAIL = "Your code is 482913.\n\nOr verify here: https://app.example/verify-email?token=abc\n"


def test_every_resource_and_helper(stack: Stack, ph: Pigeonhole, workspace: Workspace) -> None:
    with ph.inboxes.create(local_part="alice", tags=["client-test"]) as inbox:
        other = ph.inboxes.create(local_part="bob", tags=["client-test"])
        assert ph.inboxes.get(inbox.address).id == inbox.id
        # a page of one: the iterator follows next_cursor to the second inbox
        listed = {item.id for item in ph.inboxes.list(tag="client-test", limit=1)}
        assert listed == {inbox.id, other.id}
        assert inbox.update(name="Renamed").name == "Renamed"
        assert ph.inboxes.get(inbox.id).name == "Renamed"

        send_mail(stack, inbox.address, "Your code", CODE_MAIL, attachment=("a.txt", b"hello"))
        email = inbox.wait(from_="shop.example", subject="^your CODE$", timeout=30)
        assert (email.sender, email.subject) == ("noreply@shop.example", "Your code")
        assert inbox.wait_for_code(timeout=30) == "482913"
        link = inbox.wait_for_link(kind="verify", timeout=30)
        assert link == "https://app.example/verify-email?token=abc"

        assert [item.id for item in inbox.emails()] == [email.id]
        found = list(ph.emails.search(inbox=inbox.address, q="Your code"))
        assert [item.id for item in found] == [email.id]
        assert ph.emails.get(email.id, mark_read=True).read is True
        assert b"Subject: Your code" in ph.emails.raw(email.id)
        (attached,) = email.attachments
        assert ph.emails.attachment(email.id, attached["id"]) == b"hello"
        assert ph.emails.update(email.id, starred=True).starred is True

        label = ph.labels.create("receipts", "Receipts")
        assert label.key == "receipts"
        assert "receipts" in {item.key for item in ph.labels.list()}
        assert ph.labels.update("receipts", name="Paid").name == "Paid"
        assert "receipts" in {
            item["key"] for item in ph.emails.update(email.id, labels=["receipts"]).labels
        }
        ph.labels.delete("receipts")
        assert "receipts" not in {item.key for item in ph.labels.list()}

        hook = ph.webhooks.create("https://hooks.example.com/pigeonhole", events=["email.received"])
        assert hook.secret and hook.secret.startswith("whsec_")
        assert hook.id in {item.id for item in ph.webhooks.list()}
        assert ph.webhooks.update(hook.id, enabled=False).enabled is False
        assert isinstance(list(ph.webhooks.deliveries(hook.id)), list)
        ph.webhooks.delete(hook.id)

        made = ph.keys.create("ci", scopes=["read"])
        assert made.key and made.scopes == ["read"]
        assert made.id in {item.id for item in ph.keys.list()}
        assert ph.keys.update(made.id, require_approval=True).require_approval is True
        ph.keys.delete(made.id)
        with pytest.raises(Unauthorized) as unauthorized:
            Pigeonhole(stack.base_url, made.key).inboxes.get(inbox.id)
        assert unauthorized.value.status == 401

        sent = inbox.send(to=[other.address], subject="Hi Bob", text="Hello.")
        assert sent.status == "sent"
        assert ph.outbox.get(sent.id).id == sent.id
        assert sent.id in {item.id for item in ph.outbox.list()}
        assert other.wait(subject="Hi Bob", timeout=30).sender == inbox.address

        stats = ph.stats()
        assert stats["inboxes"] and stats["emails"]

        ph.emails.delete(email.id)
        with pytest.raises(NotFound) as missing:
            ph.emails.get(email.id)
        assert (missing.value.code, missing.value.status) == ("not_found", 404)

        with pytest.raises(ValidationError) as invalid:
            ph.inboxes.create(max_emails=0)
        assert [issue["path"] for issue in invalid.value.issues] == ["max_emails"]
        with pytest.raises(AddressTaken) as taken:  # a Conflict
            ph.inboxes.create(local_part="alice")
        assert (taken.value.code, taken.value.status) == ("address_taken", 409)

        reader = key_services.api_key_create(
            workspace=workspace, name="r", scopes=["read"], by=Actor.system("tests")
        ).plain
        with (
            Pigeonhole(stack.base_url, reader) as read_only,
            pytest.raises(InsufficientScope) as scope,
        ):
            read_only.inboxes.create()
        assert scope.value.code == "insufficient_scope"
        other.delete()
    with pytest.raises(NotFound):  # the context manager deleted it
        ph.inboxes.get(inbox.id)


def test_the_async_client(stack: Stack, api_key: str) -> None:
    async def scenario() -> None:
        async with AsyncPigeonhole(stack.base_url, api_key) as ph:
            async with await ph.inboxes.create(tags=["async"]) as inbox:
                await asyncio.to_thread(send_mail, stack, inbox.address, "Code", CODE_MAIL)
                assert await inbox.wait_for_code(timeout=30) == "482913"
                assert await inbox.wait_for_link(kind="verify", timeout=30)
                assert [item.id async for item in ph.inboxes.list(tag="async")] == [inbox.id]
                summaries = [item async for item in inbox.emails()]
                assert [item.subject for item in summaries] == ["Code"]
                async for event in inbox.stream(last_event_id="0", timeout=30):
                    assert (event.event, event.data["subject"]) == ("email.received", "Code")
                    break
            with pytest.raises(NotFound):
                await ph.inboxes.get(inbox.id)

    asyncio.run(scenario())


def test_a_wait_is_several_server_waits_with_the_same_since(stack: Stack, ph: Pigeonhole) -> None:
    """A wait longer than one server wait (capped at 1 s here instead of 120 s) asks again with
    the ``since`` it started with; the mail sent after the first empty answer is found."""
    ph.config.max_server_wait = 1
    inbox = ph.inboxes.create()
    waits: list[httpx.Request] = []

    def on_response(response: httpx.Response) -> None:
        if response.request.url.path.endswith("/wait"):
            waits.append(response.request)
            if response.status_code == 204 and len(waits) == 1:
                send_mail(stack, inbox.address, "Late")

    ph._http.event_hooks["response"].append(on_response)
    assert inbox.wait(subject="Late", timeout=60).subject == "Late"
    assert len(waits) >= 2
    assert {request.url.params["timeout"] for request in waits} == {"1"}
    assert len({request.url.params["since"] for request in waits}) == 1

    with pytest.raises(WaitTimeout):
        inbox.wait(subject="never", timeout=2)


def test_a_stream_resumes_after_the_web_process_restarts(stack: Stack, ph: Pigeonhole) -> None:
    """The client reopens a dropped stream with Last-Event-ID: the mail that arrived while the
    web process was down (PostgreSQL mode: smtpd is a separate process) comes next, once."""
    inbox = ph.inboxes.create()
    send_mail(stack, inbox.address, "first")
    events = inbox.stream(last_event_id="0", timeout=90)
    received = (event for event in events if event.event == "email.received")
    first = next(received)
    assert first.data["subject"] == "first" and first.id
    stack.web.restart()
    send_mail(stack, inbox.address, "second")
    second = next(received)
    assert second.data["subject"] == "second"
    assert int(second.id or 0) > int(first.id)
    events.close()


@pytest.fixture
def one_slot_stack(django_db_setup: None, django_db_blocker: Any) -> Iterator[Stack]:
    """A stack allowing one open stream or wait per key (a second is 429 with Retry-After)."""
    from django.db import connection

    running = Stack(connection.settings_dict["NAME"])
    running.env["MAX_OPEN_STREAMS_PER_KEY"] = "1"
    running.start()
    yield running
    running.stop()


def test_a_429_is_retried_after_retry_after(
    one_slot_stack: Stack, api_key: str, caplog: pytest.LogCaptureFixture
) -> None:
    stack = one_slot_stack
    with Pigeonhole(stack.base_url, api_key) as ph:
        inbox = ph.inboxes.create()
        send_mail(stack, inbox.address, "held")
        holder = httpx.Client(headers={"Authorization": f"Bearer {api_key}"}, timeout=30)
        opened = holder.stream("GET", f"{stack.base_url}/api/v1/inboxes/{inbox.id}/stream")
        held = opened.__enter__()  # holds the key's one slot until closed
        assert held.status_code == 200
        # Kept referenced: a line iterator collected as garbage closes the connection with it.
        lines = held.iter_lines()
        assert next(lines).startswith(":")

        with pytest.raises(RateLimited) as limited:
            Pigeonhole(stack.base_url, api_key, max_retries=0).inboxes.wait(inbox.id, timeout=5)
        assert limited.value.code == "rate_limited"
        assert limited.value.retry_after is not None and limited.value.retry_after >= 1

        told: list[str] = []

        def on_response(response: httpx.Response) -> None:
            if response.status_code == 429:
                told.append(response.headers["Retry-After"])
                opened.__exit__(None, None, None)  # the slot comes free before the retry

        ph._http.event_hooks["response"].append(on_response)
        with caplog.at_level(logging.WARNING, logger="pigeonhole_client"):
            assert inbox.wait(subject="held", timeout=30).subject == "held"
        holder.close()
    assert told and told[0] == str(int(limited.value.retry_after))
    honoured = [r.getMessage() for r in caplog.records if "Retry-After honoured" in r.getMessage()]
    assert honoured and f"in {float(told[0]):.1f} s" in honoured[0]


class DroppingProxy:
    """A TCP proxy on 127.0.0.1 to ``upstream``: the first connection's request is forwarded
    and answered upstream, and then the client's connection is closed without the answer (a
    dropped connection after the server acted); later connections are piped both ways."""

    def __init__(self, upstream: int) -> None:
        self.upstream = upstream
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.connections = 0
        self.dropped: list[bytes] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            first = self.connections == 1
            threading.Thread(target=self._handle, args=(conn, first), daemon=True).start()

    @staticmethod
    def _read_until(sock: socket.socket, marker: bytes, data: bytes = b"") -> bytes:
        while marker not in data:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
        return data

    def _handle(self, conn: socket.socket, first: bool) -> None:
        up = socket.create_connection(("127.0.0.1", self.upstream))
        if first:
            request = self._read_until(conn, b"\r\n\r\n")
            head, _, body = request.partition(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            while len(body) < length:
                body += conn.recv(65536)
            up.sendall(head + b"\r\n\r\n" + body)
            # The response's head comes once the view has run: the send happened.
            self.dropped.append(self._read_until(up, b"\r\n\r\n"))
            up.close()
            conn.close()
            return

        def pipe(src: socket.socket, dst: socket.socket) -> None:
            try:
                while chunk := src.recv(65536):
                    dst.sendall(chunk)
            except OSError:
                pass
            finally:
                for sock in (src, dst):
                    with contextlib.suppress(OSError):
                        sock.shutdown(socket.SHUT_RDWR)

        threading.Thread(target=pipe, args=(up, conn), daemon=True).start()
        pipe(conn, up)

    def close(self) -> None:
        self.listener.close()


def test_a_send_retried_after_a_dropped_connection_mails_once(
    stack: Stack, ph: Pigeonhole, api_key: str
) -> None:
    sender = ph.inboxes.create(local_part="sender")
    recipient = ph.inboxes.create(local_part="recipient")
    proxy = DroppingProxy(stack.http_port)
    try:
        with Pigeonhole(f"http://127.0.0.1:{proxy.port}", api_key) as proxied:
            item = proxied.outbox.send(
                sender.id, to=[recipient.address], subject="Once", text="Only once."
            )
    finally:
        proxy.close()
    assert proxy.dropped and proxy.dropped[0].startswith(b"HTTP/1.1 200")  # the first try sent
    assert proxy.connections == 2  # the retry
    assert [entry.id for entry in ph.outbox.list()] == [item.id]
    assert recipient.wait(subject="Once", timeout=30).subject == "Once"
    assert [email.subject for email in recipient.emails()] == ["Once"]
