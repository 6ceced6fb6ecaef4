"""The smtpd's writer process (``mail.smtpd.writer.ProcessWriter``): batches written by a child
process against the real database, a child that dies costs its batch a ``451`` and is replaced,
and a child never outlives its smtpd (killed or stopped)."""

from __future__ import annotations

import asyncio
import os
import signal
import smtplib
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from apikeys.models import Workspace
from inboxes import services as inbox_services
from mail import pipeline
from mail.models import Email
from mail.smtpd.server import GroupCommit
from mail.smtpd.writer import ProcessWriter, WriterLost, writer_for
from tests.live import ROOT, Stack, descendants
from tests.mail.messages import message


def _incoming(to: str, subject: str) -> pipeline.Incoming:
    return pipeline.Incoming(message(to=to, subject=subject), "a@shop.example", [to])


def _gone(pid: int, within: float = 10.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        stat = Path(f"/proc/{pid}/stat")
        if stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] == "Z":
            return True  # a zombie: it has exited, its parent has not reaped it yet
        time.sleep(0.05)
    return False


def test_a_batch_is_written_by_the_child(
    process_writer: ProcessWriter, workspace: Workspace
) -> None:
    inbox = inbox_services.inbox_create(workspace=workspace, local_part="child")

    async def run() -> list[list[pipeline.Receipt]]:
        await process_writer.start()
        return await process_writer.store(
            [_incoming(inbox.address, "one"), _incoming(inbox.address, "two")]
        )

    results = asyncio.run(run())
    assert process_writer.pid is not None and process_writer.pid != os.getpid()
    assert [len(r) for r in results] == [1, 1]
    stored = dict(Email.objects.values_list("pk", "subject"))
    assert sorted(stored[r[0].email_id] for r in results) == ["one", "two"]
    inbox.refresh_from_db()
    assert inbox.email_count == 2


def test_a_lost_child_costs_its_batch_a_451_and_is_replaced(
    process_writer: ProcessWriter, workspace: Workspace
) -> None:
    inbox = inbox_services.inbox_create(workspace=workspace, local_part="lost")
    asyncio.run(process_writer.start())
    first = process_writer.pid
    assert first is not None
    os.kill(first, signal.SIGKILL)
    assert _gone(first)

    async def batch(subjects: list[str]) -> list[object]:
        group = GroupCommit(process_writer)
        return await asyncio.gather(
            *(group.store(_incoming(inbox.address, s)) for s in subjects), return_exceptions=True
        )

    lost = asyncio.run(batch(["a", "b"]))
    assert all(isinstance(outcome, WriterLost) for outcome in lost), lost
    again = asyncio.run(batch(["c", "d"]))
    assert all(isinstance(outcome, list) and outcome[0].email_id for outcome in again), again
    assert process_writer.pid not in (None, first)
    assert sorted(Email.objects.values_list("subject", flat=True)) == ["c", "d"]


def test_the_child_exits_when_its_parent_is_killed() -> None:
    """An smtpd killed with SIGKILL leaves no writer behind (it would hold a database
    connection): the child reads the end of its queue and exits."""
    code = (
        "import asyncio, os, sys\n"
        "from mail.smtpd.writer import ProcessWriter\n"
        "w = ProcessWriter()\n"
        "asyncio.run(w.start())\n"
        "print(w.pid, flush=True)\n"
        "sys.stdin.read()\n"
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", code],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings"},
    )
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        assert not _gone(child, within=0.5)  # running
        parent.kill()
        parent.wait(10)
        assert _gone(child), f"writer {child} outlived its killed parent"
    finally:
        parent.kill()


@pytest.fixture
def stack(transactional_db: None) -> Iterator[Stack]:
    from django.db import connection

    running = Stack(connection.settings_dict["NAME"]).start()
    yield running
    running.stop()


@pytest.mark.topology_production  # embedded mode's `serve` writes in a thread (SMTP_WRITER)
def test_the_smtpd_stops_its_writer_after_answering(stack: Stack, workspace: Workspace) -> None:
    """SIGTERM to the smtpd (a deploy): mail is answered, then the writer process ends too."""
    inbox = inbox_services.inbox_create(workspace=workspace, local_part="stopping")
    with smtplib.SMTP("127.0.0.1", stack.smtp_port, timeout=30) as smtp:
        smtp.sendmail("a@shop.example", [inbox.address], message(to=inbox.address, subject="s"))
    assert stack.smtp.proc is not None
    children = descendants(stack.smtp.proc.pid)
    assert children, "the smtpd runs its writer in a process of its own"
    stack.smtp.stop()
    assert all(_gone(pid) for pid in children)
    assert list(Email.objects.filter(inbox=inbox).values_list("subject", flat=True)) == ["s"]


def test_writer_for_knows_two_kinds() -> None:
    assert isinstance(writer_for("process"), ProcessWriter)
    with pytest.raises(ValueError, match="SMTP_WRITER"):
        writer_for("fork")
