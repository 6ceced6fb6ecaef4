"""Deployment shapes: several smtpd processes on one port, and embedded mode in one process."""

from __future__ import annotations

import gc
import json
import os
import smtplib
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from apikeys.models import Workspace
from inboxes import services as inbox_services
from mail.management.commands.smtpd import tune_interpreter
from mail.models import Email
from tests.live import ROOT, Process, child_env, free_port
from tests.mail.messages import message
from tests.webhooks.receiver import Receiver, receiver  # noqa: F401  (a fixture)


@pytest.fixture
def two_receivers(transactional_db: None) -> Iterator[int]:
    from django.db import connection

    port = free_port()
    env = child_env(connection.settings_dict["NAME"])
    argv = [sys.executable, "manage.py", "smtpd", "--host", "127.0.0.1", "--port", str(port)]
    first, second = Process(argv, port, env).start(), Process(argv, port, env)
    second.start()  # SO_REUSEPORT: the second binds the same port while the first listens
    yield port
    first.stop()
    second.stop()


def test_two_smtpd_processes_share_a_port(two_receivers: int, workspace: Workspace) -> None:
    inbox = inbox_services.inbox_create(workspace=workspace, local_part="shared")
    for i in range(30):
        with smtplib.SMTP("127.0.0.1", two_receivers, timeout=30) as smtp:
            smtp.sendmail(
                "a@example.org", [inbox.address], message(to=inbox.address, subject=f"m{i}")
            )
    subjects = sorted(Email.objects.filter(inbox=inbox).values_list("subject", flat=True))
    assert subjects == sorted(f"m{i}" for i in range(30))


def test_embedded_mode_in_one_process(receiver: Receiver) -> None:  # noqa: F811
    """`manage.py serve` on SQLite with no Redis: HTTP, SMTP, wait, the log and the periodic jobs
    (here the webhook sweeper, which delivers in embedded mode) in one process."""
    with tempfile.TemporaryDirectory() as tmp:
        env = child_env("unused")
        env["DATABASE_URL"] = f"sqlite:///{Path(tmp) / 'embedded.sqlite3'}"
        env.pop("REDIS_URL", None)
        run = {"cwd": ROOT, "env": env, "check": True, "capture_output": True, "timeout": 120}
        subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], **run)
        boot = subprocess.run(
            [
                sys.executable,
                "manage.py",
                "bootstrap",
                "--workspace",
                "E",
                "--owner",
                "e@x.test",
                "--password",
                "pw-embedded-1",
                "--json",
            ],
            **run,
        )
        key = json.loads(boot.stdout)["api_key"]
        http_port, smtp_port = free_port(), free_port()
        serve = Process(
            [
                sys.executable,
                "manage.py",
                "serve",
                "--port",
                str(http_port),
                "--smtp-port",
                str(smtp_port),
            ],
            http_port,
            env,
        ).start()
        try:
            api = httpx.Client(
                base_url=f"http://127.0.0.1:{http_port}/api/v1",
                headers={"Authorization": f"Bearer {key}"},
                timeout=30,
            )
            hook = api.post("webhooks", json={"url": receiver.url, "events": ["inbox.created"]})
            assert hook.status_code == 200, hook.text
            inbox = api.post("inboxes", json={"local_part": "embedded"}).json()
            result: dict = {}
            waiter = threading.Thread(
                target=lambda: result.update(
                    r=api.get(f"inboxes/{inbox['id']}/wait", params={"timeout": 20})
                )
            )
            waiter.start()
            threading.Event().wait(0.5)
            with smtplib.SMTP("127.0.0.1", smtp_port, timeout=30) as smtp:
                smtp.sendmail(
                    "a@example.org",
                    [inbox["address"]],
                    message(to=inbox["address"], subject="Your code is 90817"),
                )
            waiter.join(20)
            assert result["r"].status_code == 200
            assert result["r"].json()["extracted"]["code"] == "90817"
            assert api.get("stats").json()["emails"]["total"] == 1
            # Delivered by the in-process sweeper (no worker, no beat): the periodic jobs run.
            (delivery,) = receiver.wait_for(1, timeout=60)
            assert json.loads(delivery.body)["data"]["inbox"]["id"] == inbox["id"]
        finally:
            serve.stop()


def test_the_smtpd_process_hands_the_gil_over_within_a_millisecond() -> None:
    before, frozen = sys.getswitchinterval(), gc.get_freeze_count()
    try:
        tune_interpreter()
        assert sys.getswitchinterval() == pytest.approx(0.001)  # CPython's default is 5 ms
        assert gc.get_freeze_count() > frozen
    finally:
        sys.setswitchinterval(before)
        gc.unfreeze()


def _web_thresholds(**env: str) -> subprocess.CompletedProcess[str]:
    code = "import gc, config.asgi; print(','.join(map(str, gc.get_threshold())))"
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**{k: v for k, v in os.environ.items() if k != "WEB_GC_THRESHOLDS"}, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_web_process_makes_full_collections_rare() -> None:
    """config.asgi sets the collector's thresholds from WEB_GC_THRESHOLDS (default 5000,10,100:
    Python's 700,10,10 made the full collections that stall every parked wait several a minute
    with MCP sessions parked; docs/operations.md), and refuses a value it cannot use."""
    default = _web_thresholds()
    assert default.returncode == 0, default.stderr
    assert default.stdout.strip() == "5000,10,100"
    chosen = _web_thresholds(WEB_GC_THRESHOLDS="2000,15,40")
    assert chosen.stdout.strip() == "2000,15,40", chosen.stderr
    refused = _web_thresholds(WEB_GC_THRESHOLDS="0,10,10")
    assert refused.returncode != 0
    assert "WEB_GC_THRESHOLDS: three positive integers" in refused.stderr
