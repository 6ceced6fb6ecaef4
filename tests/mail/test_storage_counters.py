"""Storage figures (issue 30, item 3): every inbox's ``stored_bytes`` (raw messages plus the
attachments kept apart from them, as the database stores them: after compression on PostgreSQL),
kept by the receive path and every path that deletes mail, so /stats and the overview read
counters, never scan. A property test drives random receives (in
batches, some with attachments stored apart), API deletes, drop_oldest overflow, the retention
sweep's age limit and inbox purges, and compares each counter with a full recount."""

from __future__ import annotations

import importlib
import random
import string
from datetime import timedelta
from types import SimpleNamespace

import pytest
from django.db import connection
from django.db.models import Sum
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apikeys.models import Workspace
from inboxes import services as inbox_services
from inboxes.models import Inbox
from mail import pipeline, services
from mail.models import Attachment, Email
from tests.conftest import Api
from tests.mail.messages import PDF, message
from tests.mail.storage import stored_bytes

pytestmark = pytest.mark.django_db


def recount(inbox_id: str) -> tuple[int, int, int]:
    """(emails, unread, bytes stored) of an inbox, counted from the rows themselves."""
    emails = Email.objects.filter(inbox_id=inbox_id)
    return emails.count(), emails.filter(read=False).count(), stored_bytes(inbox_id)


def counters(inbox_id: str) -> tuple[int, int, int]:
    inbox = Inbox.objects.get(pk=inbox_id)
    return inbox.email_count, inbox.unread_count, inbox.stored_bytes


def raw_of(inbox: Inbox, kind: int, n: int) -> bytes:
    if kind == 0:
        return message(to=inbox.address, subject=f"plain {n}", text="x" * n)
    if kind == 1:  # an attachment read from its span of the raw message: adds nothing
        return message(to=inbox.address, subject=f"pdf {n}", attachments=[("a.pdf", "x/y", PDF)])
    if kind == 3:  # over 2 KB and compressible: PostgreSQL keeps it compressed, in its row
        return message(to=inbox.address, subject=f"long {n}", text="the same line\n" * (300 + n))
    # Bare CR line endings: no span, so the attachment's bytes are stored apart (and counted);
    # kind 4 makes them (and the raw message) large and incompressible: stored out of line.
    letters = random.Random(n)
    lines = 60 if kind == 4 else n % 7 + 1
    body = "\r".join(
        "".join(letters.choices(string.ascii_letters, k=76)) if kind == 4 else "line"
        for _ in range(lines)
    )
    return (
        f"To: {inbox.address}\rSubject: cr {n}\rContent-Type: application/x-thing\r\r{body}\r"
    ).encode()


operation = st.one_of(
    st.tuples(
        st.just("receive"), st.integers(0, 2), st.lists(st.integers(0, 4), min_size=1, max_size=4)
    ),
    st.tuples(st.just("delete"), st.integers(0, 2), st.integers(0, 50)),
    st.tuples(st.just("read"), st.integers(0, 2), st.integers(0, 50)),
    st.tuples(st.just("age"), st.integers(0, 2), st.integers(1, 5)),
    st.tuples(st.just("purge"), st.integers(0, 2), st.just(0)),
)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(operations=st.lists(operation, min_size=1, max_size=12))
def test_counters_equal_a_full_recount_after_any_receives_deletes_and_purges(
    api: Api, workspace: Workspace, operations: list[tuple]
) -> None:
    workspace.email_retention_days = 1
    workspace.save()
    boxes = [
        inbox_services.inbox_create(workspace=workspace),
        # drop_oldest at three: receiving deletes the oldest mail in the receive transaction
        inbox_services.inbox_create(workspace=workspace, max_emails=3),
        inbox_services.inbox_create(workspace=workspace, ttl_minutes=60),
    ]
    live = {box.pk for box in boxes}
    for step, (kind, which, arg) in enumerate(operations):
        box = boxes[which]
        if box.pk not in live:
            continue
        if kind == "receive":  # one batch of messages, as the smtpd's group commit writes them
            pipeline.receive_many(
                [
                    pipeline.Incoming(raw_of(box, k, step * 10 + i), "s@x.example", [box.address])
                    for i, k in enumerate(arg)
                ]
            )
        elif kind in {"delete", "read"}:
            ids = list(Email.objects.filter(inbox_id=box.pk).order_by("pk").values_list("pk"))
            if ids:
                email_id = ids[arg % len(ids)][0]
                if kind == "delete":
                    assert api.call("DELETE", f"emails/{email_id}").status_code == 200
                else:
                    api.call("PATCH", f"emails/{email_id}", {"read": True})
        elif kind == "age":  # some mail grows old, and the sweep removes it
            old = Email.objects.filter(inbox_id=box.pk).order_by("pk")[:arg]
            Email.objects.filter(pk__in=[e.pk for e in old]).update(
                received_at=timezone.now() - timedelta(days=2)
            )
            services.retention_sweep()
        elif kind == "purge" and len(live) > 1:
            assert services.inbox_purge(workspace_id=workspace.pk, inbox_id=box.pk)
            live.discard(box.pk)
        for pk in live:
            assert counters(pk) == recount(pk), (step, kind)
    stats = api.call("GET", "stats").json()["storage"]
    assert stats["bytes"] == sum(recount(pk)[2] for pk in live) + sum(
        i.stored_bytes for i in Inbox.objects.filter(workspace=workspace).exclude(pk__in=live)
    )


def test_stats_and_the_overview_show_bytes_and_the_largest_inboxes(
    api: Api, workspace: Workspace, other_workspace: Workspace, client
) -> None:  # type: ignore[no-untyped-def]
    small = inbox_services.inbox_create(workspace=workspace, local_part="small")
    large = inbox_services.inbox_create(workspace=workspace, local_part="large")
    inbox_services.inbox_create(workspace=workspace, local_part="empty")
    theirs = inbox_services.inbox_create(workspace=other_workspace, local_part="theirs")
    pipeline.receive_one(message(to=small.address), to=small.address)
    for _ in range(2):
        raw = message(to=large.address, attachments=[("a.pdf", "x/y", PDF)])
        pipeline.receive_one(raw, to=large.address)
    pipeline.receive_one(message(to=theirs.address, text="y" * 9000), to=theirs.address)

    storage = api.call("GET", "stats").json()["storage"]
    sizes = {i.pk: recount(i.pk)[2] for i in (small, large)}
    assert storage["bytes"] == sum(sizes.values())
    assert storage["largest_inboxes"] == [
        {"id": large.pk, "address": large.address, "bytes": sizes[large.pk], "email_count": 2},
        {"id": small.pk, "address": small.address, "bytes": sizes[small.pk], "email_count": 1},
    ]
    written = Email.objects.filter(workspace=workspace).aggregate(n=Sum("size"))["n"]
    if connection.vendor == "sqlite":  # nothing compressed: the bytes as written
        assert written == sum(sizes.values())

    from tests.factories import MembershipFactory

    client.force_login(MembershipFactory(workspace=workspace).user)
    page = client.get("/").content.decode()
    assert f'data-stat="storage.bytes" title="{sum(sizes.values())} bytes"' in page
    assert large.address in page and theirs.address not in page


def test_a_compressible_message_counts_what_the_database_stores_until_it_goes(
    api: Api, workspace: Workspace
) -> None:
    """A 200 KB message of one repeated line: on PostgreSQL its counter is the few kilobytes
    TOAST's LZ4 keeps, on SQLite its exact length; deleting it (the API, drop_oldest, the
    retention sweep, an inbox purge) takes away exactly what receiving it added."""
    workspace.email_retention_days = 1
    workspace.save()
    inbox = inbox_services.inbox_create(workspace=workspace, local_part="big")
    pipeline.receive_one(message(to=inbox.address, subject="small"), to=inbox.address)
    base = Inbox.objects.get(pk=inbox.pk).stored_bytes
    assert base == stored_bytes(inbox.pk) > 0
    big = message(to=inbox.address, subject="big", text="all work and no play\n" * 10_000)
    assert 200_000 < len(big) < 250_000

    def receive() -> tuple[str, int]:
        receipt = pipeline.receive_one(big, to=inbox.address)
        assert receipt.email_id is not None
        assert Email.objects.get(pk=receipt.email_id).size == len(big)  # the API's figure
        return receipt.email_id, Inbox.objects.get(pk=inbox.pk).stored_bytes - base

    email_id, added = receive()
    assert Inbox.objects.get(pk=inbox.pk).stored_bytes == stored_bytes(inbox.pk)
    if connection.vendor == "postgresql":
        assert 0 < added < len(big) // 20
    else:
        assert added == len(big)

    assert api.call("DELETE", f"emails/{email_id}").status_code == 200
    assert Inbox.objects.get(pk=inbox.pk).stored_bytes == base

    email_id, again = receive()
    assert again == added
    Email.objects.filter(pk=email_id).update(received_at=timezone.now() - timedelta(days=2))
    assert services.retention_sweep().emails == 1
    assert counters(inbox.pk) == (1, 1, base) == recount(inbox.pk)

    # drop_oldest: a cap of one, the big message in first; the small one pushes it out.
    capped = inbox_services.inbox_create(workspace=workspace, local_part="capped", max_emails=1)
    pipeline.receive_one(big, to=capped.address)
    assert Inbox.objects.get(pk=capped.pk).stored_bytes == added
    pipeline.receive_one(message(to=capped.address, subject="small"), to=capped.address)
    assert counters(capped.pk) == recount(capped.pk)

    receive()
    assert services.inbox_purge(workspace_id=workspace.pk, inbox_id=inbox.pk)
    assert api.call("GET", "stats").json()["storage"]["bytes"] == stored_bytes(capped.pk)


RECOUNT_MIGRATION = importlib.import_module("mail.migrations.0010_stored_bytes_after_compression")


def test_the_migration_recounts_what_was_counted_before_compression(workspace: Workspace) -> None:
    """Counters kept with the old measure (the bytes as written) are recounted as stored, a
    batch of inboxes at a time; reversed, the old measure comes back. SQLite's are left as they
    are: they already are what it stores."""
    boxes = [inbox_services.inbox_create(workspace=workspace) for _ in range(3)]
    for n, box in enumerate(boxes):
        pipeline.receive_many(
            [pipeline.Incoming(raw_of(box, k, n), "s@x.example", [box.address]) for k in range(5)]
        )
    written = {box.pk: written_bytes(box.pk) for box in boxes}
    for box in boxes:  # as the application counted before
        Inbox.objects.filter(pk=box.pk).update(stored_bytes=written[box.pk])

    editor = SimpleNamespace(connection=connection)  # what the migration's code uses of one
    batch = RECOUNT_MIGRATION.BATCH
    RECOUNT_MIGRATION.BATCH = 2  # more than one batch
    try:
        RECOUNT_MIGRATION.forwards(None, editor)
        after = {box.pk: counters(box.pk)[2] for box in boxes}
        RECOUNT_MIGRATION.backwards(None, editor)
        back = {box.pk: counters(box.pk)[2] for box in boxes}
    finally:
        RECOUNT_MIGRATION.BATCH = batch
    assert after == {box.pk: stored_bytes(box.pk) for box in boxes}
    assert back == written
    if connection.vendor == "postgresql":  # kinds 3 compress: less than written
        assert all(after[pk] < written[pk] for pk in after)


def written_bytes(inbox_id: str) -> int:
    """The old measure: raw messages and attachments kept apart, as the application wrote them."""
    raw = Email.objects.filter(inbox_id=inbox_id).aggregate(n=Sum("size"))["n"] or 0
    apart = Attachment.objects.filter(email__inbox_id=inbox_id, content__isnull=False).aggregate(
        n=Sum("size")
    )["n"]
    return raw + (apart or 0)
