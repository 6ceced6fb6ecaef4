"""Reads of domains and inboxes."""

from __future__ import annotations

import dataclasses
import functools
import hmac
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connection
from django.db.models import Count, Q, QuerySet, Sum, TextField
from django.db.models.functions import Cast
from django.utils import timezone

from apikeys import epoch, tokens
from apikeys.models import Workspace
from config.api.errors import NotFound
from config.django_adapter import prepared_cursor
from config.rows import placeholders, select_rows
from inboxes.addresses import canonical_address, is_under
from inboxes.exceptions import InvalidDomain, NoDomain
from inboxes.models import Domain, Inbox, SmtpCredential

SMTP_PASSWORD_PREFIX = "pgs_"  # sandbox SMTP passwords (apikeys.tokens' format, this prefix)


@dataclass(frozen=True)
class DomainInfo:
    domain: str
    shared: bool
    catch_all: bool
    default: bool
    verified: bool  # receives mail and takes new inboxes (shared domains always)
    row: Domain | None = None  # a custom domain's row: its verification record and last check


def domain_list(workspace: Workspace) -> list[DomainInfo]:
    """Shared domains first, then the workspace's own, verified or not; the first verified
    one is the default."""
    names = list(dict.fromkeys(settings.INBOX_DOMAINS))
    custom = [d for d in _custom_domains(workspace) if d.domain not in names]
    rows = [DomainInfo(d, True, False, False, True) for d in names]
    rows += [DomainInfo(d.domain, False, d.catch_all, False, d.verified, d) for d in custom]
    for index, row in enumerate(rows):
        if row.verified:
            rows[index] = dataclasses.replace(row, default=True)
            break
    return rows


_DOMAIN_FIELDS = [f.attname for f in Domain._meta.concrete_fields]
_MAX_CACHED = 10_000  # workspaces whose custom domains a process keeps; beyond it, start over
_cached: dict[str, tuple[bytes, list[tuple]]] = {}


def _custom_domains(workspace: Workspace) -> list[Domain]:
    """The workspace's custom domains (its ``Meta.ordering``), each call with instances of its
    own. Kept per process under the credentials epoch the request's key was checked against
    (``apikeys.epoch.seen``), which every write of a domain moves: POST /inboxes resolves the
    default domain on every create, and this was a fifth of its CPU. A workspace read without
    the key cache (dashboard, workers, embedded mode) reads the rows every time."""
    current = epoch.seen(workspace)
    if current is not None:
        entry = _cached.get(workspace.pk)
        if entry is not None and entry[0] == current:
            return [Domain.from_db(DEFAULT_DB_ALIAS, _DOMAIN_FIELDS, list(v)) for v in entry[1]]
    rows = list(Domain.objects.filter(workspace=workspace))
    if current is not None:
        if len(_cached) >= _MAX_CACHED:
            _cached.clear()
        _cached[workspace.pk] = (
            current,
            [tuple(getattr(row, name) for name in _DOMAIN_FIELDS) for row in rows],
        )
    return rows


def domain_info(workspace: Workspace, domain: Domain) -> DomainInfo:
    """One custom domain of the workspace as ``domain_list`` shows it."""
    for info in domain_list(workspace):
        if info.row is not None and info.row.pk == domain.pk:
            return dataclasses.replace(info, row=domain)
    # A claim named like a shared domain, from before that was refused: listed nowhere.
    return DomainInfo(domain.domain, False, domain.catch_all, False, domain.verified, domain)


def domain_get(workspace: Workspace, name: str) -> Domain:
    """One custom domain of the workspace by name, else not_found (whatever the reason)."""
    wanted = name.strip().lower().rstrip(".")
    row = Domain.objects.filter(workspace=workspace, domain=wanted).first()
    if row is None:
        raise NotFound("No such custom domain in this workspace.")
    return row


def domain_resolve(workspace: Workspace, name: str | None) -> DomainInfo:
    """The domain a new inbox gets: ``name`` if the workspace may use it, else the default."""
    rows = domain_list(workspace)
    usable = [row for row in rows if row.verified]
    if not usable:
        pending = "; custom domains take inboxes once verified" if rows else ""
        raise NoDomain(f"No domain is available for new inboxes{pending}.")
    if name is None or name == "":
        return usable[0]
    wanted = name.strip().lower().rstrip(".")
    for row in rows:
        if row.domain == wanted and not row.verified:
            assert row.row is not None  # shared domains are always verified
            raise InvalidDomain(
                f"The domain '{wanted}' is not verified yet: publish the TXT record "
                f"{row.row.record_name} with the value {row.row.record_value}, then verify it "
                f"(POST /domains/{wanted}/verify)."
            )
        if row.domain == wanted:
            return row
    raise InvalidDomain(f"The domain '{name}' is not available to this workspace.")


def inbox_get(workspace: Workspace, id_or_address: str) -> Inbox:
    """One inbox of the workspace by id or full address, else not_found (whatever the reason).

    An address resolves as the SMTP receiver resolves a recipient (``canonical_address``: lower
    case, plus tag removed), so ``alpha+x@…`` names the inbox its mail lands in."""
    ref = id_or_address.strip()
    queryset = Inbox.objects.filter(workspace=workspace)
    if "@" in ref:
        inbox = queryset.filter(address=canonical_address(ref)).first()
    else:
        inbox = queryset.filter(pk=ref).first()
    if inbox is None:
        raise NotFound("No such inbox.")
    return inbox


def inbox_list(
    workspace: Workspace,
    *,
    q: str = "",
    tag: str = "",
    agent: str = "",
    include_expired: bool = False,
) -> QuerySet[Inbox]:
    """The workspace's inboxes matching the list filters (expired ones left out by default)."""
    queryset = Inbox.objects.filter(workspace=workspace)
    if not include_expired:
        queryset = queryset.filter(Q(expires_at__isnull=True) | Q(expires_at__gt=timezone.now()))
    if q:
        queryset = queryset.filter(
            Q(address__icontains=q) | Q(name__icontains=q) | Q(agent_name__icontains=q)
        )
    if agent:
        queryset = queryset.filter(agent_name__iexact=agent)
    if tag:
        if connection.vendor == "postgresql":
            queryset = queryset.filter(tags__contains=[tag])
        else:  # SQLite has no JSON containment lookup; json_each does the same
            queryset = queryset.extra(
                where=["EXISTS (SELECT 1 FROM json_each(inboxes_inbox.tags) WHERE value = %s)"],
                params=[tag],
            )
    return queryset


def _as_text(name: str) -> Cast:
    return Cast(name, TextField())


# GET /inboxes reads its page as tuples of these columns (inboxes.serializers.inbox_rows_out
# writes InboxOut from them): JSON columns as their text, decoded by orjson, not each by
# JSONField's converter.
INBOX_COLUMNS = (
    "id",
    "address",
    "local_part",
    "domain",
    "name",
    "agent_name",
    "tags",
    "ttl_minutes",
    "expires_at",
    "max_emails",
    "overflow",
    "allow_senders",
    "block_senders",
    "forward_to",
    "smtp_faults",
    "injected_faults",
    "email_count",
    "unread_count",
    "last_email_at",
    "created_at",
    "updated_at",
)
_JSON_COLUMNS = frozenset({"tags", "allow_senders", "block_senders", "smtp_faults"})


@functools.cache
def _page_statement(live_only: bool, after: bool) -> str:
    """PostgreSQL: the unfiltered page's statement (``inbox_ws_list`` serves it)."""
    select = ", ".join(f'"{c}"{"::text" if c in _JSON_COLUMNS else ""}' for c in INBOX_COLUMNS)
    where = "workspace_id = %s"
    if live_only:
        where += " AND (expires_at IS NULL OR expires_at > %s)"
    if after:
        where += " AND id < %s"
    return f'SELECT {select} FROM "{Inbox._meta.db_table}" WHERE {where} ORDER BY id DESC LIMIT %s'


def inbox_page_rows(
    workspace: Workspace,
    *,
    q: str = "",
    tag: str = "",
    agent: str = "",
    include_expired: bool = False,
    after: str | None = None,
    limit: int,
) -> list[tuple]:
    """Up to ``limit`` of :func:`inbox_list`'s inboxes, newest first, those older than the id
    ``after`` when given, as tuples of :data:`INBOX_COLUMNS`. Unfiltered (the common poll) by
    one statement built once on PostgreSQL (Django's SQL compiler was a fifth of the
    request's CPU); with ``q``, ``tag`` or ``agent``, and on SQLite (whose driver hands
    datetimes back naive), through :func:`inbox_list`'s queryset."""
    if q or tag or agent or connection.vendor != "postgresql":
        queryset = inbox_list(
            workspace, q=q, tag=tag, agent=agent, include_expired=include_expired
        ).order_by("-pk")
        if after is not None:
            queryset = queryset.filter(pk__lt=after)
        columns = [_as_text(c) if c in _JSON_COLUMNS else c for c in INBOX_COLUMNS]
        named = {f"_c{i}": c for i, c in enumerate(columns) if not isinstance(c, str)}
        order = [c if isinstance(c, str) else f"_c{i}" for i, c in enumerate(columns)]
        return list(queryset.annotate(**named).values_list(*order)[:limit])
    params: list[object] = [workspace.pk]
    if not include_expired:
        params.append(timezone.now())
    if after is not None:
        params.append(after)
    params.append(limit)
    sql = _page_statement(not include_expired, after is not None)
    with prepared_cursor(connection) as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def inbox_search(workspace: Workspace, *, q: str = "", status: str = "active") -> QuerySet[Inbox]:
    """The dashboard's inbox list: ``q`` in address, name, agent or tags; ``status`` one of
    ``active``, ``expired`` or ``all``."""
    queryset = inbox_list(workspace, include_expired=status != "active")
    if status == "expired":
        queryset = queryset.filter(expires_at__lte=timezone.now())
    if q:
        queryset = queryset.filter(
            Q(address__icontains=q)
            | Q(name__icontains=q)
            | Q(agent_name__icontains=q)
            | Q(tags__icontains=q)
        )
    return queryset


def inbox_for_recipient(address: str) -> Inbox | None:
    """The inbox a recipient address is delivered to (plus tag removed), across workspaces;
    None for an inbox on a custom domain its workspace has not verified."""
    canonical = canonical_address(address)
    if not canonical:
        return None
    # The SMTP receiver: the address names the inbox, whatever its workspace.
    inbox = Inbox.objects.unscoped().select_related("workspace").filter(address=canonical).first()
    if inbox is None or not inboxes_receiving({inbox.pk: inbox}):
        return None
    return inbox


def inboxes_receiving(inboxes: dict[str, Inbox]) -> dict[str, Inbox]:
    """Those of ``inboxes`` that may receive mail: on a shared domain (no query), or on a
    custom domain their own workspace has verified (one query for all of them)."""
    shared = settings.INBOX_DOMAINS
    custom = {inbox.domain for inbox in inboxes.values() if inbox.domain not in shared}
    if not custom:
        return inboxes
    # The receive path: which of these names receive, and for which workspace.
    verified = set(
        Domain.objects.unscoped()
        .filter(domain__in=custom, verified=True)
        .values_list("domain", "workspace_id")
    )
    return {
        pk: inbox
        for pk, inbox in inboxes.items()
        if inbox.domain in shared or (inbox.domain, inbox.workspace_id) in verified
    }


def inbox_ids_for_addresses(addresses: Iterable[str]) -> dict[str, str]:
    """Canonical address -> inbox id, across workspaces (the receive path's one lookup)."""
    addresses = list(addresses)  # the SMTP receiver's lookup: cross-tenant by design
    return dict(Inbox.objects.unscoped().filter(address__in=addresses).values_list("address", "pk"))


def inboxes_locked(ids: Sequence[str]) -> dict[str, Inbox]:
    """The inboxes with these ids, with their workspace (read in the same statement), locked
    ``FOR UPDATE`` in id order (so two receivers never deadlock) until the transaction ends.

    The receive path runs this once per batch of mail, so it reads through
    :func:`config.rows.select_rows` (the ids were resolved from recipient addresses: a
    cross-tenant read by design): the queryset it replaces, with its join, spent more CPU per
    batch in Django's SQL compiler than the rest of the batch's reads together.
    """
    ids = sorted(ids)
    if not ids:
        return {}
    table = Inbox._meta.db_table
    locked = select_rows(
        Inbox,
        f'"{table}"."id" IN ({placeholders(len(ids))}) ORDER BY "{table}"."id"',
        ids,
        lock=True,
        related="workspace",
    )
    return {inbox.pk: inbox for inbox in locked}


def catch_all_domain(domain: str) -> Domain | None:
    """The verified catch-all custom domain with this name, if any (never a shared domain or
    a subdomain of one, even if an operator made a custom domain's name shared later)."""
    if is_under(domain, settings.INBOX_DOMAINS):
        return None
    return (
        Domain.objects.unscoped()
        .select_related("workspace")
        .filter(domain=domain, catch_all=True, verified=True)
        .first()
    )


def hosted_domain(domain: str) -> bool:
    """Whether this instance receives mail for ``domain``: shared, or a verified custom domain
    (an unverified claim must not divert other workspaces' outgoing mail to it)."""
    domain = domain.lower().rstrip(".")
    return (
        domain in settings.INBOX_DOMAINS
        or Domain.objects.unscoped().filter(domain=domain, verified=True).exists()
    )


def inbox_counts(workspace: Workspace, now: datetime | None = None) -> dict[str, int]:
    """Inboxes (total, expired at ``now``) and the sums of their maintained email, unread and
    stored-bytes counters (no scan of emails)."""
    now = now or timezone.now()
    expired = Q(expires_at__isnull=False, expires_at__lte=now)
    counts = Inbox.objects.filter(workspace=workspace).aggregate(
        total=Count("pk"),
        expired=Count("pk", filter=expired),
        emails=Sum("email_count"),
        unread=Sum("unread_count"),
        stored_bytes=Sum("stored_bytes"),
    )
    return {
        "total": counts["total"],
        "expired": counts["expired"],
        "emails": counts["emails"] or 0,
        "unread": counts["unread"] or 0,
        "stored_bytes": counts["stored_bytes"] or 0,
    }


def inbox_ids_existing(workspace: Workspace, ids: set[str]) -> set[str]:
    """Which of these inbox ids still exist in the workspace (one primary-key lookup)."""
    if not ids:
        return set()
    return set(Inbox.objects.filter(workspace=workspace, pk__in=ids).values_list("pk", flat=True))


def inbox_latest_active(workspace: Workspace) -> Inbox | None:
    """The workspace's newest active inbox."""
    now = timezone.now()
    return (
        Inbox.objects.filter(workspace=workspace)
        .filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now))
        .order_by("-id")
        .first()
    )


def retention_graces() -> list[int]:
    """The distinct ``expired_inbox_grace_hours`` of all workspaces (the retention sweep looks
    for due inboxes once per value, each a range of the ``inbox_purge_due`` index)."""
    return sorted(
        set(Workspace.objects.values_list("expired_inbox_grace_hours", flat=True).distinct())
    )


def inboxes_past_grace(
    grace_hours: int, expired_before: datetime, limit: int = 100
) -> list[tuple[str, str]]:
    """``(inbox id, workspace id)`` of inboxes that expired before ``expired_before`` in
    workspaces whose grace is ``grace_hours``, the longest expired first."""
    # The retention sweeper: every workspace's due inboxes.
    return list(
        Inbox.objects.unscoped()
        .filter(
            expires_at__isnull=False,
            expires_at__lte=expired_before,
            workspace__expired_inbox_grace_hours=grace_hours,
        )
        .order_by("expires_at")
        .values_list("pk", "workspace_id")[:limit]
    )


def retention_ages() -> list[tuple[str, int]]:
    """``(workspace id, email_retention_days)`` of the workspaces that set a maximum age."""
    return list(
        Workspace.objects.filter(email_retention_days__isnull=False).values_list(
            "pk", "email_retention_days"
        )
    )


def inbox_ids_of(workspace_id: str) -> list[str]:
    """Every inbox id of a workspace (deleting the workspace)."""
    return list(Inbox.objects.filter(workspace_id=workspace_id).values_list("pk", flat=True))


def storage_largest(workspace: Workspace, limit: int = 5) -> list[Inbox]:
    """The workspace's inboxes that store the most bytes (their ``stored_bytes`` counters)."""
    return list(
        Inbox.objects.filter(workspace=workspace, stored_bytes__gt=0)
        .order_by("-stored_bytes", "pk")
        .only("pk", "address", "stored_bytes", "email_count")[:limit]
    )


def inbox_count_live(workspace: Workspace, now: datetime | None = None) -> int:
    """Inboxes of the workspace that have not expired (what ``max_inboxes`` counts)."""
    now = now or timezone.now()
    return (
        Inbox.objects.filter(workspace=workspace)
        .filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now))
        .count()
    )


# --- sandbox SMTP credentials -------------------------------------------------------------------

# Compared against when a username is unknown, so that a wrong username costs what a wrong
# password does.
_NO_DIGEST = "0" * 64


def smtp_credential_list(inbox: Inbox) -> QuerySet[SmtpCredential]:
    """The inbox's credentials that are not revoked, newest first."""
    return SmtpCredential.objects.filter(
        workspace_id=inbox.workspace_id, inbox=inbox, revoked_at__isnull=True
    ).order_by("-id")


def smtp_credential_get(inbox: Inbox, credential_id: str) -> SmtpCredential:
    """One active credential of the inbox, else not_found (whatever the reason)."""
    credential = smtp_credential_list(inbox).filter(pk=credential_id).first()
    if credential is None:
        raise NotFound("No such SMTP credential.")
    return credential


def smtp_credential_for_login(username: str, password: str) -> SmtpCredential | None:
    """The active credential these AUTH credentials name (its inbox loaded), else None.

    Looked up at every AUTH, never cached: a revoked credential fails at once. The password is
    checked for its shape first (no query for a made-up one), then its digest is compared in
    constant time; an unknown username costs a comparison too."""
    name = username.strip().lower()
    if not name or len(name) > 64 or not tokens.is_well_formed(password, SMTP_PASSWORD_PREFIX):
        return None
    # Authentication: the username names its workspace, so the lookup is across all of them.
    credential = (
        SmtpCredential.objects.unscoped()
        .select_related("inbox")
        .filter(username=name, revoked_at__isnull=True)
        .first()
    )
    wanted = tokens.digest(password)
    if not hmac.compare_digest(credential.digest if credential else _NO_DIGEST, wanted):
        return None
    return credential


def smtp_credential_inboxes(credential_ids: Iterable[str]) -> dict[str, str]:
    """Credential id -> its inbox id, for those of ``credential_ids`` still active (the receive
    pipeline asks in the transaction that stores their mail)."""
    # The receive path: credentials by primary key, across workspaces (the credential is the
    # tenant proof, checked at AUTH).
    rows = (
        SmtpCredential.objects.unscoped()
        .filter(pk__in=list(credential_ids), revoked_at__isnull=True)
        .values_list("pk", "inbox_id")
    )
    return dict(rows)


@dataclass(frozen=True)
class SmtpSettings:
    """What an application needs besides the username and password to send through the SMTP
    receiver with a sandbox credential."""

    host: str
    port: int
    starttls: bool
    smtps_port: int | None
    plaintext_auth: bool
    mechanisms: tuple[str, ...] = ("PLAIN", "LOGIN")


def smtp_settings() -> SmtpSettings:
    """The receiver's host, ports and TLS as configured (``SMTP_HOSTNAME``, ``SMTP_PORT``,
    ``SMTP_TLS_CERT``, ``SMTPS_PORT``, ``SMTP_AUTH_ALLOW_PLAINTEXT``); embedded mode always
    offers STARTTLS (its self-signed certificate)."""
    tls = bool(settings.SMTP_TLS_CERT) or settings.EMBEDDED_DB
    return SmtpSettings(
        host=settings.SMTP_HOSTNAME,
        port=settings.SMTP_PORT,
        starttls=tls,
        smtps_port=settings.SMTPS_PORT if tls else None,
        plaintext_auth=bool(settings.SMTP_AUTH_ALLOW_PLAINTEXT),
    )
