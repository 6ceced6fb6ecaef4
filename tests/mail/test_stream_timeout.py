"""``GET /inboxes/{id}/stream?timeout=N`` ends the stream after N seconds (0: what was missed,
then the end), so scripts and CI jobs can follow an inbox for a bounded time."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from channels.testing import ApplicationCommunicator

from apikeys.models import Workspace
from config.asgi import application
from events.models import Event
from inboxes import services as inbox_services
from mail import pipeline
from tests.mail.messages import message


async def _stream(path: str, query: str, key: str) -> tuple[int, bytes, float]:
    scope = {
        "type": "http",
        "http_version": "1.1",
        "method": "GET",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query.encode(),
        "headers": [(b"authorization", f"Bearer {key}".encode()), (b"host", b"testserver")],
        "client": ("127.0.0.1", 1),
        "server": ("testserver", 80),
    }
    app = ApplicationCommunicator(application, scope)
    await app.send_input({"type": "http.request", "body": b""})
    start = await app.receive_output(10)
    body = b""
    started = time.monotonic()
    while True:
        chunk = await app.receive_output(10)
        body += chunk.get("body", b"")
        if not chunk.get("more_body"):
            break
    return start["status"], body, time.monotonic() - started


def test_timeout_zero_sends_what_was_missed_and_ends(
    transactional_db: None, workspace: Workspace, make_key: Any
) -> None:
    key = make_key(workspace)
    inbox = inbox_services.inbox_create(workspace=workspace, local_part="bounded")
    for subject in ("one", "two"):
        pipeline.receive_one(message(to=inbox.address, subject=subject), to=inbox.address)
    first = Event.objects.filter(inbox_id=inbox.pk).order_by("id").first()
    assert first is not None
    status, body, _ = asyncio.run(
        _stream(
            f"/api/v1/inboxes/{inbox.pk}/stream", f"last_event_id={first.id - 1}&timeout=0", key
        )
    )
    assert status == 200
    assert body.count(b"event: email.received") == 2 and b'"subject":"two"' in body


@pytest.mark.parametrize("seconds", [1])
def test_timeout_ends_a_quiet_stream(
    transactional_db: None, workspace: Workspace, make_key: Any, seconds: int
) -> None:
    key = make_key(workspace)
    inbox = inbox_services.inbox_create(workspace=workspace, local_part="quiet")
    status, body, elapsed = asyncio.run(
        _stream(f"/api/v1/inboxes/{inbox.pk}/stream", f"timeout={seconds}", key)
    )
    assert status == 200 and body == b": connected\n\n"
    assert elapsed >= seconds * 0.9
