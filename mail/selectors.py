"""Reads of emails, raw messages and attachments; every lookup is scoped to a workspace."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db.models import BooleanField, Count, F, Func, Prefetch, Q, QuerySet, TextField
from django.db.models.functions import Cast, Substr, TruncHour
from django.utils import timezone

from apikeys.models import Workspace
from config.api.errors import NotFound, ValidationFailed
from inboxes import selectors as inbox_selectors
from inboxes.models import Inbox
from labels import rules as rules_engine
from labels.classifier.base import EmailFacts, facts_of
from labels.exceptions import UnknownLabel
from labels.models import EmailLabel, Label
from mail.exceptions import AttachmentNotFound, EmailNotFound
from mail.message.parsing import decode_part
from mail.models import Attachment, Email, RawMessage
from mail.query import QueryError, Term, parse

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
        return Q(envelope_to__icontains=value) | Q(to_text__icontains=value)
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
