"""A healthy embedded run logs no noise (issue 25, item 7): the first mail sent no longer opens a
connection to a broker embedded mode does not have (kombu's ``No hostname was supplied``), and
``/favicon.ico`` is an icon, not a 404 in every log. Against ``make run`` from a fresh copy."""

from __future__ import annotations

import re
import smtplib
import time
from pathlib import Path

import httpx
import pytest

from tests.quickstart import MakeRun, fresh_copy

pytestmark = pytest.mark.live


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    started = MakeRun(fresh_copy(tmp_path_factory.mktemp("noise") / "pigeonhole")).start()
    yield started
    started.stop()


def _wait_for_line(run: MakeRun, pattern: str) -> None:
    deadline = time.monotonic() + 60
    while not any(re.search(pattern, line) for line in run.output):
        assert time.monotonic() < deadline, f"no line matching {pattern!r}:\n{run.text()}"
        time.sleep(0.1)


def test_first_send_and_receive_log_no_broker_connection(run: MakeRun) -> None:
    key = run.admin_key()
    with httpx.Client(
        base_url=run.base_url + "/api/v1", headers={"Authorization": f"Bearer {key}"}, timeout=30
    ) as api:
        inbox = api.post("/inboxes", json={"local_part": "noise"})
        assert inbox.is_success, inbox.text
        with smtplib.SMTP("127.0.0.1", run.smtp_port) as smtp:
            smtp.sendmail(
                "shop@example.com",
                ["noise@pigeonhole.test"],
                b"From: shop@example.com\r\nSubject: hi\r\n\r\nYour code: 271828\r\n",
            )
        sent = api.post(
            "/inboxes/noise@pigeonhole.test/send",
            json={"to": ["someone@example.com"], "subject": "hello", "text": "hello"},
        )
        assert sent.status_code == 200, sent.text
    # The delivery task ran in-process (embedded mode): whatever it logged is in the output now.
    _wait_for_line(run, r"Task outbox\.deliver\[.*\] succeeded")
    noise = [line for line in run.output if "No hostname was supplied" in line or "kombu" in line]
    assert not noise, run.text()


def test_favicon_is_served_and_linked(run: MakeRun) -> None:
    icon = httpx.get(run.base_url + "/favicon.ico", timeout=30)
    assert icon.status_code == 200
    assert icon.headers["content-type"].startswith("image/"), icon.headers
    assert icon.content[:4] == b"\x00\x00\x01\x00"  # an ICO header
    page = httpx.get(run.base_url + "/login/", timeout=30)
    link = re.search(r'<link rel="icon" href="([^"]+)"', page.text)
    assert link, page.text[:1000]
    linked = httpx.get(run.base_url + link.group(1), timeout=30)
    assert linked.status_code == 200
    assert linked.headers["content-type"].startswith("image/svg+xml")
    assert not [line for line in run.output if "Not Found: /favicon.ico" in line]


def test_the_copy_is_unchanged_by_running(run: MakeRun) -> None:
    """make run writes only under var/ (its database, secret, key and media)."""
    copy: Path = run.copy
    top = {p.name for p in copy.iterdir()}
    assert not {n for n in top if n.startswith("celerybeat-schedule")}
    assert (copy / "var" / "demo-admin-key").exists()
