"""A worker killed while it hands a message to the relay.

A real Celery worker delivers to a real SMTP sink on 127.0.0.1 that ``kill -9``s the worker at a
chosen step of the SMTP conversation; another worker finishes the item once its lease is over
(the test re-queues it, as the sweeper would once its grace is over):

- killed at ``MAIL FROM``: the message never went out; it is sent once, and the item does not
  claim that it may arrive twice;
- killed after the relay stored the message but before it answered ``250``: nobody can know
  whether the relay kept it, so it is sent again (SMTP's rule: a duplicate rather than a loss,
  RFC 1047) and the item says so in ``error`` and counts the interrupted hand-over;
- killed at ``QUIT``, after the relay's ``250``: the outcome was recorded before ``QUIT``, so it
  is not sent again.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from aiosmtpd.controller import Controller

from apikeys.models import Workspace
from inboxes import services as inbox_services
from outbox import services
from outbox.models import OutboxItem
from tests.conftest import Api
from tests.live import CELERY_WORKER, ROOT, child_env, free_port

pytestmark = pytest.mark.django_db(transaction=True)


class KillingSink:
    """An SMTP sink that SIGKILLs ``victim`` when the conversation reaches ``kill_at``."""

    def __init__(self) -> None:
        self.port = free_port()
        self.received: list[bytes] = []
        self.kill_at: str | None = None
        self.victim: int | None = None
        self.controller = Controller(self, hostname="127.0.0.1", port=self.port)

    def _maybe_kill(self, step: str) -> None:
        if self.kill_at == step and self.victim is not None:
            os.kill(self.victim, signal.SIGKILL)
            self.kill_at = self.victim = None

    async def handle_MAIL(
        self, server: Any, session: Any, envelope: Any, address: str, options: list
    ) -> str:
        self._maybe_kill("MAIL")
        envelope.mail_from = address
        envelope.mail_options.extend(options)
        return "250 OK"

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.received.append(envelope.original_content)
        self._maybe_kill("DATA")  # stored, not yet answered
        return "250 OK"

    async def handle_QUIT(self, server: Any, session: Any, envelope: Any) -> str:
        self._maybe_kill("QUIT")
        return "221 Bye"


@pytest.fixture
def sink() -> Iterator[KillingSink]:
    state = KillingSink()
    state.controller.start()
    yield state
    state.controller.stop()


@pytest.fixture
def worker_env(sink: KillingSink) -> Iterator[dict[str, str]]:
    from django.db import connection

    from config.celery import app

    queue = f"test-handover-{uuid.uuid4().hex[:8]}"
    env = child_env(connection.settings_dict["NAME"])
    env.update(
        CELERY_TASK_ALWAYS_EAGER="false",
        CELERY_QUEUE=queue,
        EMAIL_URL=f"smtp://127.0.0.1:{sink.port}",
        EMAIL_TIMEOUT="2",
        OUTBOX_LEASE_SECONDS="2",
    )
    app.conf.task_always_eager = False
    app.conf.task_default_queue = queue
    yield env
    app.conf.task_always_eager = True
    app.conf.task_default_queue = "pigeonhole"
    with app.connection_for_write() as conn:  # tasks nobody will take any more
        conn.default_channel.queue_purge(queue)
        conn.default_channel.queue_delete(queue)


def _worker(env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen(
        [*CELERY_WORKER, "-n", f"handover-{uuid.uuid4().hex[:6]}@%h"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


@pytest.mark.topology_production  # a Celery worker killed mid-attempt; embedded has none
def test_worker_killed_while_handing_over(
    worker_env: dict[str, str], sink: KillingSink, api: Api, workspace: Workspace
) -> None:
    from config.celery import app

    inbox = inbox_services.inbox_create(workspace=workspace, local_part="handover")
    copies: dict[str, int] = {}
    items: dict[str, OutboxItem] = {}
    worker = _worker(worker_env)
    try:
        for step in ("MAIL", "DATA", "QUIT"):
            sink.kill_at, sink.victim = step, worker.pid
            before = len(sink.received)
            response = api.call(
                "POST",
                f"inboxes/{inbox.pk}/send",
                {"to": ["far@away.example"], "subject": f"killed at {step}", "text": "Hello"},
            )
            assert response.status_code == 200, response.content
            item_id = response.json()["id"]
            assert worker.wait(60) == -signal.SIGKILL  # the sink killed it mid-conversation
            worker = _worker(worker_env)
            deadline = time.monotonic() + 60
            while OutboxItem.objects.get(pk=item_id).delivery != "done":
                assert time.monotonic() < deadline, OutboxItem.objects.get(pk=item_id).error
                with app.connection_for_write():
                    services.DELIVERIES.queue(item_id)  # what the sweeper does for the lost task
                time.sleep(0.5)
            # Done: no attempt can follow (a claim needs a queued or retrying delivery), and
            # the sink stored every copy before answering the 250 that was recorded.
            copies[step] = len(sink.received) - before
            items[step] = OutboxItem.objects.get(pk=item_id)
    finally:
        _stop(worker)
    assert copies == {"MAIL": 1, "DATA": 2, "QUIT": 1}
    assert [items[s].interrupted_handovers for s in ("MAIL", "DATA", "QUIT")] == [0, 1, 0]
    assert services.INTERRUPTED_HANDOVER in items["DATA"].error
    assert items["MAIL"].error == items["QUIT"].error == ""
    assert all(i.status == "sent" and i.handover_at is None for i in items.values())
