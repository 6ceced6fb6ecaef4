"""The bare REST reference that ``tests.benchmarks.rest`` compares the API with.

A raw ASGI application served by the same daphne as the web process, on the same database and
data: no Django, no DRF. It authenticates the bearer key as ours does (shape and checksum, then
its SHA-256 digest looked up with its workspace in one query; revoked, expired or missing is 401)
and answers, with one SQL query for the page and orjson, the same JSON as ours for
``GET /api/v1/inboxes?limit=50``, ``GET /api/v1/emails/{id}`` and ``POST /api/v1/inboxes``
``{}`` (a generated local part on ``--domain``, expiring after ``--ttl`` minutes, or permanent
with ``--ttl 0``). Nothing else: no rate limit, no events, no query parameters but ``limit``.
The harness checks that the two GET answers are byte-identical to ours before measuring.

``python -m daphne -b 127.0.0.1 -p P tests.benchmarks.reference_rest:application`` with
``REFERENCE_DSN``, ``REFERENCE_DOMAIN`` and ``REFERENCE_TTL`` in the environment.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import secrets
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
import psycopg

from apikeys import tokens  # the key format and digest: pure functions, no Django
from config.api.ids import new_id

POOL_SIZE = 10
DSN = os.environ.get("REFERENCE_DSN", "")
DOMAIN = os.environ.get("REFERENCE_DOMAIN", "")
TTL = int(os.environ.get("REFERENCE_TTL", "60"))

_pool: asyncio.Queue[psycopg.AsyncConnection] | None = None
_opening = asyncio.Lock()

AUTH = (
    "SELECT k.workspace_id, k.scopes, k.revoked_at, k.expires_at FROM apikeys_apikey k "
    "WHERE k.prefix = %s AND k.digest = %s"
)
# One query: the key and the page (the key's workspace scopes the page).
INBOX_PAGE = (
    "WITH k AS (" + AUTH + ") "
    "SELECT k.workspace_id, k.scopes, k.revoked_at, k.expires_at, i.id, i.address, "
    "i.local_part, i.domain, i.name, i.agent_name, i.tags, i.ttl_minutes, i.expires_at, "
    "i.max_emails, i.overflow, i.allow_senders, i.block_senders, i.forward_to, i.smtp_faults, "
    "i.injected_faults, i.email_count, i.unread_count, i.last_email_at, i.created_at, "
    "i.updated_at FROM k LEFT JOIN LATERAL (SELECT * FROM inboxes_inbox i "
    "WHERE i.workspace_id = k.workspace_id AND (i.expires_at IS NULL OR i.expires_at > now()) "
    "ORDER BY i.id DESC LIMIT %s) i ON true"
)
EMAIL = (
    "WITH k AS (" + AUTH + ") "
    "SELECT k.workspace_id, k.scopes, k.revoked_at, k.expires_at, e.id, e.inbox_id, e.to, "
    "e.subject, e.preview, "
    "(SELECT coalesce(json_agg(json_build_array(l.key, l.source, l.confidence) "
    "ORDER BY l.created_at, l.id), '[]') FROM labels_emaillabel l WHERE l.email_id = e.id), "
    "e.read, e.starred, e.received_at, e.message_id, e.cc, e.reply_to, e.text, e.html, "
    "e.headers, (SELECT coalesce(json_agg(json_build_array(a.id, a.filename, a.content_type, "
    "a.size, a.content_id, a.inline) ORDER BY a.position), '[]') FROM mail_attachment a "
    "WHERE a.email_id = e.id), e.extracted, e.size, e.in_reply_to, e.references, e.defects, "
    "e.authentication, e.envelope_recipients, e.envelope_to, e.from_address, e.from_name FROM k LEFT JOIN mail_email e "
    "ON e.workspace_id = k.workspace_id AND e.id = %s"
)
INBOX_INSERT = (
    "WITH k AS (" + AUTH + "), i AS (INSERT INTO inboxes_inbox (id, workspace_id, address, "
    "local_part, domain, name, agent_name, tags, ttl_minutes, expires_at, max_emails, overflow, "
    "allow_senders, block_senders, forward_to, forward_set_via, forward_requires_approval, "
    "source, smtp_faults, injected_faults, email_count, unread_count, stored_bytes, created_at, "
    "updated_at) SELECT %s, k.workspace_id, %s, %s, %s, '', '', '[]', %s, %s, NULL, "
    "'drop_oldest', '[]', '[]', NULL, '', false, 'api', '[]', 0, 0, 0, 0, %s, %s FROM k "
    "WHERE k.revoked_at IS NULL AND (k.expires_at IS NULL OR k.expires_at > now()) "
    "AND k.scopes ?| array['write', 'admin'] RETURNING id, address, local_part, domain, "
    "ttl_minutes, expires_at, created_at, updated_at) "
    "SELECT k.workspace_id, k.scopes, k.revoked_at, k.expires_at, i.* FROM k LEFT JOIN i ON true"
)
READ = frozenset({"read", "write", "send", "admin"})
WRITE = frozenset({"write", "admin"})


def iso(moment: datetime | None) -> str | None:
    return moment.isoformat().replace("+00:00", "Z") if moment else None


async def _connection() -> psycopg.AsyncConnection:
    global _pool
    if _pool is None:
        async with _opening:
            if _pool is None:
                pool: asyncio.Queue[psycopg.AsyncConnection] = asyncio.Queue()
                for _ in range(POOL_SIZE):
                    pool.put_nowait(await psycopg.AsyncConnection.connect(DSN, autocommit=True))
                _pool = pool
    return await _pool.get()


async def query(sql: str, params: list[Any]) -> list[tuple]:
    conn = await _connection()
    try:
        cursor = await conn.execute(sql, params, prepare=True)
        return await cursor.fetchall()
    finally:
        assert _pool is not None
        _pool.put_nowait(conn)


def denied(row: tuple | None, needs: frozenset[str]) -> tuple[int, bytes] | None:
    """401 or 403 for the key columns at the start of ``row``, else None."""
    if (
        row is None
        or row[2] is not None
        or (row[3] is not None and row[3] <= datetime.now(row[3].tzinfo))
    ):
        return 401, b'{"error":{"code":"unauthorized"}}'
    if not needs & set(row[1]):
        return 403, b'{"error":{"code":"insufficient_scope"}}'
    return None


def inbox_json(r: tuple) -> dict[str, Any]:
    (id_, address, local, domain, name, agent, tags, ttl, expires, max_emails, overflow, allow,
     block, forward, faults, injected, count, unread, last, created, updated) = r  # fmt: skip
    return {
        "id": id_,
        "address": address,
        "local_part": local,
        "domain": domain,
        "name": name,
        "agent_name": agent,
        "tags": tags,
        "status": "expired"
        if expires is not None and expires <= datetime.now(expires.tzinfo)
        else "active",
        "permanent": expires is None,
        "ttl_minutes": ttl,
        "expires_at": iso(expires),
        "max_emails": max_emails,
        "overflow": overflow,
        "allow_senders": allow,
        "block_senders": block,
        "forward_to": forward,
        "smtp_faults": faults,
        "injected_faults": injected,
        "email_count": count,
        "unread_count": unread,
        "last_email_at": iso(last),
        "created_at": iso(created),
        "updated_at": iso(updated),
    }


def _addresses(rows: list) -> list[dict[str, str]]:
    return [{"address": a["address"], "name": a["name"]} for a in rows]


def _keys(entry: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    return {key: entry.get(key) for key in keys}


def _authentication(v: dict[str, Any] | None) -> dict[str, Any] | None:
    # The verdict's fields in the API's order (jsonb gives its keys back in its own).
    if v is None:
        return None
    return {
        "spf": _keys(v["spf"], ("result", "domain", "identity", "client_ip", "reason")),
        "dkim": [_keys(s, ("result", "domain", "selector", "reason")) for s in v["dkim"]],
        "dmarc": _keys(v["dmarc"], ("result", "domain", "policy", "alignment", "reason")),
        "arc": _keys(v["arc"], ("result", "domain", "instances", "reason")),
    }


def email_json(r: tuple) -> dict[str, Any]:
    (id_, inbox_id, to, subject, preview, labels, read, starred, received, message_id, cc,
     reply_to, text, html, headers, attachments, extracted, size, in_reply_to, references,
     defects, authentication, envelope_recipients, envelope_to, from_address,
     from_name) = r  # fmt: skip
    return {
        "id": id_,
        "inbox_id": inbox_id,
        "to": _addresses(to),
        "subject": subject,
        "preview": preview,
        "labels": [{"key": k, "source": s, "confidence": c} for k, s, c in labels],
        "read": read,
        "starred": starred,
        "received_at": iso(received),
        "message_id": message_id,
        "cc": _addresses(cc),
        "reply_to": _addresses(reply_to),
        "text": text,
        "html": html,
        "headers": [{"name": n, "value": v} for n, v in headers],
        "attachments": [
            {"id": a, "filename": f, "content_type": t, "size": s, "content_id": c, "inline": i}
            for a, f, t, s, c, i in attachments
        ],
        "extracted": {
            "code": extracted.get("code"),
            "link": extracted.get("link"),
            "codes": extracted.get("codes", []),
            "links": [
                {"url": x["url"], "text": x["text"], "kind": x["kind"]}
                for x in extracted.get("links", [])
            ],
        },
        "size": size,
        "in_reply_to": in_reply_to,
        "references": references,
        "defects": defects,
        "authentication": _authentication(authentication),
        "envelope_recipients": list(envelope_recipients)
        if envelope_recipients
        else ([envelope_to] if envelope_to else []),
        "from": {"address": from_address, "name": from_name} if from_address or from_name else None,
    }


def _dumps(body: Any) -> bytes:
    # As DRF's renderer writes JSON: U+2028/U+2029 escaped, the rest UTF-8.
    return (
        orjson.dumps(body).replace(b"\xe2\x80\xa8", b"\\u2028").replace(b"\xe2\x80\xa9", b"\\u2029")
    )


async def handle(method: str, path: str, qs: bytes, plain: str) -> tuple[int, bytes]:
    if not tokens.is_well_formed(plain):
        return 401, b'{"error":{"code":"unauthorized"}}'
    key = [tokens.lookup_prefix(plain), hashlib.sha256(plain.encode()).hexdigest()]
    if method == "GET" and path == "/api/v1/inboxes":
        limit = 25
        for pair in qs.decode().split("&"):
            name, _, value = pair.partition("=")
            if name == "limit":
                limit = int(value)
        rows = await query(INBOX_PAGE, [*key, limit + 1])
        refused = denied(rows[0] if rows else None, READ)
        if refused:
            return refused
        items = [inbox_json(r[4:]) for r in rows if r[4] is not None]
        cursor = None
        if len(items) > limit:
            items = items[:limit]
            cursor = tokens_cursor(items[-1]["id"])
        return 200, _dumps({"data": items, "next_cursor": cursor})
    if method == "GET" and path.startswith("/api/v1/emails/"):
        rows = await query(EMAIL, [*key, path.rsplit("/", 1)[1]])
        refused = denied(rows[0] if rows else None, READ)
        if refused:
            return refused
        if rows[0][4] is None:
            return 404, b'{"error":{"code":"not_found"}}'
        return 200, _dumps(email_json(rows[0][4:]))
    if method == "POST" and path == "/api/v1/inboxes":
        now = datetime.now(UTC)
        local = "ref" + secrets.token_hex(6)
        expires = now + timedelta(minutes=TTL) if TTL else None
        params = [*key, new_id("inb"), f"{local}@{DOMAIN}", local, DOMAIN, TTL or None]
        rows = await query(INBOX_INSERT, [*params, expires, now, now])
        refused = denied(rows[0] if rows else None, WRITE)
        if refused:
            return refused
        id_, address, local, domain, ttl, expires, created, updated = rows[0][4:]
        row = (id_, address, local, domain, "", "", [], ttl, expires, None, "drop_oldest", [],
               [], None, [], 0, 0, 0, None, created, updated)  # fmt: skip
        return 200, _dumps(inbox_json(row))
    return 404, b'{"error":{"code":"not_found"}}'


def tokens_cursor(last_id: str) -> str:
    import base64

    return base64.urlsafe_b64encode(("c1:" + last_id).encode()).decode().rstrip("=")


async def application(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    more = True
    while more:  # the body (POST {}) is not read: the insert takes the defaults
        message = await receive()
        more = message.get("more_body", False)
    plain = ""
    for name, value in scope["headers"]:
        if name == b"authorization":
            plain = value.decode("latin-1").partition(" ")[2].strip()
    status, body = await handle(scope["method"], scope["path"], scope["query_string"], plain)
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
