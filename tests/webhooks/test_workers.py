"""Real Celery workers: a worker killed in the middle of a delivery leaves it to another worker,
and the receiver never sees the same delivery twice at the same time.

In embedded mode the process that delivers is the one ``manage.py serve`` (its in-process
sweeper attempts due deliveries): it is killed mid-delivery and started again instead."""

from __future__ import annotations

import signal
import sys
import time
import uuid
from collections.abc import Iterator

import pytest

from apikeys.audit import Actor
from apikeys.models import Workspace
from inboxes import services as inbox_services
from tests.live import CELERY_WORKER, ROOT, child_env, embedded, free_port
from tests.webhooks.receiver import Receiver
from webhooks import services
from webhooks.models import Delivery


class Worker:
    """A Celery worker; in embedded mode a `manage.py serve` (under the network guard)."""

    def __init__(self, env: dict[str, str]) -> None:
        import subprocess

        argv = CELERY_WORKER
        if embedded():
            argv = [sys.executable, "-m", "tests.security.schema_server", "serve"]
            argv += ["--host", "127.0.0.1", "--port", str(free_port())]
            argv += ["--smtp-host", "127.0.0.1", "--smtp-port", str(free_port())]
        self.proc = subprocess.Popen(argv, cwd=ROOT, env=env)

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except Exception:
                self.proc.kill()


@pytest.fixture
def worker_env(transactional_db: None, settings) -> Iterator[dict[str, str]]:  # type: ignore[no-untyped-def]
    from django.db import connection

    from config.celery import app

    queue = f"test-{uuid.uuid4().hex[:8]}"  # parallel runs on one Redis never share tasks
    env = child_env(connection.settings_dict["NAME"])
    env.update(
        CELERY_TASK_ALWAYS_EAGER="false",
        CELERY_QUEUE=queue,
        WEBHOOK_ALLOW_PRIVATE_TARGETS="true",
        WEBHOOK_TIMEOUT="3",
        WEBHOOK_RETRY_SCHEDULE="1,1",
    )
    settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = True
    settings.WEBHOOK_TIMEOUT = 3.0
    if embedded():  # serve runs jobs in-process; this process queues nothing
        env["CELERY_TASK_ALWAYS_EAGER"] = "true"
        yield env
        return
    app.conf.task_always_eager = False
    app.conf.task_default_queue = queue
    yield env
    app.conf.task_always_eager = True
    app.conf.task_default_queue = "pigeonhole"


def test_killed_worker_leaves_delivery_to_another(
    worker_env: dict[str, str], receiver: Receiver, workspace: Workspace
) -> None:
    from config.celery import app

    endpoint, _ = services.endpoint_create(
        workspace=workspace,
        url=receiver.url,
        events=["inbox.created"],
        inbox_ids=[],
        label_keys=[],
        by=Actor.system("tests"),
    )
    receiver.script = [(200, 2.0)]  # the first request hangs while its worker is killed
    first = Worker(worker_env)
    try:
        inbox_services.inbox_create(workspace=workspace, local_part="crash")
        receiver.wait_for(1, timeout=60)
        first.kill()
    finally:
        first.stop()
    delivery = Delivery.objects.get()
    assert delivery.status == "pending" and delivery.leased_until is not None
    second = Worker(worker_env)
    try:
        deadline = time.monotonic() + 60
        while Delivery.objects.get().status != "succeeded" and time.monotonic() < deadline:
            if not embedded():  # (embedded: serve's own sweeper)
                with app.connection_for_write():
                    for delivery_id in services.DELIVERIES.due():  # what the beat sweeper does
                        services.DELIVERIES.queue(delivery_id)
            time.sleep(0.5)
    finally:
        second.stop()
    delivery.refresh_from_db()
    assert delivery.status == "succeeded"
    assert len(receiver.requests) == 2 and receiver.overlaps == 0
    assert {r.headers["Service-Delivery"] for r in receiver.requests} == {delivery.pk}
    log = list(delivery.attempts.order_by("id").values_list("status_code", "error"))
    assert log == [(None, services.INTERRUPTED), (200, "")]
    assert endpoint.pk == delivery.endpoint_id
