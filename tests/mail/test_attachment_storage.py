"""How a received message's bytes are stored: an attachment keeps the span of its encoded bytes in
the raw message instead of a second copy, rows stored with their bytes (before that change, or
where there is no span) still read, the row cannot hold neither, and on PostgreSQL the large
columns are compressed with LZ4."""

from __future__ import annotations

import base64
import hashlib
from email.message import EmailMessage
from types import SimpleNamespace

import pytest
from django.db import DatabaseError, IntegrityError, connection, transaction
from django.test import Client
from django.test.utils import CaptureQueriesContext

from apikeys.models import Workspace
from inboxes import services as inbox_services
from inboxes.models import Inbox
from mail import pipeline
from mail.models import Attachment, RawMessage
from tests.conftest import Api, error_of
from tests.factories import MembershipFactory
from tests.mail.messages import PDF, PNG, message

CSV = b"day,count\r\nmon,3\r\ntue,\xc3\xa9\r\n"  # 8-bit: the email package encodes it


@pytest.fixture
def inbox(workspace: Workspace) -> Inbox:
    return inbox_services.inbox_create(workspace=workspace, local_part="store")


def deliver(inbox: Inbox, raw: bytes) -> str:
    delivery = pipeline.receive_one(raw, to=inbox.address)
    assert delivery.email_id, delivery
    return delivery.email_id


def download(api: Api, email_id: str, attachment_id: str) -> bytes:
    response = api.get(f"/api/v1/emails/{email_id}/attachments/{attachment_id}")
    assert response.status_code == 200
    return response.content


def test_attachments_are_stored_as_spans_and_read_back_byte_for_byte(
    api: Api, inbox: Inbox
) -> None:
    files = [("a.pdf", "application/pdf", PDF), ("b.csv", "text/csv", CSV)]
    raw = message(to=inbox.address, attachments=files, html="<p>Hi</p>", inline_png="logo")
    email_id = deliver(inbox, raw)

    rows = list(Attachment.objects.filter(email_id=email_id).order_by("position"))
    assert [row.filename for row in rows] == ["", "a.pdf", "b.csv"]  # the inline PNG first
    for row in rows:
        assert row.content is None
        assert row.raw_start is not None and row.raw_end is not None
        assert 0 < row.raw_start < row.raw_end <= len(raw)
        assert row.transfer_encoding == "base64"
    stored = bytes(RawMessage.objects.get(email_id=email_id).content)
    assert stored == raw  # the raw message is the one copy
    for row, expected in zip(rows, [PNG, PDF, CSV], strict=True):
        body = download(api, email_id, row.pk)
        assert hashlib.sha256(body).hexdigest() == hashlib.sha256(expected).hexdigest()
        assert row.size == len(expected)


def test_the_dashboard_reads_spans_for_downloads_and_inline_images(
    workspace: Workspace, inbox: Inbox
) -> None:
    raw = message(
        to=inbox.address,
        html='<p>Hi <img src="cid:logo"></p>',
        inline_png="logo",
        attachments=[("a.pdf", "application/pdf", PDF)],
    )
    email_id = deliver(inbox, raw)
    client = Client()
    client.force_login(MembershipFactory(workspace=workspace, role="member").user)

    document = client.get(f"/emails/{email_id}/html")
    assert document.status_code == 200
    assert f"data:image/png;base64,{base64.b64encode(PNG).decode()}" in document.text
    pdf = Attachment.objects.get(email_id=email_id, filename="a.pdf")
    assert pdf.content is None
    response = client.get(f"/emails/{email_id}/attachments/{pdf.pk}")
    assert response.status_code == 200 and response.content == PDF


def _with_images(to: str, cids: list[str]) -> bytes:
    msg = EmailMessage()
    msg["From"], msg["To"], msg["Subject"] = "shop@service.example", to, "Images"
    msg.set_content("text")
    msg.add_alternative("".join(f'<img src="cid:{cid}">' for cid in cids), subtype="html")
    html_part = msg.get_payload()[-1]
    for cid in cids:
        html_part.add_related(PNG, "image", "png", cid=f"<{cid}>")
    return msg.as_bytes()


def test_inline_images_are_read_in_the_same_queries_however_many(
    workspace: Workspace, inbox: Inbox
) -> None:
    """The framed HTML document inlines every cid: image: one query for all their spans, not
    two per image as before."""
    client = Client()
    client.force_login(MembershipFactory(workspace=workspace, role="member").user)
    png = f"data:image/png;base64,{base64.b64encode(PNG).decode()}"
    counts = []
    for images in (1, 4):
        raw = _with_images(inbox.address, [f"img{n}" for n in range(images)])
        email_id = deliver(inbox, raw)
        with CaptureQueriesContext(connection) as queries:
            document = client.get(f"/emails/{email_id}/html")
        assert document.status_code == 200 and document.text.count(png) == images
        counts.append(len(queries))
    assert counts[0] == counts[1]


def test_an_attachment_stored_with_its_bytes_still_reads(api: Api, inbox: Inbox) -> None:
    email_id = deliver(inbox, message(to=inbox.address, attachments=[("a.pdf", "x/y", PDF)]))
    row = Attachment.objects.get(email_id=email_id)
    # As a row written before attachments kept spans: the bytes, no span.
    Attachment.objects.filter(pk=row.pk).update(
        content=b"the bytes as stored", raw_start=None, raw_end=None, transfer_encoding=""
    )
    assert download(api, email_id, row.pk) == b"the bytes as stored"


def test_bytes_not_found_as_they_are_in_the_raw_message_are_stored(api: Api, inbox: Inbox) -> None:
    # Bare CR line endings: parsing reads a rewritten copy, so there is no span of the raw.
    raw = (
        f"To: {inbox.address}\rSubject: old Mac\rContent-Type: application/x-thing\r\rone\rtwo\r"
    ).encode()
    email_id = deliver(inbox, raw)
    row = Attachment.objects.get(email_id=email_id)
    assert row.content is not None and bytes(row.content) == b"one\ntwo\n"
    assert row.raw_start is None and row.raw_end is None
    assert download(api, email_id, row.pk) == b"one\ntwo\n"


@pytest.mark.parametrize(
    "encoding", [b"\x00 bogus", b"quot\x00ed-printable", b"x-" + b"long" * 20, b"gzip"]
)
def test_an_unknown_transfer_encoding_keeps_the_bytes(
    api: Api, inbox: Inbox, encoding: bytes
) -> None:
    # Parsing leaves such a body as it is; the row stores it rather than an encoding name that
    # may be junk (a NUL cannot go into a text column).
    raw = (
        f"To: {inbox.address}\r\nContent-Type: application/x-thing\r\n".encode()
        + b"Content-Transfer-Encoding: "
        + encoding
        + b"\r\nContent-Disposition: attachment; filename=t.bin\r\n\r\nbody bytes\r\n"
    )
    email_id = deliver(inbox, raw)
    row = Attachment.objects.get(email_id=email_id)
    assert row.content is not None and row.raw_start is None and row.transfer_encoding == ""
    assert download(api, email_id, row.pk) == bytes(row.content)
    assert b"body bytes" in download(api, email_id, row.pk)


def test_a_row_with_neither_bytes_nor_span_is_refused(inbox: Inbox) -> None:
    email_id = deliver(inbox, message(to=inbox.address, attachments=[("a.pdf", "x/y", PDF)]))
    row = Attachment.objects.get(email_id=email_id)
    with pytest.raises(IntegrityError), transaction.atomic():
        Attachment.objects.filter(pk=row.pk).update(raw_start=None)
    row.refresh_from_db()
    assert row.raw_start is not None  # unchanged


def test_another_workspace_cannot_read_the_span(api: Api, other_api: Api, inbox: Inbox) -> None:
    email_id = deliver(inbox, message(to=inbox.address, attachments=[("a.pdf", "x/y", PDF)]))
    row = Attachment.objects.get(email_id=email_id)
    response = other_api.get(f"/api/v1/emails/{email_id}/attachments/{row.pk}")
    assert error_of(response) == (404, "not_found")
    assert download(api, email_id, row.pk) == PDF


@pytest.mark.postgresql  # SQLite has no TOAST; the migration leaves it alone (tested below)
def test_large_columns_are_compressed_with_lz4_on_postgresql(inbox: Inbox) -> None:
    filler = "A line of a long message body that compresses well enough.\n" * 400
    email_id = deliver(inbox, message(to=inbox.address, text=filler, html=f"<pre>{filler}</pre>"))
    stored = RawMessage.objects.get(email_id=email_id)
    assert filler.splitlines()[0].encode() in bytes(stored.content)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_column_compression(r.content), pg_column_compression(e.text), "
            "pg_column_compression(e.html) FROM mail_rawmessage r "
            "JOIN mail_email e ON e.id = r.email_id WHERE r.email_id = %s",
            [email_id],
        )
        assert cursor.fetchone() == ("lz4", "lz4", "lz4")
        cursor.execute(
            "SELECT c.relname || '.' || a.attname, a.attcompression FROM pg_attribute a "
            "JOIN pg_class c ON c.oid = a.attrelid WHERE c.relname IN "
            "('mail_rawmessage', 'mail_attachment', 'mail_email', 'webhooks_event', "
            "'webhooks_delivery', 'outbox_outboxitem') AND a.attcompression <> ''"
        )
        assert dict(cursor.fetchall()) == {
            column: "l"
            for column in [
                "mail_rawmessage.content",
                "mail_attachment.content",
                "mail_email.text",
                "mail_email.html",
                "mail_email.search_text",
                "mail_email.body_tsv",  # the body's full-text index column (mail 0005)
                "mail_email.headers",
                "mail_email.extracted",
                "webhooks_event.data",
                "webhooks_delivery.body",
                "outbox_outboxitem.raw",
                "outbox_outboxitem.text",
                "outbox_outboxitem.html",
            ]
        }


def test_the_compression_migrations_can_be_written_out_again() -> None:
    """``squashmigrations`` writes every operation out: the LZ4 operation serializes, and it is
    reversible to the default method."""
    from django.db.migrations.writer import OperationWriter

    from config.postgresql.compression import use_lz4

    operation = use_lz4(("mail_rawmessage", "content"))
    text, imports = OperationWriter(operation).serialize()
    assert "config.postgresql.compression._execute" in text and "import functools" in imports
    assert operation.reversible
    assert operation.code.keywords == {
        "columns": (("mail_rawmessage", "content"),),
        "method": "lz4",
    }
    assert operation.reverse_code.keywords["method"] == "default"


@pytest.mark.parametrize("vendor", ["sqlite", "mysql"])
def test_the_compression_migration_leaves_other_databases_alone(
    vendor: str, caplog: pytest.LogCaptureFixture
) -> None:
    """On a database other than PostgreSQL the operation does nothing: the editor it is given
    here has no ``execute`` nor ``quote_name``, so any statement would raise."""
    from config.postgresql.compression import _execute

    editor = SimpleNamespace(connection=SimpleNamespace(vendor=vendor, alias="default"))
    for method in ("lz4", "zstd", "default"):
        _execute(None, editor, columns=(("mail_rawmessage", "content"),), method=method)
    assert caplog.records == []


@pytest.mark.postgresql
def test_a_server_without_the_method_keeps_the_default(
    db: None, caplog: pytest.LogCaptureFixture
) -> None:
    """Where the server refuses the method (built without LZ4), the migration warns and goes
    on, and the columns keep what they had; a failing reversal still fails."""
    from config.postgresql.compression import _execute

    columns = (("mail_rawmessage", "content"),)
    with connection.schema_editor() as editor:
        _execute(None, editor, columns=columns, method="zstd")  # not a PostgreSQL 15 method
    assert "keep PostgreSQL's default compression" in caplog.text
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT attcompression FROM pg_attribute WHERE attrelid = 'mail_rawmessage'::regclass "
            "AND attname = 'content'"
        )
        assert cursor.fetchone() == ("l",)
    with pytest.raises(DatabaseError), connection.schema_editor() as editor:
        _execute(None, editor, columns=(("mail_rawmessage", "no_such_column"),), method="default")
