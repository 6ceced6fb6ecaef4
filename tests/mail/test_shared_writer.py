"""The host's shared writer (``mail.smtpd.shared``, ``SMTP_WRITER=shared``) with real ``manage.py
smtpd`` processes, PostgreSQL and SMTP: two smtpds share one writer process, which merges their
requests into one transaction; a writer killed mid-batch costs its senders a ``451`` and nothing
uncommitted is acknowledged; a killed smtpd leaves the writer to the others, and the writer ends
with the last smtpd.

A batch is held in the middle of its transaction by a row lock the test takes on the inbox
(``receive_many`` locks the inboxes it writes to), so that what happens "mid-batch" is decided
by the test, never by timing. Each test has a writer directory of its own (``SMTP_WRITER_DIR``).
"""

from __future__ import annotations

import os
import shutil
import signal
import smtplib
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.db import connection, transaction

from apikeys.models import Workspace
from inboxes import services as inbox_services
from inboxes.models import Inbox
from mail.models import Email
from mail.smtpd.shared import private_directory, writer_pid
from tests.live import ROOT, Process, child_env, descendants, free_port, wait_listening
from tests.mail.messages import message

pytestmark = pytest.mark.topology_production  # embedded mode writes in a thread of `serve`


class Smtpds:
    """``manage.py smtpd`` processes on ports of their own, sharing one writer directory."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.env = {**child_env(connection.settings_dict["NAME"]), "SMTP_WRITER": "shared"}
        self.env["SMTP_WRITER_DIR"] = str(directory)
        self.processes: list[Process] = []

    def start(self, count: int) -> list[Process]:
        """Starts ``count`` smtpds at once (they race for the writer) and waits for them all."""
        started = []
        for _ in range(count):
            port = free_port()
            argv = [sys.executable, "manage.py", "smtpd", "--host", "127.0.0.1"]
            process = Process([*argv, "--port", str(port)], port, self.env)
            process.proc = subprocess.Popen(
                process.argv, cwd=ROOT, env=self.env, stdout=subprocess.DEVNULL
            )
            started.append(process)
        for process in started:
            assert process.proc is not None
            wait_listening(process.proc, process.port)
        self.processes += started
        return started

    def writer(self, within: float = 30.0) -> int:
        """The pid of the one writer (one lock file in the directory, naming a live process).
        An smtpd listens while its writer starts (tests/test_startup.py), so the writer may come
        up after the port: it is waited for, up to ``within`` seconds."""
        deadline = time.monotonic() + within
        while True:
            locks = list(self.directory.glob("writer-*.lock"))
            pid = writer_pid(locks[0]) if len(locks) == 1 else None
            if (pid is not None and _alive(pid)) or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert len(locks) == 1, locks
        assert pid is not None and _alive(pid)
        return pid

    def stop(self) -> None:
        for process in self.processes:
            process.stop()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    return state != "Z"


def _gone(pid: int, within: float = 15.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


def _send(port: int, to: str, subject: str) -> int:
    """One message on a new connection; the reply code of its DATA."""
    with smtplib.SMTP("127.0.0.1", port, timeout=60) as smtp:
        try:
            smtp.sendmail("a@shop.example", [to], message(to=to, subject=subject))
        except smtplib.SMTPDataError as error:
            return error.smtp_code
    return 250


class Sender(threading.Thread):
    """Sends one message in the background; ``code`` is the DATA reply (None: no reply)."""

    def __init__(self, port: int, to: str, subject: str) -> None:
        super().__init__(daemon=True)
        self.args_ = (port, to, subject)
        self.code: int | None = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.code = _send(*self.args_)
        except (OSError, smtplib.SMTPException) as error:
            self.error = error


def _lock_waiters() -> int:
    with connection.cursor() as cursor:  # inside the test's transaction: a fresh snapshot
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        return int(cursor.fetchone()[0])


def _until(condition, what: str, within: float = 30.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + within
    while not condition():
        assert time.monotonic() < deadline, f"waited {within:.0f}s for {what}"
        time.sleep(0.05)


@pytest.fixture
def smtpds(transactional_db: None) -> Iterator[Smtpds]:
    # A short directory of its own: under pytest-xdist, tmp_path made the socket's path longer
    # than a Unix socket takes (test_a_writer_dir_too_long_is_refused_at_start).
    directory = Path(tempfile.mkdtemp(prefix="pgw-"))
    running = Smtpds(directory)
    yield running
    running.stop()
    shutil.rmtree(directory, ignore_errors=True)


def test_a_writer_dir_too_long_is_refused_at_start(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 100)
    with pytest.raises(RuntimeError, match="too long for a Unix socket"):
        private_directory(str(deep))
    assert not deep.exists()  # refused before anything was made
    assert private_directory(str(tmp_path / "w")).is_dir()


@pytest.fixture
def inbox(workspace: Workspace) -> Inbox:
    return inbox_services.inbox_create(workspace=workspace, local_part="shared", ttl_minutes=None)


def test_two_smtpds_started_together_share_one_writer(smtpds: Smtpds, inbox: Inbox) -> None:
    a, b = smtpds.start(2)
    writer = smtpds.writer()
    assert _send(a.port, inbox.address, "via a") == 250
    assert _send(b.port, inbox.address, "via b") == 250
    assert smtpds.writer() == writer
    owners = [p for p in (a, b) if p.proc and writer in descendants(p.proc.pid)]
    assert len(owners) == 1, "one smtpd started the writer, the other connected to it"
    subjects = Email.objects.filter(inbox=inbox).values_list("subject", flat=True)
    assert sorted(subjects) == ["via a", "via b"]


def test_an_smtpd_configured_otherwise_gets_a_writer_of_its_own(
    smtpds: Smtpds, inbox: Inbox
) -> None:
    """The writer keeps the settings of the smtpd that started it (its Celery queue among them:
    the webhooks and classifications of every message it writes go there). An smtpd started
    with another configuration, on the same database and code, while that writer lives (a
    restart with a changed environment, or a second stack on the host) gets a writer of its own;
    handed to the first, its mail's tasks went to a queue no worker of its own reads (found by
    CI: a test stack's webhooks never arrived after the dashboard tests' stack had left its idle
    writer behind). The listener's own port is no such difference."""
    (a,) = smtpds.start(1)
    first = smtpds.writer()
    smtpds.env = {**smtpds.env, "CELERY_QUEUE": "another-queue", "SMTP_PORT": "2600"}
    (b,) = smtpds.start(1)
    assert b.proc is not None
    deadline = time.monotonic() + 30
    while True:
        locks = sorted(smtpds.directory.glob("writer-*.lock"))
        pids = [writer_pid(lock) for lock in locks]
        if (len(locks) == 2 and all(pid and _alive(pid) for pid in pids)) or (
            time.monotonic() > deadline
        ):
            break
        time.sleep(0.05)
    assert len(locks) == 2, locks
    second = next(pid for pid in pids if pid != first)
    assert second in descendants(b.proc.pid) and first not in descendants(b.proc.pid)
    assert _send(b.port, inbox.address, "via b") == 250
    assert _send(a.port, inbox.address, "via a") == 250
    assert sorted(Email.objects.filter(inbox=inbox).values_list("subject", flat=True)) == [
        "via a",
        "via b",
    ]
    # Only the listener's port differs: one writer, as in the first test.
    smtpds.env = {**smtpds.env, "CELERY_QUEUE": "another-queue", "SMTP_PORT": "2601"}
    (c,) = smtpds.start(1)
    assert c.proc is not None
    assert _send(c.port, inbox.address, "via c") == 250
    assert len(list(smtpds.directory.glob("writer-*.lock"))) == 2
    assert second not in descendants(c.proc.pid)


def test_requests_of_two_smtpds_are_written_in_one_transaction(
    smtpds: Smtpds, inbox: Inbox
) -> None:
    """While a batch of a third smtpd waits for the inbox, a request from each of two others
    queues in the writer; the next batch takes both: their rows share one transaction id
    (``xmin``)."""
    a, b, c = smtpds.start(3)
    # Each smtpd's connection to the writer made first (an smtpd listens while it connects).
    for smtpd in (a, b, c):
        assert _send(smtpd.port, inbox.address, f"warm-up {smtpd.port}") == 250
    with transaction.atomic():
        Inbox.objects.select_for_update().get(pk=inbox.pk)
        first = Sender(c.port, inbox.address, "first")
        first.start()
        _until(lambda: _lock_waiters() > 0, "the writer to wait for the inbox")
        queued = [Sender(a.port, inbox.address, "from a"), Sender(b.port, inbox.address, "from b")]
        for sender in queued:
            sender.start()
        time.sleep(0.5)  # both reach the writer's socket (the outcome does not depend on it)
    for sender in (first, *queued):
        sender.join(60)
        assert sender.code == 250, (sender.code, sender.error)
    with connection.cursor() as cursor:
        cursor.execute("SELECT subject, xmin::text FROM mail_email WHERE inbox_id = %s", [inbox.pk])
        xmin = {k: v for k, v in cursor.fetchall() if not k.startswith("warm-up")}
    assert set(xmin) == {"first", "from a", "from b"}
    assert xmin["from a"] == xmin["from b"] != xmin["first"]


def test_a_writer_killed_mid_batch_acknowledges_nothing_and_is_replaced(
    smtpds: Smtpds, inbox: Inbox
) -> None:
    (smtpd,) = smtpds.start(1)
    writer = smtpds.writer()
    with transaction.atomic():
        Inbox.objects.select_for_update().get(pk=inbox.pk)
        held = Sender(smtpd.port, inbox.address, "held")
        held.start()
        _until(lambda: _lock_waiters() > 0, "the writer to wait for the inbox")
        os.kill(writer, signal.SIGKILL)
        held.join(60)
    assert held.code == 451, (held.code, held.error)  # never 250 for what was not committed
    assert not Email.objects.filter(inbox=inbox).exists()
    assert _send(smtpd.port, inbox.address, "again") == 250  # a new writer takes over
    assert smtpds.writer() != writer
    assert list(Email.objects.filter(inbox=inbox).values_list("subject", flat=True)) == ["again"]


def test_the_writer_outlives_a_killed_smtpd_and_ends_with_the_last(
    smtpds: Smtpds, inbox: Inbox
) -> None:
    a, b = smtpds.start(2)
    writer = smtpds.writer()
    owner, other = (a, b) if a.proc and writer in descendants(a.proc.pid) else (b, a)
    assert owner.proc is not None and other.proc is not None
    owner.proc.kill()
    owner.proc.wait(10)
    assert _send(other.port, inbox.address, "after the kill") == 250
    assert smtpds.writer() == writer
    other.stop()  # SIGTERM: the last smtpd goes, and the writer after it
    assert _gone(writer), "the writer outlived the last smtpd"
    assert list(Email.objects.filter(inbox=inbox).values_list("subject", flat=True)) == [
        "after the kill"
    ]


def test_a_killed_smtpd_s_waiting_request_is_not_written(smtpds: Smtpds, inbox: Inbox) -> None:
    """Its sender got no reply and will send again: the writer drops what it had not begun."""
    a, b = smtpds.start(2)
    assert b.proc is not None
    with transaction.atomic():
        Inbox.objects.select_for_update().get(pk=inbox.pk)
        held = Sender(a.port, inbox.address, "held")
        held.start()
        _until(lambda: _lock_waiters() > 0, "the writer to wait for the inbox")
        orphan = Sender(b.port, inbox.address, "orphan")
        orphan.start()
        time.sleep(0.5)  # its DATA is in b, and b's request on the writer's socket
        b.proc.kill()
        b.proc.wait(10)
        orphan.join(60)
    held.join(60)
    assert held.code == 250, (held.code, held.error)
    assert orphan.code is None  # the connection died with b: no reply
    time.sleep(0.5)  # the writer's next turn, had it written the orphan
    subjects = list(Email.objects.filter(inbox=inbox).values_list("subject", flat=True))
    assert subjects == ["held"]
