"""Reads of emails, raw messages and attachments; every lookup is scoped to a workspace."""

from __future__ import annotations

import functools
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, OperationalError, connection, transaction
from django.db.models import (
    BooleanField,
    Count,
    F,
    Func,
    JSONField,
    Prefetch,
    Q,
    QuerySet,
    TextField,
)
from django.db.models.functions import Cast, Substr, TruncHour
from django.utils import timezone

from apikeys.models import Workspace
from config.api.errors import NotFound, ValidationFailed
from config.django_adapter import prepared_cursor
from config.rows import placeholders
from inboxes import selectors as inbox_selectors
from inboxes.models import Inbox
from labels import rules as rules_engine
from labels.classifier.base import EmailFacts, facts_of
from labels.exceptions import UnknownLabel
from labels.models import EmailLabel, Label
from mail.authentication import results as authentication_results
from mail.exceptions import AttachmentNotFound, EmailNotFound
from mail.message import mbox
from mail.message.parsing import decode_part
from mail.models import Attachment, Email, RawMessage
from mail.query import AUTH_OPERATORS, QueryError, Term, parse

LIST_FIELDS = (
    "id",
    "inbox_id",
    "workspace_id",
    "from_address",
    "from_name",
    "to",
    "subject",
    "preview",
    "read",
    "starred",
    "has_attachments",
    "received_at",
)


def _with_labels(queryset: QuerySet[Email]) -> QuerySet[Email]:
    return queryset.prefetch_related(
        Prefetch("email_labels", queryset=EmailLabel.objects.order_by("created_at", "pk"))
    )


class BodyMatches(Func):
    """True where the text body has the words of ``words`` (in that order when ``phrase``),
    through the full-text index of the 0005 migration: on PostgreSQL the generated column
    ``body_tsv`` (``to_tsvector('simple', left(text, 100000))``, not a model field) and its
    GIN index; on SQLite the FTS5 table ``mail_email_fts``. A single word is
    ``plainto_tsquery`` (no recheck of the row), a phrase ``phraseto_tsquery``."""

    output_field = BooleanField()

    def __init__(self, words: str, *, phrase: bool) -> None:
        super().__init__(F("id"))
        self.words = words
        self.phrase = phrase

    def as_postgresql(self, compiler: Any, connection: Any, **extra: Any) -> tuple[str, list]:
        pk, params = compiler.compile(self.source_expressions[0])
        # The row's body_tsv, under whatever alias the query gives the table.
        column = pk.rsplit(".", 1)[0] + '."body_tsv"' if "." in pk else '"body_tsv"'
        function = "phraseto_tsquery" if self.phrase else "plainto_tsquery"
        return f"{column} @@ {function}('simple'::regconfig, %s)", [*params, self.words]

    def as_sqlite(self, compiler: Any, connection: Any, **extra: Any) -> tuple[str, list]:
        pk, params = compiler.compile(self.source_expressions[0])
        # One FTS5 phrase (the words in order), quoted as FTS5 quotes strings: never syntax.
        phrase = '"' + self.words.replace('"', '""') + '"'
        sql = f"{pk} IN (SELECT email_id FROM mail_email_fts WHERE mail_email_fts MATCH %s)"
        return sql, [*params, phrase]


class HeaderMatches(Func):
    """True where the email has a header named ``name`` (ASCII case-insensitive), with the
    value ``value`` (case-insensitive, whole value, surrounding space ignored) when given."""

    output_field = BooleanField()

    def __init__(self, name: str, value: str | None) -> None:
        super().__init__(F("headers"))
        self.name = name.lower()
        self.value = value.lower() if value is not None else None

    def _sql(self, compiler: Any, rows: str, name: str, value: str) -> tuple[str, list]:
        headers, params = compiler.compile(self.source_expressions[0])
        sql = f"EXISTS (SELECT 1 FROM {rows.format(headers)} WHERE lower({name}) = %s"
        params = [*params, self.name]
        if self.value is not None:
            sql += f" AND lower(trim({value})) = %s"
            params.append(self.value)
        return sql + ")", params

    def as_postgresql(self, compiler: Any, connection: Any, **extra: Any) -> tuple[str, list]:
        return self._sql(compiler, "jsonb_array_elements({}) h", "h->>0", "h->>1")

    def as_sqlite(self, compiler: Any, connection: Any, **extra: Any) -> tuple[str, list]:
        return self._sql(
            compiler,
            "json_each({}) h",
            "json_extract(h.value, '$[0]')",
            "json_extract(h.value, '$[1]')",
        )


class AuthResult(Func):
    """True where the email's ``authentication`` verdict has ``mechanism`` with ``result``:
    ``spf``, ``dmarc`` and ``arc`` their one result; ``dkim`` any signature's, ``none`` no
    signature at all. An email that was not checked (null) matches nothing."""

    output_field = BooleanField()

    def __init__(self, mechanism: str, result: str) -> None:
        super().__init__(F("authentication"))
        self.mechanism, self.result = mechanism, result

    def _sql(self, compiler: Any, one: str, each: str, count: str) -> tuple[str, list]:
        column, params = compiler.compile(self.source_expressions[0])
        if self.mechanism != "dkim":
            return f"({one.format(column)}) = %s", [*params, self.mechanism, self.result]
        if self.result == "none":
            return f"{count.format(column)} = 0", list(params)
        return f"EXISTS (SELECT 1 FROM {each.format(column)} = %s)", [*params, self.result]

    def as_postgresql(self, compiler: Any, connection: Any, **extra: Any) -> tuple[str, list]:
        return self._sql(
            compiler,
            "{}->%s->>'result'",
            "jsonb_array_elements({}->'dkim') d WHERE d->>'result'",
            "jsonb_array_length({}->'dkim')",
        )

    def as_sqlite(self, compiler: Any, connection: Any, **extra: Any) -> tuple[str, list]:
        return self._sql(
            compiler,
            "json_extract({}, '$.' || %s || '.result')",
            "json_each({}, '$.dkim') d WHERE json_extract(d.value, '$.result')",
            "json_array_length({}, '$.dkim')",
        )


def _invalid(term: Term | QueryError, message: str) -> ValidationFailed:
    """The 400 validation_error of a malformed ``q``: the issue names the term and where."""
    source = term.source if isinstance(term, Term) else term.term
    text = f"{message} Term `{source}` at character {term.position}."
    return ValidationFailed(f"q: {text}", issues=[{"path": "q", "message": text}])


def _term_filter(workspace: Workspace, term: Term) -> Q:
    """The filter of one term of ``q`` (not yet negated)."""
    value = term.value
    if term.field == "text":
        # Sender and subject (and the preview) as q always searched them, or the whole body.
        return Q(search_text__contains=value.lower()) | Q(BodyMatches(value, phrase=term.phrase))
    if term.field == "from":
        return Q(from_address__icontains=value) | Q(from_name__icontains=value)
    if term.field == "to":
        return (
            Q(envelope_to__icontains=value)
            | Q(envelope_recipients__icontains=value)  # sandbox mail: every recipient
            | Q(to_text__icontains=value)
        )
    if term.field == "subject":
        return Q(subject__icontains=value)
    if term.field == "label":
        if not Label.objects.filter(workspace=workspace, key=value).exists():
            raise _invalid(term, "No label with this key.")
        return Q(pk__in=EmailLabel.objects.filter(key=value).values("email_id"))
    if term.field == "inbox":
        try:
            inbox = inbox_selectors.inbox_get(workspace, value)
        except NotFound:
            raise _invalid(term, "No inbox with this id or address.") from None
        return Q(inbox=inbox)
    if term.field == "header":
        return Q(HeaderMatches(value, term.header_value))
    if term.field == "has":
        if value == "attachment":
            return Q(has_attachments=True)
        key = "code" if value == "code" else "link"
        return Q(extracted__has_key=key) & ~Q(**{f"extracted__{key}": None})
    if term.field == "is":
        return Q(starred=True) if value == "starred" else Q(read=value == "read")
    if term.field in AUTH_OPERATORS:
        return Q(AuthResult(term.field, value))
    if term.field == "before":
        return Q(received_at__lt=term.when)
    return Q(received_at__gte=term.when)  # after


def email_search(workspace: Workspace, queryset: QuerySet[Email], q: str) -> QuerySet[Email]:
    """``queryset`` filtered by the query ``q`` (the language of :mod:`mail.query`; every
    term ANDed); a malformed query, a ``label:`` the workspace has no label for or an
    ``inbox:`` it has no inbox for is a 400 validation_error naming the term and its position.
    Sender and subject terms also filter on ``search_text`` (which holds both, lower-cased)
    where that is the same, so its trigram index can help."""
    try:
        terms = parse(q)
    except QueryError as exc:
        raise _invalid(exc, exc.message) from None
    if any(t.field == "to" for t in terms):
        queryset = queryset.annotate(to_text=Cast("to", TextField()))
    for term in terms:
        condition = _term_filter(workspace, term)
        if term.negated:
            queryset = queryset.filter(~condition)
            continue
        queryset = queryset.filter(condition)
        if term.field in ("from", "subject"):
            queryset = queryset.filter(search_text__contains=term.value.lower())
    return queryset


@contextmanager
def search_time_limit(q: str) -> Iterator[None]:
    """Around the database work of a list filtered by ``q``: its statements may take at most
    ``SEARCH_TIMEOUT_MS`` together (PostgreSQL: ``statement_timeout`` for the transaction;
    SQLite: a progress handler that interrupts the statement past the deadline). Up to
    :data:`mail.query.MAX_TERMS` unindexed terms (``header:``, ``to:``, negations) read every
    email of the workspace; a search that runs out of time is a 400 validation_error on ``q``
    that says so, and the connection is left as it was. No ``q``: no limit."""
    if not q:
        yield
        return
    limit_ms = settings.SEARCH_TIMEOUT_MS
    stopped = False
    try:
        with transaction.atomic():
            if connection.vendor == "postgresql":
                with connection.cursor() as cursor:
                    cursor.execute(
                        "SELECT current_setting('statement_timeout'), "
                        "set_config('statement_timeout', %s, true)",
                        [f"{limit_ms}ms"],
                    )
                    (previous, _) = cursor.fetchone()
                yield
                with connection.cursor() as cursor:  # the rest of an enclosing transaction
                    cursor.execute("SELECT set_config('statement_timeout', %s, true)", [previous])
            else:
                connection.ensure_connection()
                deadline = time.monotonic() + limit_ms / 1000

                def past_deadline() -> int:
                    nonlocal stopped
                    stopped = time.monotonic() > deadline
                    return int(stopped)

                connection.connection.set_progress_handler(past_deadline, 10_000)
                try:
                    yield
                finally:
                    connection.connection.set_progress_handler(None, 0)
    except OperationalError as exc:
        cancelled = getattr(exc.__cause__, "sqlstate", None) == "57014"  # query_canceled
        if not (cancelled or stopped):
            raise
        message = (
            f"The search took longer than {limit_ms} ms and was stopped. Narrow it with "
            "terms the index serves (words, from:, subject:, inbox:, after:/before:)."
        )
        raise ValidationFailed(
            f"q: {message}", issues=[{"path": "q", "message": message}]
        ) from None


def email_list(
    workspace: Workspace,
    *,
    inbox: Inbox | None = None,
    q: str = "",
    label: str = "",
    unread: bool | None = None,
    since: datetime | None = None,
) -> QuerySet[Email]:
    """Emails of the workspace (or one of its inboxes) matching the list filters; ``q`` is a
    query of :mod:`mail.query` (:func:`email_search`); a ``label`` the workspace has no label
    for is ``unknown_label`` (a misspelt key is not an empty list)."""
    queryset = Email.objects.filter(workspace=workspace)
    if inbox is not None:
        queryset = queryset.filter(inbox=inbox)
    if q:
        queryset = email_search(workspace, queryset, q)
    if label:
        if not Label.objects.filter(workspace=workspace, key=label).exists():
            # The key is not echoed: the client sent it, and the path names the parameter.
            raise UnknownLabel(issues=[{"path": "label", "message": "No label with this key."}])
        queryset = queryset.filter(email_labels__key=label)
    if unread is not None:
        queryset = queryset.filter(read=not unread)
    if since is not None:
        queryset = queryset.filter(received_at__gt=since)
    return _with_labels(queryset.only(*LIST_FIELDS))


def email_get(workspace: Workspace, email_id: str) -> Email:
    """The full email record, or not_found."""
    email = (
        _with_labels(Email.objects.filter(workspace=workspace, pk=email_id))
        .prefetch_related(Prefetch("attachments", queryset=Attachment.objects.defer("content")))
        .first()
    )
    if email is None:
        raise EmailNotFound()
    return email


@dataclass(frozen=True)
class EmailRecord:
    """An email as getEmail shows it: the row, its labels (key, source, confidence; oldest
    first) and its attachments without their bytes (id, filename, content_type, size,
    content_id, inline; by position)."""

    email: Email
    labels: list[tuple[str, str, float]]
    attachments: list[tuple[str, str, str, int, str, bool]]


@functools.cache
def _record_statement() -> tuple[str, list[str], list[int]]:
    """PostgreSQL: the email's whole row, its labels and its attachments in one statement (the
    two lists aggregated to JSON text by subqueries), the attribute names of the row, and the
    indexes of its JSON columns (read as text, decoded by orjson). Parameters: the email's id,
    then the workspace's.

    The row is read by its primary key, then held to the workspace: the inner ``OFFSET 0`` keeps
    PostgreSQL from merging the two conditions and choosing a workspace index instead, which it
    did wherever the table had no statistics yet (autovacuum off, or a table just loaded): it
    walked every email of the workspace to find one (0.2 ms of PostgreSQL at 500 emails, growing
    with the workspace; tests/test_query_counts.py checks the plan)."""
    fields = Email._meta.concrete_fields
    names = [f.attname for f in fields]
    json_columns = [i for i, f in enumerate(fields) if isinstance(f, JSONField)]
    select = ", ".join(f'e."{f.column}"' for f in fields)
    columns = ", ".join(f'"{f.column}"' for f in fields)
    labels, attachments = EmailLabel._meta.db_table, Attachment._meta.db_table
    sql = (
        f"SELECT {select}, "
        "(SELECT coalesce(json_agg(json_build_array(l.key, l.source, l.confidence) "
        f"ORDER BY l.created_at, l.id), '[]')::text FROM \"{labels}\" l WHERE l.email_id = e.id), "
        "(SELECT coalesce(json_agg(json_build_array(a.id, a.filename, a.content_type, a.size, "
        f"a.content_id, a.inline) ORDER BY a.position, a.id), '[]')::text "
        f'FROM "{attachments}" a WHERE a.email_id = e.id) '
        f'FROM (SELECT {columns} FROM "{Email._meta.db_table}" WHERE "id" = %s OFFSET 0) e '
        "WHERE e.workspace_id = %s"
    )
    return sql, names, json_columns


def email_record(workspace: Workspace, email_id: str) -> EmailRecord:
    """getEmail's read of one email of the workspace, or not_found: on PostgreSQL one
    statement (the ORM's three — the email, its labels, its attachments — each compiled anew
    per request, were about half of the request's CPU); elsewhere :func:`email_get`'s."""
    if connection.vendor != "postgresql":
        email = email_get(workspace, email_id)
        return EmailRecord(
            email,
            [(row.key, row.source, row.confidence) for row in email.email_labels.all()],
            [
                (a.id, a.filename, a.content_type, a.size, a.content_id, a.inline)
                for a in email.attachments.all()
            ],
        )
    sql, names, json_columns = _record_statement()
    with prepared_cursor(connection) as cursor:
        cursor.execute(sql, [email_id, workspace.pk])
        row = cursor.fetchone()
    if row is None:
        raise EmailNotFound()
    values = list(row[: len(names)])
    for index in json_columns:
        if values[index] is not None:
            values[index] = orjson.loads(values[index])
    email = Email.from_db(DEFAULT_DB_ALIAS, names, values)
    # json_agg writes a confidence of 1.0 as 1: read back as the float the column holds, so the
    # record says 1.0 as the list endpoints do.
    labels = [(key, source, float(confidence)) for key, source, confidence in orjson.loads(row[-2])]
    attachments = [tuple(x) for x in orjson.loads(row[-1])]
    return EmailRecord(email, labels, attachments)  # type: ignore[arg-type]


def email_raw(workspace: Workspace, email_id: str) -> bytes:
    """The message exactly as received."""
    email = Email.objects.filter(workspace=workspace, pk=email_id).select_related("raw").first()
    if email is None:
        raise EmailNotFound()
    return bytes(email.raw.content)


def attachment_get(workspace: Workspace, email_id: str, attachment_id: str) -> Attachment:
    """An attachment of one of the workspace's emails (its bytes: :func:`attachment_content`)."""
    attachment = Attachment.objects.filter(
        pk=attachment_id, email_id=email_id, email__workspace=workspace
    ).first()
    if attachment is None:
        raise AttachmentNotFound()
    return attachment


def attachment_content(workspace: Workspace, attachment: Attachment) -> bytes:
    """The attachment's bytes (see :func:`attachment_contents`)."""
    return attachment_contents(workspace, [attachment])[attachment.pk]


def attachment_contents(
    workspace: Workspace, attachments: Sequence[Attachment]
) -> dict[str, bytes]:
    """Attachment id -> bytes, for attachments of one email: as stored, or decoded from their
    spans of the raw message. At most two queries whatever their number: one for stored bytes
    a caller deferred, one for every span's substring of the raw message (only those are read)."""
    if len({a.email_id for a in attachments}) > 1:
        raise ValueError("attachment_contents reads the attachments of one email")
    found: dict[str, bytes] = {}
    spans = [
        (a, a.raw_start, a.raw_end)
        for a in attachments
        if a.raw_start is not None and a.raw_end is not None
    ]
    stored = [a for a in attachments if a.raw_start is None or a.raw_end is None]
    deferred = [a.pk for a in stored if "content" in a.get_deferred_fields()]
    if deferred:
        rows = Attachment.objects.filter(pk__in=deferred, email__workspace=workspace)
        found |= {pk: bytes(content) for pk, content in rows.values_list("pk", "content")}
    found |= {a.pk: bytes(a.content) for a in stored if a.pk not in deferred}
    if spans:
        parts = {
            f"part_{n}": Substr("content", start + 1, end - start)
            for n, (_, start, end) in enumerate(spans)
        }
        row = (
            RawMessage.objects.filter(email_id=spans[0][0].email_id, email__workspace=workspace)
            .annotate(**parts)
            .values(*parts)
            .first()
        )
        if row is None:
            raise AttachmentNotFound()
        for n, (attachment, _, _) in enumerate(spans):
            found[attachment.pk] = decode_part(
                bytes(row[f"part_{n}"]), attachment.transfer_encoding
            )
    if len(found) != len({a.pk for a in attachments}):
        raise AttachmentNotFound()
    return found


def email_count_since(workspace: Workspace, since: datetime) -> int:
    """Mail received since ``since`` (the ``(workspace, received_at)`` index)."""
    return Email.objects.filter(workspace=workspace, received_at__gte=since).count()


def email_ids_existing(workspace: Workspace, ids: set[str]) -> set[str]:
    """Which of these email ids still exist in the workspace (one primary-key lookup)."""
    if not ids:
        return set()
    return set(Email.objects.filter(workspace=workspace, pk__in=ids).values_list("pk", flat=True))


def hourly_received(
    workspace: Workspace, hours: int = 72, now: datetime | None = None
) -> list[tuple[datetime, int]]:
    """Mail received per UTC hour, oldest first, ``hours`` buckets ending with the current hour
    (hours without mail included as 0). One grouped range query on ``(workspace, received_at)``;
    ``COUNT(*)`` keeps it an index-only scan."""
    now = now or timezone.now()
    current = now.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    start = current - timedelta(hours=hours - 1)
    counts = {
        row["hour"]: row["n"]
        for row in Email.objects.filter(
            workspace=workspace,
            received_at__gte=start,
            received_at__lt=current + timedelta(hours=1),
        )
        .annotate(hour=TruncHour("received_at", tzinfo=UTC))
        .values("hour")
        .annotate(n=Count("*"))
        .order_by()
    }
    buckets = [start + timedelta(hours=i) for i in range(hours)]
    return [(hour, counts.get(hour, 0)) for hour in buckets]


def label_test_facts(
    workspace: Workspace, data: dict[str, Any]
) -> tuple[rules_engine.Facts, EmailFacts]:
    """The facts ``POST /labels/test`` (and the MCP ``test_labels`` tool) judge: a stored
    email's when ``data`` names one (``email_id``), else the ``from``/``subject``/``text``
    given."""
    if data.get("email_id"):
        return stored_email_facts(workspace, data["email_id"])
    rule_facts = rules_engine.Facts(
        from_address=data["from"], subject=data["subject"], text=data["text"]
    )
    facts = EmailFacts(
        from_address=data["from"], from_name="", subject=data["subject"], text=data["text"]
    )
    return rule_facts, facts


def stored_email_facts(
    workspace: Workspace, email_id: str
) -> tuple[rules_engine.Facts, EmailFacts]:
    """Rule and classifier facts of a stored email (``POST /labels/test`` with ``email_id``)."""
    email = (
        Email.objects.filter(workspace=workspace, pk=email_id)
        .prefetch_related(
            Prefetch("attachments", queryset=Attachment.objects.only("id", "email_id", "filename"))
        )
        .first()
    )
    if email is None:
        raise NotFound("No such email.")
    names = [a.filename for a in email.attachments.all() if a.filename]
    to = [a.get("address", "") for a in [*email.to, *email.cc]]
    rule_facts = rules_engine.Facts(
        from_address=email.from_address,
        from_name=email.from_name,
        to=to,
        subject=email.subject,
        text=email.text,
        html=email.html,
        headers=[tuple(h) for h in email.headers],
        attachment_names=names,
        authentication=authentication_results(email.authentication),
    )
    return rule_facts, facts_of(email)


def recent_emails(workspace: Workspace, limit: int = 20) -> list[dict]:
    """``[{id, subject, from_address, received_at}]`` of the newest emails of the workspace,
    to test labels on (the label editor)."""
    return list(
        Email.objects.filter(workspace=workspace)
        .order_by("-id")
        .values("id", "subject", "from_address", "received_at")[:limit]
    )


# --- storage figures -----------------------------------------------------------------------------
#
# What an email counts in its inbox's ``stored_bytes``: the bytes the database keeps for its raw
# message and for each attachment kept apart from it (one read from its span of the raw message
# keeps no bytes of its own). On PostgreSQL that is ``pg_column_size()`` of each stored value:
# after TOAST's LZ4 compression for a value that compressed (over about 2 KB), the bytes as written
# for one that did not, with the varlena header of a value kept inline. The function reads the
# size from the stored datum (inline, or the external TOAST pointer) without decompressing or
# fetching the TOAST chunks. SQLite compresses nothing: ``length()``, the bytes as written.
# The receive path reads its rows' sizes back once they are stored (``stored_sizes``: an
# ``INSERT … RETURNING pg_column_size(…)`` would answer the size before TOAST); every path that
# deletes mail subtracts ``stored_bytes_of`` the same rows before it deletes them.


def size_function() -> str:
    """The SQL function giving the bytes the database stores for one binary value."""
    return "pg_column_size" if connection.vendor == "postgresql" else "length"


def stored_bytes_sql(emails: str) -> str:
    """One statement summing what the emails whose ids the subquery ``emails`` selects count in
    ``stored_bytes`` (raw messages plus attachments kept apart); its parameters are the
    subquery's, twice."""
    size = size_function()
    return (
        f"SELECT COALESCE(SUM(n), 0) FROM (SELECT {size}(content) AS n "
        f"FROM {RawMessage._meta.db_table} WHERE email_id IN ({emails}) UNION ALL "
        f"SELECT {size}(content) FROM {Attachment._meta.db_table} "
        f"WHERE email_id IN ({emails}) AND content IS NOT NULL) AS stored"
    )


def stored_bytes_of(workspace_id: str, email_ids: Sequence[str]) -> int:
    """What these emails of the workspace count in their inboxes' ``stored_bytes``, read from
    the rows as stored (before the caller deletes them)."""
    if not email_ids:
        return 0
    ids = list(email_ids)
    emails = (
        f"SELECT id FROM {Email._meta.db_table} "
        f"WHERE workspace_id = %s AND id IN ({placeholders(len(ids))})"
    )
    scope = [workspace_id, *ids]
    with connection.cursor() as cursor:
        cursor.execute(stored_bytes_sql(emails), [*scope, *scope])
        return int(cursor.fetchone()[0])


STORED_SIZES = (
    f"SELECT email_id, pg_column_size(content) FROM {RawMessage._meta.db_table} "
    "WHERE email_id = ANY(%s)"
)
STORED_SIZES_APART = (
    f"{STORED_SIZES} UNION ALL SELECT email_id, pg_column_size(content) "
    f"FROM {Attachment._meta.db_table} WHERE email_id = ANY(%s) AND content IS NOT NULL"
)


def stored_sizes(email_ids: Sequence[str], apart: Sequence[str] = ()) -> dict[str, int]:
    """PostgreSQL: email id -> the bytes its raw message and attachments kept apart take as
    stored (TOAST has compressed them by the time the insert returns), for emails the caller
    has just inserted in its transaction; ``apart`` names those of them with attachments kept
    apart (the others have none to read). One query, whose text is one of two whatever the
    number of emails (so psycopg prepares it)."""
    sizes = dict.fromkeys(email_ids, 0)
    with connection.cursor() as cursor:
        if apart:
            cursor.execute(STORED_SIZES_APART, [list(email_ids), list(apart)])
        else:
            cursor.execute(STORED_SIZES, [list(email_ids)])
        for email_id, size in cursor.fetchall():
            sizes[email_id] += size
    return sizes


@dataclass(frozen=True)
class ExportEntry:
    """One message of an inbox's export, without its bytes: what its ``From_`` line needs."""

    id: str
    envelope_from: str
    received_at: datetime
    size: int


def inbox_export_page(
    workspace: Workspace, inbox: Inbox, *, after: str = "", limit: int = 200
) -> list[ExportEntry]:
    """The inbox's next ``limit`` messages after the id ``after``, oldest first, without their
    bytes (keyset pages over ``(inbox, -id)``): an export reads its inbox a page at a time and
    holds no transaction between pages."""
    rows = (
        Email.objects.filter(workspace=workspace, inbox=inbox, pk__gt=after)
        .order_by("pk")
        .values_list("pk", "envelope_from", "received_at", "size")[:limit]
    )
    return [ExportEntry(*row) for row in rows]


def raw_contents(workspace: Workspace, email_ids: Sequence[str]) -> dict[str, bytes]:
    """The raw messages of these emails of the workspace, by email id."""
    rows = RawMessage.objects.filter(email__workspace=workspace, email_id__in=list(email_ids))
    return {pk: bytes(content) for pk, content in rows.values_list("email_id", "content")}


EXPORT_BATCH_BYTES = 4 * 1024 * 1024  # raw bytes read per query (one larger message: alone)


def inbox_mbox(workspace: Workspace, inbox: Inbox) -> Iterator[bytes]:
    """The inbox's mail as an mboxrd file, oldest first, a few megabytes at a time: each
    page of ids is read without bytes, then their raw messages in batches of about
    ``EXPORT_BATCH_BYTES`` (a larger message alone), so memory stays flat however large the
    inbox; nothing is held open between queries."""
    after = ""
    while entries := inbox_export_page(workspace, inbox, after=after):
        batch: list[ExportEntry] = []
        size = 0
        for entry in [*entries, None]:
            if entry is not None and (not batch or size + entry.size <= EXPORT_BATCH_BYTES):
                batch.append(entry)
                size += entry.size
                continue
            raws = raw_contents(workspace, [e.id for e in batch])
            yield b"".join(
                mbox.entry(e.envelope_from, e.received_at, raws[e.id])
                for e in batch
                if e.id in raws  # deleted since the page was read
            )
            del raws
            batch, size = ([entry], entry.size) if entry is not None else ([], 0)
        after = entries[-1].id


async def inbox_mbox_async(workspace: Workspace, inbox: Inbox) -> AsyncIterator[bytes]:
    """:func:`inbox_mbox` for an ASGI server: each step (its queries) in the thread that runs
    the project's sync code, the event loop free meanwhile (Django would otherwise read a
    sync iterator to its end into a list before sending the first byte)."""
    parts = inbox_mbox(workspace, inbox)
    step = sync_to_async(next)
    while (part := await step(parts, None)) is not None:
        yield part


def emails_received_before(
    workspace_id: str, cutoff: datetime, *, since: datetime | None = None, limit: int
) -> list[tuple[str, str, datetime]]:
    """``(email id, inbox id, received_at)`` of the workspace's oldest mail received before
    ``cutoff`` and not before ``since`` (the ``(workspace, received_at)`` index), at most
    ``limit``: the retention sweep's chunk. ``since`` is the last chunk's newest time: the scan
    then starts past the index entries of the rows just deleted (not yet vacuumed, a purge
    that always began at the oldest end would step over all of them every time)."""
    rows = Email.objects.filter(workspace_id=workspace_id, received_at__lt=cutoff)
    if since is not None:
        rows = rows.filter(received_at__gte=since)
    return list(rows.order_by("received_at").values_list("pk", "inbox_id", "received_at")[:limit])


def email_ids_of_inbox(
    workspace_id: str, inbox_id: str, *, after: str = "", limit: int
) -> list[str]:
    """The ids of an inbox's oldest ``limit`` emails after the id ``after`` (the ``(inbox,
    -id)`` index; keyset, for the reason :func:`emails_received_before` gives)."""
    return list(
        Email.objects.filter(workspace_id=workspace_id, inbox_id=inbox_id, pk__gt=after)
        .order_by("pk")
        .values_list("pk", flat=True)[:limit]
    )
