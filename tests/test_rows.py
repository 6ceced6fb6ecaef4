"""``config.rows``: ``insert`` (and ``insert_pair``) store what ``save()`` stores, ``bulk_insert`` exactly what ``QuerySet.bulk_create`` stores and
``select_rows`` reads exactly what the ORM reads, row by row, on the database this run uses
(PostgreSQL, or SQLite in the embedded pass)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from django.db import DataError, IntegrityError, connection, connections, models, transaction
from django.test.utils import CaptureQueriesContext

from apikeys.models import Workspace
from config.rows import (
    _as_is,
    _binary_types,
    _copy_shape,
    _insert_values,
    _preparers,
    bulk_insert,
    insert,
    insert_pair,
    new,
    placeholders,
    rows_per_statement,
    select_rows,
)
from config.rows import (
    _fields as inserted_fields,
)
from events.models import Event
from inboxes import services as inbox_services
from inboxes.models import Inbox
from labels.models import EmailLabel, Label
from mail.models import Attachment, Email, RawMessage

AT = datetime(2026, 11, 24, 12, 30, 15, 123456, tzinfo=UTC)


def _row(obj: models.Model, skip: tuple[str, ...] = ()) -> dict[str, Any]:
    """The stored row of ``obj``, read back through the ORM (bytes as bytes)."""
    stored = type(obj).objects.unscoped().filter(pk=obj.pk).values().get()  # type: ignore[attr-defined]
    return {
        k: bytes(v) if isinstance(v, memoryview) else v for k, v in stored.items() if k not in skip
    }


def _email(inbox: Any, n: int) -> Email:
    return Email(
        workspace_id=inbox.workspace_id,
        inbox=inbox,
        message_id=f"<m{n}@x.example>",
        from_address="a@shop.example",
        from_name="Shöp ✓ 'quoted' \"double\" \\ back",
        to=[{"address": "x@y.example", "name": "X"}],
        headers=[["Subject", "Hi"], ["X-Null", ""]],
        subject=f"Your code is {n:06d}",
        text="line\nnext %s %(x)s {}",
        html="<p>hi</p>",
        preview="hi",
        search_text="hi",
        size=1234 + n,
        references=["<a@b>"],
        extracted={"code": f"{n:06d}", "link": None, "codes": [], "links": []},
        has_attachments=bool(n % 2),
        received_at=AT,
        announced_at=None if n % 2 else AT,
    )


@pytest.mark.django_db
def test_rows_match_bulk_create_for_every_model_of_the_receive_path(workspace: Workspace) -> None:
    inbox = inbox_services.inbox_create(workspace=workspace, local_part="bulk")
    label = Label.objects.create(workspace=workspace, key="otp", name="OTP")
    ours = bulk_insert(Email, [_email(inbox, n) for n in range(3)])
    theirs = Email.objects.bulk_create([_email(inbox, n) for n in range(3)])
    pairs: list[tuple[models.Model, models.Model, tuple[str, ...]]] = [
        (o, t, ("id",)) for o, t in zip(ours, theirs, strict=True)
    ]
    for make in (
        lambda e: RawMessage(email=e, content=b"\x00\xff raw \r\n", sha256="ab" * 32),
        lambda e: Attachment(email=e, position=1, filename="a.pdf", size=3, content=b"%PDF"),
        lambda e: Attachment(  # no bytes: a span of the raw message (NULL in a binary COPY)
            email=e, position=2, size=3, raw_start=10, raw_end=14, transfer_encoding="base64"
        ),
        lambda e: EmailLabel(email=e, label=label, key="otp", source="rule", confidence=0.5),
    ):
        model = type(make(ours[0]))
        mine = bulk_insert(model, [make(e) for e in ours])
        other = model.objects.bulk_create([make(e) for e in theirs])
        skip = ("id", "email_id", "created_at")
        pairs += [(o, t, skip) for o, t in zip(mine, other, strict=True)]
    for obj, same, skip in pairs:
        assert obj.pk is not None and not obj._state.adding and obj._state.db == "default"
        assert _row(obj, skip) == _row(same, skip)


def _inbox(workspace: Workspace, local: str) -> Inbox:
    return Inbox(
        workspace=workspace,
        address=f"{local}@x.example",
        local_part=local,
        domain="x.example",
        tags=["a", "b"],
        smtp_faults=[{"stage": "rcpt", "reply": "451 4.7.1 Later"}],
        expires_at=AT,
        ttl_minutes=5,
    )


@pytest.mark.django_db
def test_insert_stores_what_save_stores(workspace: Workspace) -> None:
    with CaptureQueriesContext(connection) as queries:
        ours = insert(_inbox(workspace, "ours"))
    assert len(queries) == 1 and queries[0]["sql"].startswith("INSERT")
    theirs = _inbox(workspace, "theirs")
    theirs.save()
    assert not ours._state.adding and ours._state.db == "default"
    assert ours.created_at is not None and ours.updated_at is not None  # auto_now(_add)
    skip = ("id", "address", "local_part", "created_at", "updated_at")
    assert _row(ours, skip) == _row(theirs, skip)
    assert _row(ours)["created_at"] == ours.created_at
    # An auto-incremented key comes back.
    event = insert(Event(workspace_id=workspace.pk, type="inbox.created", data={"n": 1}))
    assert Event.objects.unscoped().get(pk=event.pk).data == {"n": 1}


@pytest.mark.django_db(transaction=True)
def test_insert_raises_djangos_integrity_error(workspace: Workspace) -> None:
    insert(_inbox(workspace, "taken"))
    with pytest.raises(IntegrityError), transaction.atomic():
        insert(_inbox(workspace, "taken"))
    assert Inbox.objects.filter(address="taken@x.example").count() == 1


@pytest.mark.django_db
def test_auto_primary_keys_and_auto_now_come_back_in_order(workspace: Workspace) -> None:
    inbox = inbox_services.inbox_create(workspace=workspace, local_part="events")
    events = [
        Event(workspace_id=workspace.pk, inbox_id=inbox.pk, type="email.received", data={"n": n})
        for n in range(5)
    ]
    with CaptureQueriesContext(connection) as queries:
        stored = bulk_insert(Event, events)
    assert len(queries) == 1
    assert [e.pk for e in stored] == sorted(e.pk for e in stored)
    for event in stored:
        row = Event.objects.unscoped().get(pk=event.pk)
        assert row.data == event.data and row.created_at == event.created_at
        assert event.created_at is not None


@pytest.mark.django_db
def test_more_rows_than_one_statement_takes_are_split(workspace: Workspace) -> None:
    inbox = inbox_services.inbox_create(workspace=workspace, local_part="many")
    count = rows_per_statement(Event, 100_000) + 3
    assert count < 100_000
    stored = bulk_insert(
        Event,
        (
            Event(workspace_id=workspace.pk, inbox_id=inbox.pk, type="x", data={"n": n})
            for n in range(count)
        ),
    )
    assert len({e.pk for e in stored}) == count
    assert Event.objects.unscoped().filter(inbox_id=inbox.pk, type="x").count() == count
    assert bulk_insert(Event, []) == []


def _fields(obj: models.Model) -> dict[str, Any]:
    return {f.attname: getattr(obj, f.attname) for f in obj._meta.concrete_fields}


@pytest.mark.django_db
def test_select_rows_reads_what_the_orm_reads(workspace: Workspace) -> None:
    from webhooks.models import Endpoint

    a = inbox_services.inbox_create(workspace=workspace, local_part="ra", tags=["t", "ü"])
    b = inbox_services.inbox_create(workspace=workspace, local_part="rb", ttl_minutes=5)
    Label.objects.create(workspace=workspace, key="otp", name="OTP", rules=[{"field": "subject"}])
    Label.objects.create(workspace=workspace, key="off", name="Off", enabled=False)
    Endpoint.objects.create(
        workspace=workspace,
        url="https://h.example/x",
        events=["email.received"],
        secret_encrypted="s",
    )
    ids = sorted([a.pk, b.pk, "inb_none"])
    cases: list[tuple[list[models.Model], list[models.Model]]] = [
        (
            select_rows(Inbox, f"id IN ({placeholders(3)}) ORDER BY id", ids, lock=True),
            list(Inbox.objects.unscoped().filter(pk__in=ids).order_by("id")),
        ),
        (
            select_rows(Workspace, "id = %s", [workspace.pk]),
            [Workspace.objects.get(pk=workspace.pk)],
        ),
        (
            select_rows(Label, "workspace_id = %s AND enabled = %s", [workspace.pk, True]),
            list(Label.objects.filter(workspace=workspace, enabled=True)),
        ),
        (
            select_rows(Endpoint, "workspace_id = %s", [workspace.pk]),
            list(Endpoint.objects.filter(workspace=workspace)),
        ),
    ]
    for ours, theirs in cases:
        assert ours and [_fields(o) for o in ours] == [_fields(t) for t in theirs]
        assert all(not o._state.adding and o._state.db == "default" for o in ours)
    inboxes = cases[0][0]
    assert inboxes[0].tags == ["t", "ü"] and inboxes[1].expires_at.tzinfo is not None
    assert select_rows(Inbox, "id = %s", ["inb_none"]) == []


@pytest.mark.django_db(transaction=True)
def test_select_rows_reads_a_related_row_in_the_same_statement(
    workspace: Workspace, other_workspace: Workspace
) -> None:
    """``related``: each row with its foreign key's row, as ``select_related`` reads them, in
    one query; only the model's own rows are locked (PostgreSQL: ``FOR UPDATE OF``)."""
    a = inbox_services.inbox_create(workspace=workspace, local_part="ja")
    b = inbox_services.inbox_create(workspace=other_workspace, local_part="jb")
    Workspace.objects.filter(pk=workspace.pk).update(classifier_enabled=False)
    Workspace.objects.filter(pk=other_workspace.pk).update(classifier_enabled=True)
    ids = sorted([a.pk, b.pk])
    where = f'"inboxes_inbox"."id" IN ({placeholders(2)}) ORDER BY "inboxes_inbox"."id"'
    with transaction.atomic(), CaptureQueriesContext(connection) as captured:
        ours = select_rows(Inbox, where, ids, lock=True, related="workspace")
        theirs = list(Inbox.objects.select_related("workspace").filter(pk__in=ids).order_by("id"))
        assert len(captured.captured_queries) == 2  # ours, then the ORM's
        assert [_fields(o) for o in ours] == [_fields(t) for t in theirs]
        assert [_fields(o.workspace) for o in ours] == [_fields(t.workspace) for t in theirs]
        assert [o.workspace.classifier_enabled for o in ours] == [
            i.workspace_id == other_workspace.pk for i in ours
        ]
        if connection.vendor == "postgresql":
            assert 'FOR UPDATE OF "inboxes_inbox"' in captured.captured_queries[0]["sql"]
            # the workspace rows are not locked: another connection may lock them meanwhile
            other = connections.create_connection("default")
            try:
                with other.cursor() as cursor:
                    cursor.execute(
                        "SELECT id FROM apikeys_workspace WHERE id = %s FOR UPDATE NOWAIT",
                        [workspace.pk],
                    )
                    assert cursor.fetchall() == [(workspace.pk,)]
                with other.cursor() as cursor, pytest.raises(Exception, match="obtain lock"):
                    cursor.execute(
                        "SELECT id FROM inboxes_inbox WHERE id = %s FOR UPDATE NOWAIT", [a.pk]
                    )
            finally:
                other.close()


@pytest.mark.postgresql  # SQLite has no COPY: bulk_insert writes INSERTs there
@pytest.mark.parametrize("model", [Email, RawMessage, Attachment, EmailLabel])
def test_the_receive_paths_rows_are_copied_in_binary(model: type[models.Model]) -> None:
    """On PostgreSQL every column of these tables has a binary type."""
    statement, types = _copy_shape(model, "default")
    assert statement.endswith("(FORMAT BINARY)") and types is not None
    assert len(types) == len(inserted_fields(model)[1])  # one per inserted column
    if model is RawMessage:
        assert types == ["varchar", "bytea", "varchar"]  # email_id, content, sha256


def test_a_column_type_without_a_binary_dumper_keeps_the_text_format() -> None:
    fields = [models.CharField(max_length=5), models.DecimalField(max_digits=5, decimal_places=2)]
    assert _binary_types(fields, connection) is None
    assert _binary_types(fields[:1], connection) == ["varchar"]


def test_insert_of_a_model_with_receivers_is_a_save(workspace: Workspace) -> None:
    """``insert`` skips the ORM's signals only where nobody listens: a receiver connected to the
    model (as a later feature might) is called, and the row is stored."""
    from django.db.models.signals import post_save

    heard: list[str] = []

    def receiver(sender: type, instance: Inbox, created: bool, **kwargs: Any) -> None:
        heard.append(instance.address if created else "")

    post_save.connect(receiver, sender=Inbox)
    try:
        inbox = insert(
            Inbox(
                workspace=workspace,
                address="heard@pigeonhole.test",
                local_part="heard",
                domain="pigeonhole.test",
            )
        )
    finally:
        post_save.disconnect(receiver, sender=Inbox)
    assert heard == ["heard@pigeonhole.test"]
    assert Inbox.objects.filter(pk=inbox.pk).exists()


def _full_inbox(workspace: Workspace, local: str) -> Inbox:
    inbox = _inbox(workspace, local)
    inbox.name = "Shöp ✓ 'quoted' \"double\" \\ back %s"
    inbox.agent_name = "agent"
    inbox.allow_senders = ["a@shop.example"]
    inbox.forward_to = "out@elsewhere.example"
    inbox.max_emails = None
    return inbox


@pytest.mark.postgresql  # INSERT in WITH: PostgreSQL only
@pytest.mark.django_db(transaction=True)
def test_insert_pair_stores_what_save_stores(workspace: Workspace) -> None:
    """Both rows as ``save()`` stores them, column by column (text, lists and dicts as jsonb,
    nulls, integers, timestamps, a foreign key), in one statement; the event's key comes back."""
    ours = _full_inbox(workspace, "pair-ours")
    event = Event(
        workspace_id=workspace.pk, inbox_id=ours.pk, type="inbox.created", data={"k": [1]}
    )
    with CaptureQueriesContext(connection) as queries:
        assert insert_pair(ours, event)
    assert len(queries) == 1 and queries[0]["sql"].startswith('WITH "a" AS (INSERT')
    theirs = _full_inbox(workspace, "pair-theirs")
    theirs.save()
    skip = ("id", "address", "local_part", "created_at", "updated_at")
    assert _row(ours, skip) == _row(theirs, skip)
    assert _row(ours)["created_at"] == ours.created_at
    assert not ours._state.adding and not event._state.adding
    stored = Event.objects.unscoped().get(pk=event.pk)
    assert (stored.inbox_id, stored.type, stored.data, stored.prev_id) == (
        ours.pk,
        "inbox.created",
        {"k": [1]},
        None,
    )
    assert stored.created_at == event.created_at


@pytest.mark.postgresql
@pytest.mark.django_db(transaction=True)
def test_insert_pair_writes_neither_row_when_it_cannot_write_both(workspace: Workspace) -> None:
    """Its condition false: False, nothing written. A value too long for its column: refused
    (DataError) as a plain INSERT refuses it, never cut short. A unique violation: Django's
    IntegrityError. Neither row is written in any of these."""

    def pair(inbox: Inbox) -> tuple[Inbox, Event]:
        return inbox, Event(workspace_id=workspace.pk, inbox_id=inbox.pk, type="inbox.created")

    assert not insert_pair(*pair(_inbox(workspace, "never")), where="%s = 1", params=[2])
    long = _inbox(workspace, "x" * 65)  # local_part holds 64
    with pytest.raises(DataError):
        insert_pair(*pair(long))
    assert insert_pair(*pair(_inbox(workspace, "taken")))
    with pytest.raises(IntegrityError):
        insert_pair(*pair(_inbox(workspace, "taken")))
    assert [i.local_part for i in Inbox.objects.filter(workspace=workspace)] == ["taken"]
    assert Event.objects.unscoped().filter(workspace_id=workspace.pk).count() == 1


class _Shouting(models.CharField):
    """A field whose own step changes the value: never taken as it is."""

    def get_prep_value(self, value: Any) -> Any:
        return None if value is None else str(value).upper()


@pytest.mark.django_db
def test_values_taken_as_they_are_are_what_djangos_steps_give(workspace: Workspace) -> None:
    """``_insert_values`` skips ``get_db_prep_save`` for strings, booleans and None in fields
    whose Django steps would return them unchanged; every value, of every model a row of which
    goes in this way, equals (type included) what those steps give."""
    inbox = inbox_services.inbox_create(workspace=workspace, local_part="values")
    email = _email(inbox, 7)
    objs: list[models.Model] = [
        _inbox(workspace, "v"),
        Inbox(workspace=workspace, address="", local_part="", domain="", forward_to=None),
        Event(workspace_id=workspace.pk, inbox_id=inbox.pk, type="inbox.created", data={"n": 1}),
        email,
        RawMessage(email=email, content=b"raw", sha256="ab" * 32),
        Attachment(email=email, position=1, filename="", size=3, content=b"%PDF"),
    ]
    for obj in objs:
        fields = inserted_fields(type(obj))[1]
        theirs = [f.get_db_prep_save(f.pre_save(obj, True), connection) for f in fields]
        ours = _insert_values(obj, connection)
        for field, mine, same in zip(fields, ours, theirs, strict=True):
            now = getattr(field, "auto_now", False) or getattr(field, "auto_now_add", False)
            assert type(mine) is type(same), field.name
            if isinstance(mine, memoryview):  # SQLite's binary columns
                mine, same = bytes(mine), bytes(same)
            assert now or repr(mine) == repr(same), field.name  # auto_now: a new time each call
    # Most of an inbox's values are taken as they are; integers and times only when None, JSON
    # never.
    kinds = {attname: types for _, attname, types in _preparers(Inbox)}
    assert kinds["address"] and kinds["workspace_id"] and kinds["forward_requires_approval"]
    assert kinds["ttl_minutes"] == kinds["expires_at"] == {type(None)} and not kinds["tags"]
    assert not kinds["created_at"]  # auto_now_add: its pre_save sets the time
    assert not _as_is(_Shouting(max_length=5))
    assert _as_is(models.CharField(max_length=5)) == {str, type(None)}


def test_new_makes_the_instance_model_kwargs_makes(workspace: Workspace) -> None:
    """``new`` (positional construction) against ``Model(**values)``: every field's value the
    same, defaults included (an id made per instance aside), the workspace object cached."""
    values = {"address": "n@x.example", "local_part": "n", "domain": "x.example", "ttl_minutes": 5}
    ours, theirs = new(Inbox, workspace=workspace, **values), Inbox(workspace=workspace, **values)
    for field in Inbox._meta.concrete_fields:
        if field.name != "id":
            assert getattr(ours, field.attname) == getattr(theirs, field.attname), field.name
    assert ours.id.startswith("inb_") and ours.id != theirs.id
    assert ours.workspace is workspace and ours.workspace_id == workspace.pk
    assert ours.tags == [] and ours.tags is not new(Inbox, workspace=workspace).tags
    assert new(Inbox, workspace_id=workspace.pk).workspace_id == workspace.pk
    assert new(Inbox, workspace=None).workspace_id is None
    with pytest.raises(TypeError, match="colour"):
        new(Inbox, workspace=workspace, colour="red")
    with pytest.raises(TypeError, match="workspace"):  # the same field twice
        new(Inbox, workspace=workspace, workspace_id=workspace.pk)
