"""The receive path in batches: ``pipeline.receive_many`` (one transaction for many messages)
and the SMTP front door's group commit that feeds it."""

from __future__ import annotations

import asyncio
import smtplib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.utils import timezone

from apikeys.audit import Actor
from apikeys.models import Workspace
from events.models import Event
from inboxes import services as inbox_services
from inboxes.models import Inbox
from mail import pipeline
from mail.models import Email, RawMessage
from mail.smtpd.writer import ThreadWriter
from tests.conftest import SmtpServer
from tests.dns_server import verified_domain
from tests.mail.messages import message


def _incoming(to: list[str], subject: str, sender: str = "a@shop.example") -> pipeline.Incoming:
    return pipeline.Incoming(message(to=to, subject=subject, sender=sender), sender, to)


def _assert_chains_hold() -> None:
    """Every inbox's events chain: each ``prev_id`` is the inbox's previous event."""
    last: dict[str, int | None] = {}
    for event in Event.objects.exclude(inbox_id="").order_by("id"):
        assert event.prev_id == last.get(event.inbox_id), event
        last[event.inbox_id] = event.pk


def test_a_batch_delivers_each_message_to_each_inbox_once(db: None, workspace: Workspace) -> None:
    a = inbox_services.inbox_create(workspace=workspace, local_part="alpha")
    b = inbox_services.inbox_create(
        workspace=workspace, local_part="beta", block_senders=["bad.example"]
    )
    old = inbox_services.inbox_create(workspace=workspace, local_part="old", ttl_minutes=5)
    Inbox.objects.filter(pk=old.pk).update(expires_at=timezone.now() - timedelta(minutes=1))
    tagged = a.address.replace("@", "+tag@")
    results = pipeline.receive_many(
        [
            _incoming([a.address], "one"),
            _incoming([a.address, b.address], "two"),
            _incoming([tagged, a.address], "three"),  # the same inbox twice: one copy
            _incoming(["nobody@pigeonhole.test"], "four"),
            _incoming([b.address], "five", sender="x@bad.example"),
            _incoming([old.address, a.address], "six"),
        ]
    )
    assert [[bool(d.email_id) for d in r] for r in results] == [
        [True],
        [True, True],
        [True, True],
        [False],
        [False],
        [False, True],
    ]
    assert results[2][0].email_id == results[2][1].email_id
    assert results[3][0].refusal == pipeline.NO_SUCH_INBOX
    assert results[4][0].refusal == pipeline.SENDER_REFUSED
    assert results[5][0].refusal == pipeline.INBOX_EXPIRED

    def subjects(inbox):
        return sorted(Email.objects.filter(inbox=inbox).values_list("subject", flat=True))

    assert subjects(a) == ["one", "six", "three", "two"] and subjects(b) == ["two"]
    for inbox, count in ((a, 4), (b, 1)):
        inbox.refresh_from_db()
        assert (inbox.email_count, inbox.unread_count) == (count, count)
        newest = Email.objects.filter(inbox=inbox).order_by("-received_at").first()
        assert inbox.last_email_at == newest.received_at  # type: ignore[union-attr]
    assert RawMessage.objects.count() == 5
    received = Event.objects.filter(type="email.received")
    assert sorted(received.values_list("inbox_id", flat=True)) == sorted([a.pk] * 4 + [b.pk])
    rejected = Event.objects.filter(type="mail.rejected").order_by("id")
    assert [(e.inbox_id, e.data["reason"]) for e in rejected] == [
        (b.pk, pipeline.SENDER_REFUSED.reason),
        (old.pk, pipeline.INBOX_EXPIRED.reason),
    ]
    _assert_chains_hold()


def test_caps_hold_inside_one_batch(db: None, workspace: Workspace) -> None:
    strict = inbox_services.inbox_create(
        workspace=workspace, local_part="strict", max_emails=2, overflow="reject"
    )
    rolling = inbox_services.inbox_create(
        workspace=workspace, local_part="rolling", max_emails=2, overflow="drop_oldest"
    )
    pipeline.receive_many(
        [_incoming([strict.address, rolling.address], f"old{i}") for i in range(2)]
    )
    results = pipeline.receive_many(
        [_incoming([strict.address, rolling.address], f"new{i}") for i in range(3)]
    )
    assert [r[0].refusal for r in results] == [pipeline.INBOX_FULL] * 3
    assert all(r[1].email_id for r in results)

    def subjects(inbox):
        return sorted(Email.objects.filter(inbox=inbox).values_list("subject", flat=True))

    assert subjects(strict) == ["old0", "old1"]
    assert subjects(rolling) == ["new1", "new2"]
    for inbox in (strict, rolling):
        inbox.refresh_from_db()
        assert (inbox.email_count, inbox.unread_count) == (2, 2)
    deleted = Event.objects.filter(type="email.deleted", inbox_id=rolling.pk)
    assert deleted.count() == 3  # old0, old1 and new0, the oldest three of five
    assert Event.objects.filter(type="mail.rejected", inbox_id=strict.pk).count() == 3
    _assert_chains_hold()


def test_catch_all_inboxes_are_created_once_per_batch(db: None, workspace: Workspace) -> None:
    verified_domain(workspace, "catch.example", catch_all=True)
    results = pipeline.receive_many(
        [_incoming(["fresh@catch.example"], "one"), _incoming(["fresh+x@catch.example"], "two")]
    )
    assert results[0][0].inbox_id == results[1][0].inbox_id is not None
    assert Inbox.objects.filter(address="fresh@catch.example").count() == 1
    assert Event.objects.filter(type="inbox.created").count() == 1
    assert Event.objects.filter(type="email.received").count() == 2


@pytest.fixture
def poison_subject(transactional_db: None) -> Iterator[str]:
    """A database trigger that refuses to store any email with this subject."""
    subject = "poison"
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "CREATE FUNCTION test_poison() RETURNS trigger AS $$ BEGIN "
                "IF NEW.subject = 'poison' THEN RAISE EXCEPTION 'poisoned'; END IF; "
                "RETURN NEW; END $$ LANGUAGE plpgsql"
            )
            cursor.execute(
                "CREATE TRIGGER test_poison BEFORE INSERT ON mail_email "
                "FOR EACH ROW EXECUTE FUNCTION test_poison()"
            )
        else:
            cursor.execute(
                "CREATE TRIGGER test_poison BEFORE INSERT ON mail_email "
                "WHEN NEW.subject = 'poison' BEGIN SELECT RAISE(ABORT, 'poisoned'); END"
            )
    yield subject
    with connection.cursor() as cursor:
        cursor.execute(
            "DROP TRIGGER test_poison"
            + (" ON mail_email" if connection.vendor == "postgresql" else "")
        )
        if connection.vendor == "postgresql":
            cursor.execute("DROP FUNCTION test_poison()")


def test_a_failing_batch_stores_nothing(poison_subject: str, workspace: Workspace) -> None:
    inbox = inbox_services.inbox_create(workspace=workspace, local_part="target")
    events_before = Event.objects.count()
    with pytest.raises(Exception, match="poisoned"):
        pipeline.receive_many(
            [_incoming([inbox.address], "fine"), _incoming([inbox.address], poison_subject)]
        )
    assert Email.objects.count() == 0 and RawMessage.objects.count() == 0
    assert Event.objects.count() == events_before
    inbox.refresh_from_db()
    assert inbox.email_count == 0


@pytest.mark.parametrize("kind", ["thread", "process"])
def test_group_commit_retries_alone_so_only_the_bad_message_fails(
    poison_subject: str, workspace: Workspace, kind: str, request: pytest.FixtureRequest
) -> None:
    """With either writer (the process's error comes back across the process boundary)."""
    from mail.smtpd.server import GroupCommit

    writer = request.getfixturevalue("process_writer") if kind == "process" else ThreadWriter()
    inbox = inbox_services.inbox_create(workspace=workspace, local_part="target")

    async def both() -> list[object]:
        group = GroupCommit(writer)
        return await asyncio.gather(  # both join the first batch: the writer starts after them
            group.store(_incoming([inbox.address], "fine")),
            group.store(_incoming([inbox.address], poison_subject)),
            return_exceptions=True,
        )

    fine, poisoned = asyncio.run(both())
    assert isinstance(fine, list) and fine[0].email_id
    assert isinstance(poisoned, Exception) and "poisoned" in str(poisoned)
    assert list(Email.objects.values_list("subject", flat=True)) == ["fine"]


def test_concurrent_sessions_each_get_their_own_250(
    smtp_server: SmtpServer, workspace: Workspace
) -> None:
    inboxes = [
        inbox_services.inbox_create(workspace=workspace, local_part=f"box{i}") for i in range(4)
    ]

    def send(n: int) -> str:
        to = inboxes[n % 4].address
        with smtp_server.client() as smtp:
            smtp.ehlo()
            smtp.mail("a@shop.example")
            smtp.rcpt(to)
            code, reply = smtp.data(message(to=to, subject=f"m{n}"))
        assert code == 250, reply
        return reply.decode().rsplit(" ", 1)[-1]

    with ThreadPoolExecutor(20) as pool:
        ids = list(pool.map(send, range(60)))
    assert len(set(ids)) == 60
    stored = dict(Email.objects.values_list("pk", "subject"))
    assert sorted(stored[pk] for pk in ids) == sorted(f"m{n}" for n in range(60))
    _assert_chains_hold()


def test_an_inbox_recreated_under_the_same_address_gets_its_mail(
    smtp_server: SmtpServer, workspace: Workspace
) -> None:
    first = inbox_services.inbox_create(workspace=workspace, local_part="again")
    smtp_server.send(message(to=first.address, subject="to the first"), to=[first.address])
    inbox_services.inbox_delete(inbox=first, by=Actor.system("tests"))
    second = inbox_services.inbox_create(workspace=workspace, local_part="again")
    assert (
        smtp_server.send(message(to=second.address, subject="to the second"), to=[second.address])
        == {}
    )
    assert list(Email.objects.filter(inbox=second).values_list("subject", flat=True)) == [
        "to the second"
    ]
    inbox_services.inbox_delete(inbox=second, by=Actor.system("tests"))
    with pytest.raises(smtplib.SMTPException):  # gone, and not admitted from memory either
        smtp_server.send(message(to=second.address, subject="to nobody"), to=[second.address])


def test_inboxes_locked_reads_whole_rows_with_their_workspace_and_locks_them(
    transactional_db: None, workspace: Workspace
) -> None:
    """The batch's read of its inboxes and their workspaces (``config.rows``): the rows as the
    ORM reads them (JSON and datetimes converted), the workspace read in the same statement,
    unknown ids left out, and the rows locked until the transaction ends."""
    from django.db import connections
    from django.test.utils import CaptureQueriesContext

    from inboxes.selectors import inboxes_locked

    a = inbox_services.inbox_create(workspace=workspace, local_part="lock-a", tags=["x", "y"])
    b = inbox_services.inbox_create(workspace=workspace, local_part="lock-b", ttl_minutes=60)
    with transaction.atomic():
        with CaptureQueriesContext(connection) as reads:
            found = inboxes_locked(sorted([b.pk, a.pk, "inb_missing"]))
            assert {pk: inbox.workspace.name for pk, inbox in found.items()} == {
                a.pk: workspace.name,
                b.pk: workspace.name,
            }
        assert len(reads) == 1
        assert list(found) == sorted([a.pk, b.pk])
        assert found[a.pk].tags == ["x", "y"] and found[a.pk].expires_at is None
        assert found[b.pk].expires_at == Inbox.objects.get(pk=b.pk).expires_at
        assert found[b.pk].expires_at.tzinfo is not None
        if connection.vendor == "postgresql":
            other = connections.create_connection("default")
            try:
                with other.cursor() as cursor, pytest.raises(Exception, match="obtain lock"):
                    cursor.execute(
                        "SELECT id FROM inboxes_inbox WHERE id = %s FOR UPDATE NOWAIT", [a.pk]
                    )
            finally:
                other.close()


def test_a_message_digested_before_its_batch_is_stored_as_one_digested_in_it(
    db: None, workspace: Workspace
) -> None:
    """``pipeline.digested`` (what the smtpd does as DATA ends, with a writer process) gives the
    very rows that parsing in the batch gives; a digested message is not parsed again."""
    from mail.message.parsing import parse_message

    inbox = inbox_services.inbox_create(workspace=workspace, local_part="digested")
    raw = message(
        to=inbox.address, subject="Your code is 482913", html="<p><a href='https://x.test/v'>v</a>"
    )
    now = timezone.now()
    plain = pipeline.Incoming(raw, "a@shop.example", [inbox.address], received_at=now)
    ready = pipeline.digested(plain)
    assert ready.digest is not None and ready.received_at == now
    assert pipeline.digested(ready) is ready
    first = pipeline.receive_many([plain])[0][0]
    second = pipeline.receive_many([ready])[0][0]
    skip = {"id", "created_at", "updated_at", "announced_at"}

    def row(email_id: str | None) -> dict:
        values = Email.objects.filter(pk=email_id).values().get()
        return {k: v for k, v in values.items() if k not in skip}

    assert row(first.email_id) == row(second.email_id)
    assert row(second.email_id)["extracted"]["code"] == "482913"
    untouched = parse_message(raw)  # and the batch used the digested parse, not a new one
    ready.digest.parsed.subject = "changed after digesting"  # type: ignore[union-attr]
    third = pipeline.receive_many([ready])[0][0]
    assert Email.objects.get(pk=third.email_id).subject == "changed after digesting"
    assert untouched.subject == "Your code is 482913"
