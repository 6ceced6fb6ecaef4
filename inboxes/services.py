"""Writes of domains and inboxes: create, verify, update, delete, expire."""

from __future__ import annotations

import re
import secrets
import string
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from apikeys import audit, tokens
from apikeys.audit import Actor, Target
from apikeys.models import Workspace
from apikeys.principal import Principal
from config.api.errors import FeatureDisabled, LimitReached, NotFound, ValidationFailed
from config.changes import save_changes
from config.rows import insert as insert_row
from config.rows import new as new_row
from events import services as events
from inboxes import verification
from inboxes.addresses import (
    DOMAIN_RE,
    is_under,
    is_valid_local_part,
    readable_local_part,
    split_address,
)
from inboxes.exceptions import AddressTaken, DomainInUse, ForwardNeedsSend, InvalidDomain
from inboxes.models import (
    VERIFICATION_LABEL,
    CheckResult,
    Domain,
    ForwardSetter,
    Inbox,
    SmtpCredential,
    Source,
)
from inboxes.selectors import (
    SMTP_PASSWORD_PREFIX,
    domain_list,
    domain_resolve,
    inbox_count_live,
    smtp_credential_for_login,
    smtp_credential_list,
)

MAX_TTL_MINUTES = 525_600
DEFAULT_TTL_MINUTES = 60  # an omitted TTL without the permanent-inbox entitlement
UNSET: Any = object()


def domain_name_clean(domain: str) -> str:
    """The canonical name of a would-be custom domain; raises when it cannot be one."""
    name = domain.strip().lower().rstrip(".")
    if not DOMAIN_RE.match(name):
        raise ValidationFailed.at("domain", "Not a domain name.")
    if len(f"{VERIFICATION_LABEL}.{name}") > 253:  # its TXT record's name must be a name too
        raise ValidationFailed.at("domain", "Too long to carry its verification record.")
    if is_under(name, settings.INBOX_DOMAINS):
        raise InvalidDomain(
            f"'{name}' is a shared domain of this instance or a subdomain of one: it cannot be "
            "a custom domain."
        )
    return name


def domain_add(
    *,
    workspace: Workspace,
    domain: str,
    catch_all: bool = False,
    verified: bool = False,
    by: Actor,
) -> Domain:
    """Gives the workspace a custom domain, unverified (idempotent for the same workspace).

    Several workspaces may claim a name; the first to prove control with the TXT record gets
    it. ``verified`` is for operators only (``bootstrap --verified``): it vouches without DNS.
    """
    name = domain_name_clean(domain)
    taken = InvalidDomain(f"'{name}' is verified by another workspace.")
    with transaction.atomic():
        row = Domain.objects.filter(workspace=workspace, domain=name).first()
        if row is None:
            if Domain.objects.unscoped().filter(domain=name, verified=True).exists():
                raise taken  # the name's one receiving claim: checked across workspaces
            row = Domain(workspace=workspace, domain=name)
        changed: list[str] = []
        if row.catch_all != catch_all:
            row.catch_all = catch_all
            changed.append("catch_all")
        if verified and not row.verified:
            row.verified, row.verified_at, row.failed_checks = True, None, 0
            changed += ["verified", "verified_at", "failed_checks"]
        adding = row._state.adding
        try:
            with transaction.atomic():
                if adding:
                    row.save()
                elif changed:
                    row.save(update_fields=changed)
        except IntegrityError:  # raced with another claim of the same name
            raise taken from None
        if adding or "catch_all" in changed:
            audit.record(
                workspace=workspace,
                by=by,
                action="domain.added" if adding else "domain.updated",
                target=Target("domain", row.pk, row.domain),
                changes=(
                    audit.created(row, ["domain", "catch_all"])
                    if adding
                    else {"catch_all": {"before": not catch_all, "after": catch_all}}
                ),
            )
    return row


def domain_check(*, domain: Domain) -> Domain:
    """Looks ``_pigeonhole.<domain>`` TXT up now and records the outcome: a domain becomes
    verified when its record is found, and a verified one stops receiving after
    ``DOMAIN_UNVERIFY_AFTER`` checks in a row that found it missing (a DNS failure counts
    neither way: a resolver outage must not stop mail)."""
    if is_under(domain.domain, settings.INBOX_DOMAINS):  # a claim from before the rule
        found = verification.Lookup(
            CheckResult.REFUSED,
            f"{domain.domain} is a shared domain of this instance or a subdomain of one: it "
            "cannot be a custom domain.",
        )
    else:
        found = verification.lookup(domain.record_name, domain.record_value)
    with transaction.atomic():
        row = (
            Domain.objects.select_for_update()
            .filter(workspace_id=domain.workspace_id, pk=domain.pk)
            .first()
        )
        if row is None:
            raise NotFound("No such custom domain.")
        now = timezone.now()
        row.last_checked_at, row.last_check_result = now, found.result
        row.last_check_detail = found.detail
        if found.result == CheckResult.FOUND:
            _found(row, now)
        elif found.result == CheckResult.MISSING:
            _missing(row)
        elif found.result == CheckResult.REFUSED:
            row.verified = False
        fields = ["last_checked_at", "last_check_result", "last_check_detail", "failed_checks"]
        try:
            with transaction.atomic():
                row.save(update_fields=[*fields, "verified", "verified_at"])
        except IntegrityError:  # another workspace verified the name a moment ago
            row.verified, row.last_check_result = False, CheckResult.CONFLICT
            row.last_check_detail = _CONFLICT.format(name=row.domain)
            row.save(update_fields=[*fields, "verified", "verified_at"])
    return row


_CONFLICT = "The record is there, but another workspace verified {name} first."


def _found(row: Domain, now: datetime) -> None:
    row.failed_checks = 0
    if not row.verified:
        rival = Domain.objects.unscoped().filter(domain=row.domain, verified=True)
        if rival.exclude(pk=row.pk).exists():  # one receiving claim per name, all workspaces
            row.last_check_result = CheckResult.CONFLICT
            row.last_check_detail = _CONFLICT.format(name=row.domain)
            return
        row.verified = True
        row.last_check_detail += " The domain receives mail."
    row.verified_at = now


def _missing(row: Domain) -> None:
    row.failed_checks += 1
    if not row.verified:
        return
    if row.verified_at is None:  # vouched for by an operator: never proven, never taken away
        row.last_check_detail += " The domain keeps receiving mail (an operator vouched for it)."
        return
    left = settings.DOMAIN_UNVERIFY_AFTER - row.failed_checks
    if left <= 0:
        row.verified = False
        row.last_check_detail += " The domain no longer receives mail."
    else:
        row.last_check_detail += (
            f" The domain stops receiving mail after {left} more failed check"
            f"{'s' if left != 1 else ''}."
        )


def domains_recheck_due(*, now: datetime | None = None, limit: int = 100) -> int:
    """Checks the custom domains not checked for ``DOMAIN_RECHECK_MINUTES`` (oldest first);
    returns how many. Each is claimed first, so two sweepers never check one domain twice."""
    now = now or timezone.now()
    cutoff = now - timedelta(minutes=settings.DOMAIN_RECHECK_MINUTES)
    # The sweeper: every workspace's domains.
    due = (
        Domain.objects.unscoped()
        .filter(Q(last_checked_at__isnull=True) | Q(last_checked_at__lte=cutoff))
        .order_by(F("last_checked_at").asc(nulls_first=True), "pk")
        .values_list("pk", "workspace_id", "last_checked_at")[:limit]
    )
    count = 0
    for pk, workspace_id, last in due:
        claimed = Domain.objects.filter(
            workspace_id=workspace_id, pk=pk, last_checked_at=last
        ).update(last_checked_at=now)
        if claimed != 1:
            continue
        domain = Domain.objects.filter(workspace_id=workspace_id, pk=pk).first()
        if domain is not None:
            domain_check(domain=domain)
            count += 1
    return count


def domain_remove(*, workspace: Workspace, domain: str, by: Actor) -> None:
    """Removes a custom domain of the workspace; refused while inboxes still use it."""
    name = domain.strip().lower().rstrip(".")
    row = Domain.objects.filter(workspace=workspace, domain=name).first()
    if row is None:
        raise InvalidDomain(f"'{name}' is not a custom domain of this workspace.")
    with transaction.atomic():
        used = Inbox.objects.filter(workspace=workspace, domain=name).count()
        if used:
            raise DomainInUse(
                f"{used} inbox{'es' if used != 1 else ''} still use{'s' if used == 1 else ''} "
                f"{name}; delete them first."
            )
        audit.record(
            workspace=workspace,
            by=by,
            action="domain.removed",
            target=Target("domain", row.pk, row.domain),
        )
        row.delete()


def inbox_counters_save(inboxes: Iterable[Inbox]) -> None:
    """Writes the mail counters (count, unread, stored bytes) of inboxes the caller holds
    locked (the receive path, once per batch). On PostgreSQL one ``UPDATE … FROM unnest(…)``
    whose text is the same for any number of inboxes (so psycopg prepares it once); a plain
    UPDATE per inbox sent in pipeline mode spent a noticeable share of the smtpd's CPU in
    psycopg's pipeline code. Elsewhere one plain UPDATE per inbox. The ORM's ``bulk_update``
    builds a CASE expression per row and field, which cost more than the batch's inserts."""
    rows = [
        (inbox.email_count, inbox.unread_count, inbox.stored_bytes, inbox.last_email_at, inbox.pk)
        for inbox in inboxes
    ]
    if not rows:
        return
    table = Inbox._meta.db_table
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            counts, unread, stored, last, ids = (list(c) for c in zip(*rows, strict=True))
            cursor.execute(
                f"UPDATE {table} AS i SET email_count = v.email_count, "
                "unread_count = v.unread_count, stored_bytes = v.stored_bytes, "
                "last_email_at = v.last_email_at "
                "FROM unnest(%s::integer[], %s::integer[], %s::bigint[], %s::timestamptz[], "
                "%s::varchar[]) AS v(email_count, unread_count, stored_bytes, last_email_at, id) "
                "WHERE i.id = v.id",
                [counts, unread, stored, last, ids],
            )
        else:
            adapt = connection.ops.adapt_datetimefield_value
            cursor.executemany(
                f"UPDATE {table} SET email_count = %s, unread_count = %s, stored_bytes = %s, "
                "last_email_at = %s WHERE id = %s",
                [(c, u, b, adapt(last), pk) for c, u, b, last, pk in rows],
            )


def inbox_record(inbox: Inbox) -> dict[str, str]:
    """The plain ``{id, address}`` that events carry."""
    return {"id": inbox.pk, "address": inbox.address}


OPERATOR_ROLE = "operator"  # a Principal built by the Django admin for the signed-in operator


def forward_is_internal(workspace: Workspace, address: str) -> bool:
    """Whether ``address`` is on one of the workspace's own receiving domains (shared, or custom
    and verified: an unverified claim of someone else's domain is outside)."""
    _, domain = split_address(address)
    domain = (domain or "").lower().rstrip(".")
    return bool(domain) and any(
        row.domain == domain and row.verified for row in domain_list(workspace)
    )


def _forwarding(workspace: Workspace, forward_to: str | None, principal: Any) -> dict[str, Any]:
    """The fields that remember who set ``forward_to`` (refused without ``send`` outside)."""
    if principal is None:
        raise TypeError("Setting forward_to needs the principal that sets it.")
    if not forward_to:
        return {
            "forward_set_via": "",
            "forward_set_by_key": None,
            "forward_set_by_user": None,
            "forward_requires_approval": False,
        }
    if not forward_is_internal(workspace, forward_to) and not principal.has("send"):
        raise ForwardNeedsSend(forward_to)
    if principal.key is not None:
        via = ForwardSetter.API_KEY
    elif principal.role == OPERATOR_ROLE:
        via = ForwardSetter.OPERATOR
    else:
        via = ForwardSetter.SESSION
    return {
        "forward_set_via": via,
        "forward_set_by_key": principal.key,
        "forward_set_by_user": principal.user if principal.key is None else None,
        # The setter's own rule; the workspace's is read when each copy is made.
        "forward_requires_approval": bool(principal.key and principal.key.require_approval),
    }


def _expiry_for(workspace: Workspace, ttl_minutes: Any) -> tuple[int | None, datetime | None]:
    if ttl_minutes is UNSET:
        ttl_minutes = None if workspace.allow_permanent_inboxes else DEFAULT_TTL_MINUTES
    elif ttl_minutes is None and not workspace.allow_permanent_inboxes:
        raise FeatureDisabled("Permanent inboxes are disabled for this workspace.")
    if ttl_minutes is None:
        return None, None
    return ttl_minutes, timezone.now() + timedelta(minutes=ttl_minutes)


class _Taken(Exception):
    """The address of an attempt of ``inbox_create`` is taken (its transaction rolled back)."""


def inbox_create(
    *,
    workspace: Workspace,
    source: str = Source.API,
    local_part: str | None = None,
    domain: str | None = None,
    ttl_minutes: Any = UNSET,
    principal: Principal | None = None,
    **fields: Any,
) -> Inbox:
    """A new inbox (event ``inbox.created``). ``ttl_minutes`` omitted follows the entitlement;
    a ``forward_to`` is remembered with the ``principal`` that set it."""
    resolved = domain_resolve(workspace, domain)
    if fields.get("forward_to"):
        fields |= _forwarding(workspace, fields["forward_to"], principal)
    ttl, expires_at = _expiry_for(workspace, ttl_minutes)
    if local_part is not None:
        local_part = local_part.strip().lower()
        if not is_valid_local_part(local_part):
            raise ValidationFailed.at("local_part", "Not a valid local part.")
        if resolved.shared and local_part in settings.RESERVED_LOCAL_PARTS:
            # Role addresses of the operator's domains (abuse@, postmaster@, the addresses
            # certificate authorities write to): nobody's inbox, like a taken address.
            raise AddressTaken(f"{local_part}@{resolved.domain} is reserved by this instance.")
    # One statement or one transaction per attempt, the insert its first write: a generated
    # address that is taken (rare) writes nothing and the next attempt starts afresh, so no
    # savepoint is needed around the insert (two statements more on every create).
    for attempt in range(12):
        local = local_part if local_part is not None else readable_local_part()
        if attempt >= 8 and local_part is None:
            local = f"{local}{attempt}"
        inbox = new_row(  # Inbox(...) without the keyword path of Model.__init__
            Inbox,
            workspace=workspace,
            address=f"{local}@{resolved.domain}",
            local_part=local,
            domain=resolved.domain,
            ttl_minutes=ttl,
            expires_at=expires_at,
            source=source,
            **fields,
        )
        try:
            if not _created_in_one_statement(workspace, inbox, source):
                with transaction.atomic():
                    if workspace.max_inboxes is not None:
                        # Serialise creates of one workspace so the cap cannot be overshot.
                        Workspace.objects.select_for_update().filter(pk=workspace.pk).first()
                        live = inbox_count_live(workspace)  # expired ones wait, uncounted
                        if live >= workspace.max_inboxes:
                            raise LimitReached(
                                f"The workspace may have at most {workspace.max_inboxes} "
                                f"inboxes that have not expired, and has {live}."
                            )
                    try:
                        insert_row(inbox)  # save()'s INSERT without the ORM's compiler
                    except IntegrityError as exc:
                        if not _unique_violation(exc):
                            raise
                        raise _Taken() from exc
                    events.emit(
                        workspace_id=workspace.pk,
                        inbox_id=inbox.pk,
                        type=events.INBOX_CREATED,
                        data={"inbox": inbox_record(inbox), "source": source},
                        first=True,  # its chain starts here: no head to read or lock
                    )
            break
        except _Taken:
            if local_part is not None:
                raise AddressTaken(f"{local}@{resolved.domain} is already taken.") from None
    else:
        raise AddressTaken("Could not find a free generated address; name one.")
    return inbox


def _created_in_one_statement(workspace: Workspace, inbox: Inbox, source: str) -> bool:
    """Stores ``inbox`` and its ``inbox.created`` in one statement where nothing else needs a
    transaction (``events.insert_with_event``: no webhook endpoint wants the event, no open
    transaction) and the workspace has no cap on inboxes (counted under its lock); False, with
    nothing written, otherwise. A taken address is :class:`_Taken`."""
    if workspace.max_inboxes is not None:
        return False
    try:
        created = events.insert_with_event(
            inbox,
            workspace_id=workspace.pk,
            type=events.INBOX_CREATED,
            data={"inbox": inbox_record(inbox), "source": source},
        )
    except IntegrityError as exc:
        if not _unique_violation(exc):
            raise
        raise _Taken() from exc
    return created is not None


def _unique_violation(exc: IntegrityError) -> bool:
    """Whether ``exc`` is a unique violation (the address, taken meanwhile: :class:`_Taken`),
    not another integrity error, which is raised as it is (a foreign key's: the workspace deleted
    meanwhile, reported by the one statement as it commits, as the transaction did at
    ``COMMIT``)."""
    cause = exc.__cause__
    sqlstate = getattr(cause, "sqlstate", None)
    return sqlstate == "23505" if sqlstate is not None else "UNIQUE" in str(cause)  # SQLite


def inbox_update(
    *,
    inbox: Inbox,
    ttl_minutes: Any = UNSET,
    extend_minutes: int | None = None,
    principal: Principal | None = None,
    **fields: Any,
) -> Inbox:
    """Changes the given fields only; ``extend_minutes`` moves expiry to now + N (reactivating).
    A ``forward_to`` given is remembered with the ``principal`` that set it."""
    if "forward_to" in fields:
        same = fields["forward_to"] == inbox.forward_to
        if principal is not None or not same:
            try:  # given again by one who may set it: they become the setter
                fields |= _forwarding(inbox.workspace, fields["forward_to"], principal)
            except ForwardNeedsSend:
                if not same:
                    raise  # given unchanged by one who may not set it: no change, no error
    changed = [name for name, value in fields.items() if getattr(inbox, name) != value]
    for name in changed:
        setattr(inbox, name, fields[name])
    now = timezone.now()
    if ttl_minutes is not UNSET:
        if ttl_minutes is None and not inbox.workspace.allow_permanent_inboxes:
            raise FeatureDisabled("Permanent inboxes are disabled for this workspace.")
        inbox.ttl_minutes = ttl_minutes
        inbox.expires_at = None if ttl_minutes is None else now + timedelta(minutes=ttl_minutes)
        changed += ["ttl_minutes", "expires_at"]
    if extend_minutes is not None:
        if inbox.expires_at is None and ttl_minutes is UNSET:
            raise ValidationFailed.at(
                "extend_minutes", "The inbox is permanent; set ttl_minutes to make it expire."
            )
        inbox.expires_at = now + timedelta(minutes=extend_minutes)
        changed += ["expires_at"]
    if "expires_at" in changed:
        inbox.expiry_notified_at = None  # a new expiry is announced again when it comes
        changed.append("expiry_notified_at")
    if changed:
        save_changes(inbox, [*changed, "updated_at"], gone=NotFound("No such inbox."))
    return inbox


DELETED_BY_REQUEST = "request"  # DELETE /inboxes/{id}, the dashboard, an agent's tool
DELETED_BY_RETENTION = "retention"  # its workspace's grace after expiry ran out


def inbox_delete(*, inbox: Inbox, by: Actor, reason: str = DELETED_BY_REQUEST) -> None:
    """Removes the inbox, all its mail (raw bytes and attachments included) and its event log;
    emits ``inbox.deleted``, the one event of the inbox that outlives it (the stream's last
    word and the webhook). The retention sweep deletes the mail a chunk at a time first
    (``mail.services.inbox_purge``, ``by`` the system); here what is left goes by cascade,
    counters with it."""
    with transaction.atomic():
        audit.record(
            workspace=inbox.workspace_id,
            by=by,
            action="inbox.deleted",
            target=Target("inbox", inbox.pk, inbox.address),
        )
        events.forget_inbox(inbox.workspace_id, inbox.pk)
        record = inbox_record(inbox)
        inbox.delete()
        events.emit(
            workspace_id=inbox.workspace_id,
            inbox_id=record["id"],
            type=events.INBOX_DELETED,
            data={"inbox": record, "reason": reason},
        )


def inboxes_expire_due(*, now: datetime | None = None) -> int:
    """Announces every inbox whose expiry has passed, once (event ``inbox.expired``)."""
    now = now or timezone.now()
    count = 0
    # The sweeper: every workspace's due inboxes.
    due = (
        Inbox.objects.unscoped()
        .filter(expires_at__lte=now, expiry_notified_at__isnull=True)
        .values_list("pk", "workspace_id", "address", "expires_at")[:1000]
    )
    for pk, workspace_id, address, expires_at in due:
        with transaction.atomic():
            claimed = Inbox.objects.filter(
                workspace_id=workspace_id,
                pk=pk,
                expires_at=expires_at,
                expiry_notified_at__isnull=True,
            ).update(expiry_notified_at=now)
            if claimed != 1:
                continue  # another sweeper took it, or the inbox was extended meanwhile
            events.emit(
                workspace_id=workspace_id,
                inbox_id=pk,
                type=events.INBOX_EXPIRED,
                data={
                    "inbox": {"id": pk, "address": address},
                    "expired_at": expires_at.isoformat(),
                },
            )
        count += 1
    return count


# --- sandbox SMTP credentials -------------------------------------------------------------------

MAX_SMTP_CREDENTIALS = 10  # active credentials per inbox
_USERNAME_SUFFIX = string.ascii_lowercase + string.digits
_LAST_USED_GRANULARITY = timedelta(minutes=1)


@dataclass(frozen=True)
class CreatedSmtpCredential:
    credential: SmtpCredential
    password: str


def _username_for(inbox: Inbox) -> str:
    """``<local part, letters, digits and dashes>-<10 random characters>``: recognisable as the
    inbox's, unguessable, unique in practice (the unique index decides)."""
    stem = re.sub(r"[^a-z0-9]+", "-", inbox.local_part.lower()).strip("-")[:40] or "inbox"
    return f"{stem}-{''.join(secrets.choice(_USERNAME_SUFFIX) for _ in range(10))}"


def smtp_credential_create(*, inbox: Inbox, name: str = "", by: Actor) -> CreatedSmtpCredential:
    """A new sandbox SMTP credential of the inbox; the password exists only in the returned
    value (its SHA-256 digest is stored). 429 ``limit_reached`` beyond
    ``MAX_SMTP_CREDENTIALS`` active ones."""
    password = tokens.generate(SMTP_PASSWORD_PREFIX)
    with transaction.atomic():
        Inbox.objects.select_for_update().filter(workspace_id=inbox.workspace_id, pk=inbox.pk).get()
        if smtp_credential_list(inbox).count() >= MAX_SMTP_CREDENTIALS:
            raise LimitReached(
                f"An inbox has at most {MAX_SMTP_CREDENTIALS} active SMTP credentials: revoke "
                "one first."
            )
        for attempt in range(5):
            try:
                with transaction.atomic():
                    credential = SmtpCredential.objects.create(
                        workspace_id=inbox.workspace_id,
                        inbox=inbox,
                        name=name,
                        username=_username_for(inbox),
                        digest=tokens.digest(password),
                    )
                break
            except IntegrityError:  # the username was taken (never in practice)
                if attempt == 4:
                    raise
        audit.record(
            workspace=inbox.workspace_id,
            by=by,
            action="smtp_credential.created",
            target=Target("smtp_credential", credential.pk, credential.username),
            changes={
                **audit.created(credential, ["username", "name"]),
                "inbox": {"after": inbox.address},
            },
        )
    return CreatedSmtpCredential(credential=credential, password=password)


def smtp_credential_revoke(*, credential: SmtpCredential, by: Actor) -> SmtpCredential:
    """Revokes the credential at once: the next AUTH with it fails, and mail of a session that
    authenticated with it before is refused when it would be stored."""
    with transaction.atomic():
        revoked = SmtpCredential.objects.filter(
            workspace_id=credential.workspace_id, pk=credential.pk, revoked_at__isnull=True
        ).update(revoked_at=timezone.now())
        if revoked:
            audit.record(
                workspace=credential.workspace_id,
                by=by,
                action="smtp_credential.revoked",
                target=Target("smtp_credential", credential.pk, credential.username),
            )
    credential.refresh_from_db(fields=["revoked_at"])
    return credential


def smtp_login(*, username: str, password: str) -> SmtpCredential | None:
    """The SMTP receiver's AUTH: the active credential these name (see
    ``selectors.smtp_credential_for_login``), its use recorded at most once a minute."""
    credential = smtp_credential_for_login(username, password)
    if credential is None:
        return None
    now = timezone.now()
    last = credential.last_used_at
    if last is None or now - last >= _LAST_USED_GRANULARITY:
        SmtpCredential.objects.filter(
            workspace_id=credential.workspace_id, pk=credential.pk
        ).update(last_used_at=now)
        credential.last_used_at = now
    return credential
