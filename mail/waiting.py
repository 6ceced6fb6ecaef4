"""The server-side wait for email: the one loop that ``GET /inboxes/{id}/wait``, the workspace's
``GET /emails/wait`` (``mail.realtime``) and the MCP tools ``wait_for_email`` /
``get_verification_code`` (``outbox.mcp``) all park in.

It holds no thread and no database connection while it waits: the database work is short
``db_call``s, and the wait itself parks on ``events.listen.listen()`` (the caller's disconnect, a
revoked key, its own timer) and is fed its group's events (the inbox's, or the workspace's for a
workspace-wide wait; woken by ``events.emit`` after commit, by the hub's sweep when wake-ups were
lost) by that group's :class:`_Sieve`, the one hub listener of all its waiters in the process.

The filters (``from``, ``to``, ``header``, ``label``, ``has_code``, ``has_link``, ``link_kind``,
``subject``, ``body``, ``nth``, ``since``, ``timeout``) are validated by :class:`WaitQuery` for
every surface. There is one matcher, :func:`matches` (:func:`amatches` from the event loop: the
same checks, the patterns searched in ``config.patterns``' threads): the first read of the
database (:func:`find`, after SQL pre-filters that only narrow what it reads) and every wake-up
(the email's :class:`Candidate` got once per event and process, whatever the number of waiters;
the sieve checks the filters but the patterns, the waiter runs the whole matcher) judge an email
by it. ``subject`` and ``body`` are user patterns, matched by
``config.patterns`` (a time limit per search, a budget per wait, never on the event loop).

An email counts once it matches: a ``label`` filter re-judges an email when a label lands on it
later (``email.labeled``, ``email.updated``), so a classifier's late label releases the waiter
then. The wait answers once ``nth - 1 + count`` emails matched: the ``count`` emails from the
``nth``, oldest first (by ``received_at``).

A read of stored mail is bounded: it keeps a watermark (the newest email it judged), not the ids
it rejected, so a waiter's memory does not grow with the mail it reads past; it judges at most
``FIND_MAX`` emails per call and stops at the wait's deadline; a later read (lost wake-ups) goes
on from the watermark (a little before it, ``RECHECK_SLACK``, for mail committed late), and a
``label`` wait also re-reads only the emails whose label landed since the previous read.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Q, QuerySet
from django.utils import timezone
from rest_framework import serializers

from apikeys.models import Workspace
from apikeys.principal import Principal
from apikeys.watch import key_watch
from config.api.asgi import Receive, db_call
from config.api.errors import ApiError
from config.patterns import Budget, InvalidPattern, UserPattern, compile_user_pattern
from events import services as events
from events.hub import hub
from events.listen import (
    CLOSED,
    KEEPALIVE,
    TIMEOUT,
    Listener,
    Watch,
    cached,
    inbox_group,
    listen,
)
from events.wake import workspace_group
from inboxes.models import Inbox
from labels.exceptions import UnknownLabel
from labels.models import EmailLabel, Label
from mail.message.htmltext import html_to_text
from mail.models import Email
from mail.selectors import email_record
from mail.serializers import LinkOut, email_record_out

logger = logging.getLogger(__name__)

FIND_BATCH = 500  # emails read at a time when looking for matches
FIND_MAX = 5_000  # emails one read (one db_call) judges at most; the wait then reads on
RECHECK_SLACK = timedelta(seconds=30)  # a later read starts this long before the watermark
MAX_TIMEOUT = 120
MAX_NTH = 100
MAX_COUNT = 100
MAX_HEADERS = 20  # header filters per wait
LINK_KINDS = tuple(LinkOut().fields["kind"].choices)


@dataclass(frozen=True, slots=True)
class Recipient:
    """A ``to`` filter: the local part exactly (plus tag included), the domain in any case."""

    local: str
    domain: str  # lower case

    def matches(self, address: str) -> bool:
        local, at, domain = address.strip().rpartition("@")
        return bool(at) and local == self.local and domain.lower() == self.domain


def _recipient(value: str) -> Recipient:
    local, at, domain = value.strip().rpartition("@")
    if not at or not local or not domain:
        raise serializers.ValidationError("Must be an address: local-part@domain.")
    return Recipient(local, domain.lower())


def _header(value: str) -> tuple[str, str]:
    name, colon, wanted = value.partition(":")
    name = name.strip()
    if not colon or not name:
        raise serializers.ValidationError("Must be `Name: value`.")
    return name.lower(), wanted.strip()


def _pattern(value: str) -> UserPattern:
    try:
        return compile_user_pattern(value)
    except InvalidPattern as exc:
        raise serializers.ValidationError(str(exc)) from None


class WaitQuery(serializers.Serializer):
    """The filters of a wait (REST and MCP); see ``mail.schema`` for each one's documentation."""

    timeout = serializers.IntegerField(min_value=0, max_value=MAX_TIMEOUT, default=30)
    since = serializers.DateTimeField(required=False)
    subject = serializers.CharField(required=False, max_length=500, allow_blank=True)
    to = serializers.CharField(required=False, max_length=320)
    header = serializers.ListField(
        child=serializers.CharField(max_length=1000), required=False, max_length=MAX_HEADERS
    )
    label = serializers.CharField(required=False, max_length=63)
    has_code = serializers.BooleanField(required=False)
    has_link = serializers.BooleanField(required=False)
    link_kind = serializers.ChoiceField(choices=LINK_KINDS, required=False)
    body = serializers.CharField(required=False, max_length=500, allow_blank=True)
    nth = serializers.IntegerField(min_value=1, max_value=MAX_NTH, default=1)

    def get_fields(self) -> dict[str, serializers.Field]:
        fields = super().get_fields()
        fields["from"] = serializers.CharField(required=False, max_length=320, allow_blank=True)
        return fields

    def validate_subject(self, value: str) -> UserPattern:
        return _pattern(value)

    def validate_body(self, value: str) -> UserPattern:
        return _pattern(value)

    def validate_to(self, value: str) -> Recipient:
        return _recipient(value)

    def validate_header(self, value: list[str]) -> list[tuple[str, str]]:
        return [_header(item) for item in value]

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs.get("link_kind") and attrs.get("has_link") is False:
            raise serializers.ValidationError(
                {"link_kind": "A link kind asks for a link: has_link=false contradicts it."}
            )
        return attrs


class EmailsWaitQuery(WaitQuery):
    """``GET /emails/wait``: the wait's filters, across the workspace or one inbox."""

    inbox = serializers.CharField(required=False, max_length=320)
    count = serializers.IntegerField(min_value=1, max_value=MAX_COUNT, default=1)


def check_label(workspace: Workspace, query: dict[str, Any]) -> None:
    """A ``label`` the workspace has no label for is ``unknown_label`` (as on email lists)."""
    key = query.get("label")
    if key and not Label.objects.filter(workspace=workspace, key=key).exists():
        raise UnknownLabel(issues=[{"path": "label", "message": "No label with this key."}])


class ClientGone(Exception):
    """The caller disconnected while waiting: there is nobody to answer."""


def watch_key(principal: Principal) -> Watch | None:
    """Tells the listener (with the error) when the request's key stops working: revoked,
    expired or deleted keys end waits about a query after the change commits, and within
    ``settings.KEY_WATCH_SECONDS`` plus a query in any case (``apikeys.watch``)."""
    key = principal.key
    if key is None:
        return None
    return lambda signal: key_watch().watch(principal.workspace.pk, key.pk, signal)


# --- the matcher ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Candidate:
    """What the matcher looks at of an email (``body`` and ``labels`` only when asked for)."""

    id: str
    inbox_id: str
    received_at: datetime
    read: bool
    from_address: str
    from_name: str
    subject: str
    envelope_to: str
    headers: list
    extracted: dict
    # Every envelope recipient stored with the email (several for sandbox mail, captured with
    # SMTP credentials); empty for rows stored before the field, whose one is envelope_to.
    envelope_recipients: list
    body: str | None = None
    labels: frozenset[str] | None = None


_FIELDS = (
    "pk",
    "inbox_id",
    "received_at",
    "read",
    "from_address",
    "from_name",
    "subject",
    "envelope_to",
    "headers",
    "extracted",
    "envelope_recipients",
)


def from_matches(sender_address: str, sender_name: str, query: dict[str, Any]) -> bool:
    wanted_from = (query.get("from") or "").lower()
    return not wanted_from or wanted_from in f"{sender_name} <{sender_address}>".lower()


def _has_header(headers: Iterable[Any], name: str, value: str) -> bool:
    return any(
        isinstance(item, list | tuple)
        and len(item) == 2
        and str(item[0]).strip().lower() == name
        and str(item[1]).strip() == value
        for item in headers
    )


def recipients_of(email: Candidate) -> list[str]:
    """The email's envelope recipients: all of them (sandbox mail has any number), or the one
    ``envelope_to`` of a row stored before they were recorded."""
    return list(email.envelope_recipients or ()) or [email.envelope_to]


def _fields_match(email: Candidate, query: dict[str, Any], since: datetime) -> bool:
    """Every filter but the patterns."""
    if email.received_at < since:
        return False
    if query.get("inbox_id") and email.inbox_id != query["inbox_id"]:
        return False
    if query.get("unread_only") and email.read:  # not a REST parameter: get_verification_code's
        return False
    if not from_matches(email.from_address, email.from_name, query):
        return False
    recipient: Recipient | None = query.get("to")
    if recipient is not None and not any(
        recipient.matches(address) for address in recipients_of(email)
    ):
        return False
    if not all(_has_header(email.headers, n, v) for n, v in query.get("header") or ()):
        return False
    if query.get("label") and query["label"] not in (email.labels or ()):
        return False
    extracted = email.extracted or {}
    if "has_code" in query and bool(extracted.get("code")) != query["has_code"]:
        return False
    links = [link for link in extracted.get("links") or () if isinstance(link, dict)]
    if "has_link" in query and bool(links or extracted.get("link")) != query["has_link"]:
        return False
    kind = query.get("link_kind")
    return not kind or any(link.get("kind") == kind for link in links)


def _searches(email: Candidate, query: dict[str, Any]) -> list[tuple[UserPattern, str]]:
    searches = []
    if query.get("subject") is not None:
        searches.append((query["subject"], email.subject))
    if query.get("body") is not None:
        searches.append((query["body"], email.body or ""))
    return searches


def matches(email: Candidate, query: dict[str, Any], since: datetime, budget: Budget) -> bool:
    """Whether an email passes the wait's filters; blocking (call it from a thread)."""
    return _fields_match(email, query, since) and all(
        pattern.search(text, budget).matched for pattern, text in _searches(email, query)
    )


async def amatches(
    email: Candidate, query: dict[str, Any], since: datetime, budget: Budget
) -> bool:
    """:func:`matches` from the event loop: the patterns run in ``config.patterns``' threads."""
    if not _fields_match(email, query, since):
        return False
    for pattern, text in _searches(email, query):
        if not (await pattern.asearch(text, budget)).matched:
            return False
    return True


def _needs(query: dict[str, Any]) -> tuple[bool, bool]:
    """Whether the matcher needs the body, the labels."""
    return query.get("body") is not None, bool(query.get("label"))


def _candidates(
    workspace_id: str, rows: QuerySet[Email], *, body: bool, labels: bool
) -> list[Candidate]:
    """The candidates of ``rows`` (ordered and sliced by the caller)."""
    fields = (*_FIELDS, "text", "html") if body else _FIELDS
    values = list(rows.values_list(*fields))
    keys: dict[str, set[str]] = {}
    if labels and values:
        applied = EmailLabel.objects.filter(
            email__workspace_id=workspace_id, email_id__in=[row[0] for row in values]
        ).values_list("email_id", "key")
        for email_id, key in applied:
            keys.setdefault(email_id, set()).add(key)
    found = []
    for row in values:
        text = None
        if body:
            plain, html = row[len(_FIELDS)], row[len(_FIELDS) + 1]
            text = plain or (html_to_text(html) if html else "")
        found.append(
            Candidate(
                *row[: len(_FIELDS)],
                body=text,
                labels=frozenset(keys.get(row[0], ())) if labels else None,
            )
        )
    return found


@db_call
def load_candidate(workspace_id: str, email_id: str, body: bool, labels: bool) -> Candidate | None:
    rows = Email.objects.filter(workspace_id=workspace_id, pk=email_id)
    found = _candidates(workspace_id, rows, body=body, labels=labels)
    return found[0] if found else None


def _prefiltered(rows: QuerySet[Email], query: dict[str, Any]) -> QuerySet[Email]:
    """SQL that only narrows what :func:`find` reads: the matcher still judges every row."""
    recipient: Recipient | None = query.get("to")
    if recipient is not None:
        rows = rows.filter(
            Q(
                envelope_to__startswith=f"{recipient.local}@",
                envelope_to__iendswith=f"@{recipient.domain}",
            )
            # Sandbox mail: any of its envelope recipients (the JSON text holds it quoted).
            | Q(envelope_recipients__icontains=f'"{recipient.local}@{recipient.domain}"')
        )
    if query.get("label"):
        rows = rows.filter(email_labels__key=query["label"])
    if query.get("unread_only"):
        rows = rows.filter(read=False)
    return rows


# --- the wait -----------------------------------------------------------------------------------

Accept = Callable[[dict[str, Any]], bool]


@dataclass
class Progress:
    """One wait's judgements: the emails that matched (id -> order, at most ``needed``: the wait
    answers then) and a watermark of what the reads judged, never the ids that did not match."""

    needed: int
    matched: dict[str, tuple[datetime, str]] = field(default_factory=dict)
    records: dict[str, dict] = field(default_factory=dict)  # accepted records, kept
    read_upto: tuple[datetime, str] | None = None  # the newest email a read judged
    labels_from: datetime | None = None  # a label wait's next read: labels that landed since

    @property
    def done(self) -> bool:
        return len(self.matched) >= self.needed

    def judged(self, email: Candidate, matched: bool) -> None:
        if matched:
            self.matched[email.id] = (email.received_at, email.id)


def _record(workspace: Workspace, email_id: str) -> dict | None:
    """The email as getEmail writes it, by getEmail's one-statement read (the ORM's three
    statements and its prefetch left reference cycles for the garbage collector per answer)."""
    try:
        return email_record_out(email_record(workspace, email_id))
    except ApiError:
        return None  # deleted in the meantime


def _accepted(
    workspace: Workspace, email_id: str, accept: Accept | None, progress: Progress
) -> bool:
    if accept is None:
        return True
    record = _record(workspace, email_id)
    if record is None or not accept(record):
        return False
    progress.records[email_id] = record
    return True


def _judge_rows(
    workspace: Workspace,
    rows: QuerySet[Email],
    query: dict[str, Any],
    since: datetime,
    progress: Progress,
    budget: Budget,
    accept: Accept | None,
    stop_at: float,
    *,
    advance: bool,
) -> bool:
    """Judges ``rows`` oldest first, in pages of ``FIND_BATCH``, until enough matched, the rows
    end (False), or ``FIND_MAX`` were judged or ``stop_at`` passed once a page was (True: there
    may be more; a wait with ``timeout=0`` still judges a page). ``advance`` moves the
    watermark past what was judged."""
    body, labels = _needs(query)
    after: tuple[datetime, str] | None = None
    judged = 0
    while not progress.done:
        page = rows
        if after is not None:
            page = page.filter(
                Q(received_at__gt=after[0]) | Q(received_at=after[0], pk__gt=after[1])
            )
        batch = _candidates(
            workspace.pk,
            page.order_by("received_at", "pk")[:FIND_BATCH],
            body=body,
            labels=labels,
        )
        for email in batch:
            after = (email.received_at, email.id)
            if advance and (progress.read_upto is None or after > progress.read_upto):
                progress.read_upto = after
            judged += 1
            if email.id not in progress.matched:
                progress.judged(
                    email,
                    matches(email, query, since, budget)
                    and _accepted(workspace, email.id, accept, progress),
                )
            if progress.done:
                return False
            if judged >= FIND_BATCH and time.monotonic() >= stop_at:
                return True
        if len(batch) < FIND_BATCH:
            return False
        if judged >= FIND_MAX:
            return True
    return False


@db_call
def find(
    workspace: Workspace,
    inbox: Inbox | None,
    since: datetime,
    query: dict[str, Any],
    progress: Progress,
    budget: Budget,
    accept: Accept | None = None,
    *,
    stop_at: float = math.inf,
    rewind: bool = False,
) -> bool:
    """Judges the emails received at or after ``since`` (of ``inbox``, else of the workspace)
    that the previous reads did not (after ``progress.read_upto``), oldest first, until enough
    matched or the mail ends (a long run of mail that does not match cannot hide a match; a
    pattern that spends the wait's ``budget`` matches nothing more). True when it stopped
    first, at ``FIND_MAX`` emails or at ``stop_at`` (``time.monotonic()``): call it again to
    read on. ``rewind`` (a read for lost wake-ups) starts ``RECHECK_SLACK`` before the
    watermark, and a ``label`` wait then also judges the older emails whose label landed since
    the previous read. ``accept`` looks at a match's record too (``get_verification_code``:
    one with a code)."""
    started = timezone.now()
    if inbox is not None:
        scope = Email.objects.filter(inbox=inbox, received_at__gte=since)
    else:
        scope = Email.objects.filter(workspace=workspace, received_at__gte=since)
    scope = _prefiltered(scope, query)
    mark = progress.read_upto
    if query.get("label") and rewind and mark is not None and progress.labels_from is not None:
        landed = EmailLabel.objects.filter(
            key=query["label"], created_at__gte=progress.labels_from
        ).values("email_id")
        relabeled = scope.filter(pk__in=landed, received_at__lte=mark[0])
        if _judge_rows(
            workspace, relabeled, query, since, progress, budget, accept, stop_at, advance=False
        ):
            return True
    if query.get("label") and (progress.labels_from is None or rewind):
        progress.labels_from = started - RECHECK_SLACK
    rows = scope
    if mark is not None and rewind:
        rows = rows.filter(received_at__gte=mark[0] - RECHECK_SLACK)
    elif mark is not None:
        rows = rows.filter(Q(received_at__gt=mark[0]) | Q(received_at=mark[0], pk__gt=mark[1]))
    return _judge_rows(
        workspace, rows, query, since, progress, budget, accept, stop_at, advance=True
    )


async def _read(
    workspace: Workspace,
    inbox: Inbox | None,
    since: datetime,
    query: dict[str, Any],
    progress: Progress,
    budget: Budget,
    accept: Accept | None,
    deadline: float,
    *,
    rewind: bool,
) -> None:
    """:func:`find` until the mail ends, enough matched or ``deadline`` (event-loop time)."""
    loop = asyncio.get_running_loop()
    more = True
    while more and not progress.done:
        stop_at = time.monotonic() + (deadline - loop.time())
        more = await find(
            workspace, inbox, since, query, progress, budget, accept, stop_at=stop_at, rewind=rewind
        )
        rewind = False
        if loop.time() >= deadline:
            return


@db_call
def _records(workspace: Workspace, ids: list[str], known: dict[str, dict]) -> list[dict | None]:
    return [known[pk] if pk in known else _record(workspace, pk) for pk in ids]


@db_call
def _judge_accept(
    workspace: Workspace, email_id: str, accept: Accept | None, progress: Progress
) -> bool:
    return _accepted(workspace, email_id, accept, progress)


# Filters whose facts ``email.received``'s data does not carry (the candidate is then read).
_READ_FOR = ("to", "header", "body", "label", "has_link", "link_kind", "unread_only")


def _announced(message: dict[str, Any]) -> Candidate | None:
    """The candidate ``email.received``'s data describes (sender, subject, code, arrival: what
    the event carries of the stored row), or None when it is not that event's or is malformed."""
    if message.get("event") != events.EMAIL_RECEIVED:
        return None
    email = (message.get("data") or {}).get("email") or {}
    sender = email.get("from") or {}
    try:
        received_at = datetime.fromisoformat(email["received_at"])
        return Candidate(
            id=email["id"],
            inbox_id=message["inbox_id"],
            received_at=received_at,
            read=False,
            from_address=sender.get("address") or "",
            from_name=sender.get("name") or "",
            subject=email.get("subject") or "",
            envelope_to="",
            envelope_recipients=[],
            headers=[],
            extracted={"code": (email.get("verification") or {}).get("code")},
        )
    except (KeyError, TypeError, ValueError):
        return None


async def _woken_candidate(
    message: dict[str, Any], workspace: Workspace, email_id: str, query: dict[str, Any]
) -> Candidate | None:
    """The candidate of a wake-up's email: from ``email.received``'s own data when the query
    looks at nothing else, else read once per message and process for all the waiters it wakes
    (they await the same read)."""
    if not any(query.get(name) is not None for name in _READ_FOR):
        announced = cached(message, "wait-announced", lambda: _announced(message))
        if announced is not None:
            return announced
    body, labels = _needs(query)

    def read() -> asyncio.Future[Candidate | None]:
        return asyncio.ensure_future(load_candidate(workspace.pk, email_id, body, labels))

    task = cached(message, f"wait-candidate:{workspace.pk}:{body}:{labels}", read)
    return await asyncio.shield(task)


def _rejudges(event: str | None, query: dict[str, Any]) -> bool:
    """Whether an event can make an email match: its arrival; a label change if labels count."""
    if event == events.EMAIL_RECEIVED:
        return True
    return bool(query.get("label")) and event in (events.EMAIL_LABELED, events.EMAIL_UPDATED)


RECHECK = object()  # a waiter's signal: wake-ups were lost or could not be judged, read the log


@dataclass(eq=False)
class _Parked:
    """A waiter as its group's :class:`_Sieve` sees it."""

    workspace: Workspace
    query: dict[str, Any]
    since: datetime
    listener: Listener  # the waiter's own (signals only): the sieve pushes it its candidates

    @property
    def recipient(self) -> tuple[str, str] | None:
        to: Recipient | None = self.query.get("to")
        return (to.local, to.domain) if to is not None else None


def _recipient_key(address: str) -> tuple[str, str] | None:
    """The ``to`` filter an envelope recipient passes (as :meth:`Recipient.matches` reads it)."""
    local, at, domain = address.strip().rpartition("@")
    return (local, domain.lower()) if at else None


class _Sieve:
    """The one hub listener of a group's waiters in this process: it reads each wake-up once,
    gets the email's candidate once (per kind of read the waiters need), and hands it only to
    the waiters whose filters (all but the patterns, :func:`_fields_match`) it passes; they run
    the whole matcher themselves. Waiters with a ``to`` filter are looked up by the email's
    recipient, so a thousand waiters on one inbox, each waiting for its own plus tag, cost one
    lookup per email, not a thousand coroutines woken nor a thousand checks."""

    def __init__(self, group: str) -> None:
        self.group = group
        self.by_recipient: dict[tuple[str, str], set[_Parked]] = {}
        self.others: set[_Parked] = set()
        self.ready: asyncio.Future[Listener] = asyncio.ensure_future(hub().listen(group))
        self.task: asyncio.Task[None] | None = None

    @property
    def empty(self) -> bool:
        return not self.others and not self.by_recipient

    def waiters(self) -> list[_Parked]:
        return [*self.others, *(w for group in self.by_recipient.values() for w in group)]

    def add(self, waiter: _Parked) -> None:
        key = waiter.recipient
        if key is None:
            self.others.add(waiter)
        else:
            self.by_recipient.setdefault(key, set()).add(waiter)

    def discard(self, waiter: _Parked) -> None:
        key = waiter.recipient
        if key is None:
            self.others.discard(waiter)
            return
        group = self.by_recipient.get(key)
        if group is not None:
            group.discard(waiter)
            if not group:
                del self.by_recipient[key]

    def start(self) -> None:
        if self.task is None:
            self.task = asyncio.ensure_future(self._run())

    def close(self) -> None:
        if self.task is not None:
            self.task.cancel()
        if self.ready.done() and not self.ready.cancelled() and self.ready.exception() is None:
            hub().leave(self.ready.result())
        else:
            self.ready.cancel()

    async def _run(self) -> None:
        listener = await self.ready
        while True:
            message = await listener.get()
            if listener.lagged:  # dropped wake-ups: every waiter reads the log
                listener.lagged = False
                for waiter in self.waiters():
                    waiter.listener.signal(RECHECK)
            try:
                await self._sift(message)
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("wait: a wake-up could not be judged; the waiters read the log")
                for waiter in self.waiters():
                    waiter.listener.signal(RECHECK)

    async def _sift(self, message: dict[str, Any]) -> None:
        event = message.get("event")
        if event not in (events.EMAIL_RECEIVED, events.EMAIL_LABELED, events.EMAIL_UPDATED):
            return
        email_id = ((message.get("data") or {}).get("email") or {}).get("id")
        if not email_id:
            return
        waiters = list(self.others)
        if self.by_recipient:  # those waiting for this email's recipient, looked up by it
            some = next(iter(next(iter(self.by_recipient.values()))))
            email = await _woken_candidate(message, some.workspace, email_id, some.query)
            keys = {_recipient_key(a) for a in recipients_of(email)} if email is not None else ()
            for key in keys:
                waiters += self.by_recipient.get(key, ()) if key is not None else ()
        for waiter in waiters:
            if not _rejudges(event, waiter.query):
                continue
            email = await _woken_candidate(message, waiter.workspace, email_id, waiter.query)
            if email is not None and _fields_match(email, waiter.query, waiter.since):
                waiter.listener.push({"candidate": email})


_sieves: dict[tuple[asyncio.AbstractEventLoop, str], _Sieve] = {}


@contextlib.asynccontextmanager
async def _sifted(waiter: _Parked, group: str) -> AsyncIterator[None]:
    """``waiter`` registered with its group's sieve (subscribed before the body runs)."""
    key = (asyncio.get_running_loop(), group)
    sieve = _sieves.get(key)
    if sieve is None:
        sieve = _sieves[key] = _Sieve(group)
    sieve.add(waiter)
    try:
        await asyncio.shield(sieve.ready)
        sieve.start()
        yield
    finally:
        sieve.discard(waiter)
        if sieve.empty and _sieves.get(key) is sieve:
            del _sieves[key]
            sieve.close()


async def wait_for_emails(
    *,
    principal: Principal,
    query: dict[str, Any],
    since: datetime,
    deadline: float,
    inbox: Inbox | None = None,
    count: int = 1,
    receive: Receive | None = None,
    tick: Callable[[], Awaitable[None]] | None = None,
    tick_seconds: float = 5.0,
    accept: Accept | None = None,
) -> list[dict] | None:
    """The full records of the ``count`` emails from the ``nth`` match on (oldest first) of the
    emails of ``inbox`` (else of the principal's workspace) received at or after ``since``, or
    None once the event loop's clock passes ``deadline`` before that many matched.

    Raises :class:`ClientGone` when ``receive`` reports a disconnect, and the key's error
    (``unauthorized``) when the key is revoked or expires meanwhile. ``tick`` is awaited every
    ``tick_seconds`` while nothing has arrived (MCP progress notifications); ``accept``, when
    given, must also approve a matching email's record."""
    workspace = principal.workspace
    if inbox is not None:
        query = {**query, "inbox_id": inbox.pk}
    nth = query.get("nth") or 1
    budget = Budget()
    progress = Progress(needed=nth - 1 + count)
    group = inbox_group(inbox.pk) if inbox is not None else workspace_group(workspace.pk)
    async with (
        listen(None, receive=receive, watch=watch_key(principal)) as listener,
        _sifted(_Parked(workspace, query, since, listener), group),  # before the first read
    ):
        await _read(
            workspace, inbox, since, query, progress, budget, accept, deadline, rewind=False
        )
        listener.signal_at(deadline, TIMEOUT)
        if tick is not None:
            listener.signal_every(tick_seconds, KEEPALIVE)
        while True:
            if progress.done:
                ordered = sorted(progress.matched, key=progress.matched.__getitem__)
                answer = ordered[nth - 1 : nth - 1 + count]
                records = await _records(workspace, answer, progress.records)
                if all(record is not None for record in records):
                    return records  # type: ignore[return-value]
                for email_id, record in zip(answer, records, strict=True):
                    if record is None:  # deleted meanwhile: it no longer counts
                        del progress.matched[email_id]
                continue
            message = await listener.get()
            if message is CLOSED:
                raise ClientGone()
            if isinstance(message, ApiError):  # the key was revoked or expired meanwhile
                raise message
            if message is TIMEOUT:
                return None
            if message is KEEPALIVE:
                if tick is not None:
                    await tick()
                continue
            if message is RECHECK or listener.lagged:  # the log knows what was missed
                listener.lagged = False
                await _read(
                    workspace, inbox, since, query, progress, budget, accept, deadline, rewind=True
                )
                continue
            email: Candidate = message["candidate"]  # its fields match: the sieve checked
            if email.id in progress.matched:
                continue  # judged again otherwise: a read may have passed it before its commit
            matched = await amatches(email, query, since, budget)
            if matched and accept is not None:
                matched = await _judge_accept(workspace, email.id, accept, progress)
            progress.judged(email, matched)


async def wait_for_email(
    *,
    principal: Principal,
    inbox: Inbox,
    query: dict[str, Any],
    since: datetime,
    deadline: float,
    receive: Receive | None = None,
    tick: Callable[[], Awaitable[None]] | None = None,
    tick_seconds: float = 5.0,
    accept: Accept | None = None,
) -> dict | None:
    """The ``nth`` (default first) email of ``inbox`` that matches ``query`` and arrived at or
    after ``since`` (its full API record), or None at ``deadline``: :func:`wait_for_emails`."""
    found = await wait_for_emails(
        principal=principal,
        query=query,
        since=since,
        deadline=deadline,
        inbox=inbox,
        receive=receive,
        tick=tick,
        tick_seconds=tick_seconds,
        accept=accept,
    )
    return found[0] if found else None


def deadline_after(seconds: float) -> float:
    """The event-loop time ``seconds`` from now (the time spent looking counts too)."""
    return asyncio.get_running_loop().time() + seconds
