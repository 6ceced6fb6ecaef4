"""Matrix 3 of issue 11, mass assignment and secrets (OWASP API3, API8).

* The served document describes the body of every write operation the spec's tables give one
  for, with at least the spec's fields, so that the matrices generated from it know which fields
  a client may set.
* Every write operation, with every field it does not take added to a valid body (the issue's
  list: ``id``, ``workspace``, ``status``, ``created_at``, ``secret``, ``key`` ..., every
  response field the request does not take, the other workspace's ids), changes exactly what the
  valid body alone changes (whole-database snapshots before and after).
* After creation, the plain API key and the webhook secret appear in no later response, admin
  page, log line (in-process logging at DEBUG, and the output of the live processes) or
  database column.
"""

from __future__ import annotations

import contextlib
import json
import logging
import smtplib
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from django.db import transaction

from tests.conftest import Api
from tests.mail.messages import message
from tests.security.tenancy_world import (
    Answer,
    Operation,
    Side,
    World,
    body_for,
    build_world,
    call,
    key_client,
    operations,
    resolve_schema,
    snapshot_all,
    succeeded,
)
from webhooks.services import WEBHOOK_EVENTS


@contextlib.contextmanager
def rolled_back() -> Iterator[None]:
    with transaction.atomic():
        yield
        transaction.set_rollback(True)


# The spec's endpoint tables: the request body fields of each write operation.
SPEC_BODIES: dict[tuple[str, str], set[str]] = {
    ("POST", "/inboxes"): {
        "local_part",
        "domain",
        "name",
        "ttl_minutes",
        "agent_name",
        "tags",
        "max_emails",
        "overflow",
        "allow_senders",
        "block_senders",
        "forward_to",
    },
    ("PATCH", "/inboxes/{inbox_id}"): {
        "name",
        "ttl_minutes",
        "agent_name",
        "tags",
        "max_emails",
        "overflow",
        "allow_senders",
        "block_senders",
        "forward_to",
        "extend_minutes",
    },
    ("PATCH", "/emails/{email_id}"): {"read", "starred", "labels"},
    ("POST", "/inboxes/{inbox_id}/send"): {
        "to",
        "cc",
        "subject",
        "text",
        "html",
        "in_reply_to",
        "reason",
    },
    ("POST", "/outbox/{item_id}/decision"): {"decision", "note", "subject", "text"},
    ("POST", "/labels"): {
        "key",
        "name",
        "color",
        "instructions",
        "threshold",
        "rules",
        "enabled",
    },
    ("PATCH", "/labels/{key}"): {"name", "color", "instructions", "threshold", "rules", "enabled"},
    ("POST", "/labels/test"): {"from", "subject", "text", "email_id"},
    ("POST", "/webhooks"): {"url", "events", "inbox_ids", "label_keys", "enabled"},
    ("PATCH", "/webhooks/{endpoint_id}"): {"url", "events", "inbox_ids", "label_keys", "enabled"},
    ("POST", "/keys"): {"name", "kind", "scopes", "expires_in_days", "require_approval"},
    ("PATCH", "/keys/{key_id}"): {"require_approval"},
}


@pytest.mark.django_db
def test_write_operations_document_their_bodies() -> None:
    doc = Api().get("/api/openapi.json").json()
    schemas = doc["components"]["schemas"]
    missing = {}
    for (method, path), fields in SPEC_BODIES.items():
        op = doc["paths"][f"/api/v1{path}"][method.lower()]
        ref = (
            op.get("requestBody", {})
            .get("content", {})
            .get("application/json", {})
            .get("schema", {})
            .get("$ref", "")
        )
        documented = set(schemas.get(ref.rsplit("/", 1)[-1], {}).get("properties", {}))
        if fields - documented:
            missing[f"{method} {path} ({op.get('operationId')})"] = sorted(fields - documented)
    assert missing == {}


# --- mass assignment --------------------------------------------------------------------------

# Fields no client may set anywhere (the issue's list and the models' server-side columns); each
# write operation also gets every field of its response that its request does not take.
SERVER_FIELDS = (
    "id",
    "workspace",
    "workspace_id",
    "status",
    "created_at",
    "updated_at",
    "secret",
    "secret_encrypted",
    "key",
    "prefix",
    "digest",
    "email_count",
    "unread_count",
    "last_email_at",
    "decided_by",
    "decided_at",
    "approval_required",
    "revoked_at",
    "last_used_at",
    "sent_at",
    "source",
    "delivery",
    "attempts",
    "attempt_count",
    "inbox_id",
    "endpoint_id",
    "address",
    "permanent",
    "created_by",
    "raw",
)
SENTINELS = ("hostile", "2001-02-03", "987654")


def _hostile_value(name: str, schema: dict[str, Any], victim: Side, variant: int) -> Any:
    """A value for a field the client may not set: the other workspace's ids where the field
    names one, else a recognisable value of the field's type (two variants: booleans and enum
    choices both ways)."""
    named = {
        "workspace": victim.workspace.pk,
        "workspace_id": victim.workspace.pk,
        "inbox_id": victim.ids["inbox_id"],
        "endpoint_id": victim.ids["endpoint_id"],
        "address": victim.inbox_address,
        "decided_by": victim.users["owner"].pk if variant else victim.users["owner"].email,
        "created_by": victim.users["owner"].pk,
        "secret": "whsec_hostile000000000000000000000000",
        "key": "pgh_hostile00000000000000000000000000000000",
        "id": "hostile-id",
    }
    if name in named:
        return named[name]
    return _typed(resolve_schema(schema), name, variant)


def _typed(schema: dict[str, Any], name: str, variant: int) -> Any:
    if "enum" in schema:
        return schema["enum"][-1 if variant == 0 else 0]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    if schema.get("format") == "date-time":
        return "2001-02-03T04:05:06Z"
    if kind == "boolean":
        return variant == 0
    if kind in ("integer", "number"):
        return 987654
    if kind == "array":
        return [_typed(resolve_schema(schema.get("items", {})), name, variant)]
    if kind == "object" or kind is None:
        return {"hostile": name}
    return f"hostile-{name}"


def hostile_fields(op: Operation, victim: Side, variant: int) -> dict[str, Any]:
    taken = set((op.body_schema or {}).get("properties", {}))
    response = (op.response_schema or {}).get("properties", {})
    names = [n for n in dict.fromkeys([*SERVER_FIELDS, *response]) if n not in taken]
    return {n: _hostile_value(n, response.get(n, {}), victim, variant) for n in names}


def _diff(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """Per table: rows inserted (in primary-key order), columns updated, rows deleted."""
    out: dict[str, Any] = {}
    for table in before:
        old, new = before[table], after[table]
        inserted = [new[pk] for pk in sorted(set(new) - set(old), key=str)]
        deleted = sorted(set(old) - set(new), key=str)
        updated = {
            pk: {c: new[pk][c] for c in new[pk] if new[pk][c] != old[pk][c]}
            for pk in set(old) & set(new)
            if new[pk] != old[pk]
        }
        if inserted or deleted or updated:
            out[table] = {"inserted": inserted, "deleted": deleted, "updated": updated}
    return out


def _volatile(a: dict[str, Any], b: dict[str, Any]) -> set[tuple[str, str]]:
    """(table, column) that differ between two runs of the same request (ids, times, random
    secrets): compared only for sentinels, not for equality."""
    out: set[tuple[str, str]] = set()
    for table in set(a) | set(b):
        rows_a = a.get(table, {}).get("inserted", [])
        rows_b = b.get(table, {}).get("inserted", [])
        for row_a, row_b in zip(rows_a, rows_b, strict=False):
            out |= {(table, c) for c in row_a if row_a[c] != row_b.get(c)}
        upd_a = a.get(table, {}).get("updated", {})
        upd_b = b.get(table, {}).get("updated", {})
        for pk in set(upd_a) | set(upd_b):
            cols_a, cols_b = upd_a.get(pk, {}), upd_b.get(pk, {})
            out |= {(table, c) for c in set(cols_a) | set(cols_b) if cols_a.get(c) != cols_b.get(c)}
    return out


def _compare(
    plain: dict[str, Any], hostile: dict[str, Any], volatile: set[tuple[str, str]]
) -> list[str]:
    """How the hostile run's changes differ from the plain run's, beyond volatile columns."""
    problems = []
    for table in sorted(set(plain) | set(hostile)):
        p = plain.get(table, {"inserted": [], "deleted": [], "updated": {}})
        h = hostile.get(table, {"inserted": [], "deleted": [], "updated": {}})
        if len(p["inserted"]) != len(h["inserted"]) or p["deleted"] != h["deleted"]:
            problems.append(f"{table}: other rows inserted or deleted")
            continue
        for row_p, row_h in zip(p["inserted"], h["inserted"], strict=True):
            problems += [
                f"{table} new row: {c}={row_h[c]!r} (plain: {row_p[c]!r})"
                for c in row_h
                if (table, c) not in volatile and row_h[c] != row_p[c]
            ]
        if set(p["updated"]) != set(h["updated"]):
            problems.append(f"{table}: other rows updated")
            continue
        for pk, cols in h["updated"].items():
            problems += [
                f"{table} {pk}: {c}={v!r} (plain: {p['updated'][pk].get(c, '<unchanged>')!r})"
                for c, v in cols.items()
                if (table, c) not in volatile and p["updated"][pk].get(c, "<unchanged>") != v
            ]
            problems += [
                f"{table} {pk}: {c} not changed"
                for c in p["updated"][pk]
                if (table, c) not in volatile and c not in cols
            ]
    return problems


def _sentinels_in(diff: dict[str, Any], victim: Side) -> list[str]:
    found = []
    for table, change in diff.items():
        values = [*change["inserted"], *change["updated"].values()]
        text = json.dumps(values, default=str)
        found += [f"{table}: {s}" for s in (*SENTINELS, victim.workspace.pk) if s in text]
    return found


@pytest.fixture
def world(db: None, settings) -> World:  # type: ignore[no-untyped-def]
    settings.RATE_LIMIT_PER_MINUTE = 1_000_000
    return build_world()


def test_mass_assignment_matrix(world: World, figure) -> None:  # type: ignore[no-untyped-def]
    """Every write operation of the document, with every field it does not take (the server's
    fields and the other workspace's ids) added to a valid body, changes exactly what the valid
    body alone changes; for PATCH also with nothing but those fields (changes nothing more than
    an empty PATCH)."""
    alpha, bravo = world.alpha, world.bravo
    skip = {"apikeys.ApiKey": ["last_used_at"]}
    mismatches: list[str] = []
    cells = fields = 0

    def run(op: Operation, body: dict[str, Any] | None) -> tuple[Answer, dict[str, Any]]:
        client = alpha.sessions["owner"] if op.session_only else key_client(alpha.key)
        with rolled_back():
            before = snapshot_all(skip=skip)
            answer = call(op, alpha.ids, client=client, body=body)
            return answer, _diff(before, snapshot_all(skip=skip))

    for op in [op for op in operations() if op.writes and not op.channels]:
        required = (op.body_schema or {}).get("required", [])
        bases = [body_for(op) or {}] + ([{}] if op.method == "PATCH" and not required else [])
        for base in bases:
            plain, first = run(op, base)
            _, second = run(op, base)
            if not succeeded(plain):
                mismatches.append(f"{op} {base}: control failed {plain.status} {plain.text}")
                continue
            volatile = _volatile(first, second)
            for variant in (0, 1):
                extra = hostile_fields(op, bravo, variant)
                cells += 1
                fields += len(extra)
                answer, changed = run(op, {**base, **extra})
                where = f"{op} {base or '{}'} + {len(extra)} fields (variant {variant})"
                if answer.status != plain.status:
                    mismatches.append(f"{where}: {answer.status} {answer.text[:200]}")
                mismatches += [f"{where}: {p}" for p in _compare(first, changed, volatile)]
                mismatches += [f"{where}: stored {s}" for s in _sentinels_in(changed, bravo)]
                echoed = [s for s in (*SENTINELS, bravo.workspace.pk) if s in answer.text]
                if echoed:
                    mismatches.append(f"{where}: the answer shows {echoed}")
    figure(
        f"mass assignment: {cells} requests with {fields} unknown or read-only fields in all, "
        f"{len(mismatches)} mismatches"
    )
    assert mismatches == []


# --- secrets after creation ---------------------------------------------------------------------


class Captured(logging.Handler):
    """Every log record of the test process, formatted, with its raw arguments."""

    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.lines: list[str] = []
        self.setFormatter(logging.Formatter("%(levelname)s %(name)s %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{self.format(record)} {record.args!r}")


@contextlib.contextmanager
def everything_logged() -> Iterator[Captured]:
    """All logging at DEBUG for the duration, SQL included (every logger, whatever its level)."""
    from django.db import connection

    handler = Captured()
    loggers = [
        logging.getLogger(),
        *(logging.getLogger(n) for n in logging.root.manager.loggerDict),
    ]
    levels = [(lg, lg.level) for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.DEBUG)
    logging.getLogger().addHandler(handler)
    connection.force_debug_cursor = True
    try:
        yield handler
    finally:
        connection.force_debug_cursor = False
        logging.getLogger().removeHandler(handler)
        for lg, level in levels:
            lg.setLevel(level)


def columns_containing(needles: list[str]) -> tuple[dict[str, int], int]:
    """``table.column`` → rows whose value contains one of ``needles``, over every text,
    character, JSON and bytea column of every table (information_schema); and how many
    columns were searched."""
    from django.db import connection

    if connection.vendor == "sqlite":
        return _sqlite_columns_containing(needles)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT table_name, column_name, data_type FROM information_schema.columns "
            "WHERE table_schema = 'public' AND data_type IN "
            "('text', 'character varying', 'character', 'json', 'jsonb', 'bytea')"
        )
        columns = cursor.fetchall()
        parts, params = [], []
        for table, column, kind in columns:
            for needle in needles:
                if kind == "bytea":
                    test = f'position(%s::bytea in "{column}") > 0'
                else:
                    test = f'strpos("{column}"::text, %s) > 0'
                parts.append(f'SELECT %s, count(*) FROM "{table}" WHERE {test}')
                params += [f"{table}.{column}", needle.encode() if kind == "bytea" else needle]
        cursor.execute(" UNION ALL ".join(parts), params)
        found: dict[str, int] = {}
        for name, count in cursor.fetchall():
            found[name] = found.get(name, 0) + count
    return {name: n for name, n in found.items() if n}, len(columns)


def _sqlite_columns_containing(needles: list[str]) -> tuple[dict[str, int], int]:
    """:func:`columns_containing` on SQLite (embedded mode): every text, JSON and blob column
    of every table, from the tables' declared types."""
    from django.db import connection

    searched = ("text", "varchar", "char", "json", "blob")
    with connection.cursor() as cursor:
        columns = []
        for table in connection.introspection.table_names(cursor):
            cursor.execute(f'PRAGMA table_info("{table}")')
            for _, column, kind, *_ in cursor.fetchall():
                if any(word in kind.lower() for word in searched):
                    columns.append((table, column, "blob" in kind.lower()))
        found: dict[str, int] = {}
        for table, column, is_blob in columns:
            for needle in needles:
                cursor.execute(
                    f'SELECT count(*) FROM "{table}" WHERE instr("{column}", %s) > 0',
                    [needle.encode() if is_blob else needle],
                )
                count = cursor.fetchone()[0]
                if count:
                    found[f"{table}.{column}"] = found.get(f"{table}.{column}", 0) + count
    return found, len(columns)


def _admin_pages(base: str, session: str, urls: list[str]) -> dict[str, str]:
    """The Django admin pages at ``urls``, fetched from the live web process with the session
    cookie of a staff user; url → body."""
    pages: dict[str, str] = {}
    with httpx.Client(base_url=base, timeout=30, cookies={"sessionid": session}) as http:
        for url in urls:
            response = http.get(url)
            assert response.status_code == 200, (url, response.status_code)
            pages[url] = response.text
    return pages


def _admin_urls(secret_bearing: tuple[type, ...]) -> list[str]:
    """The admin index, every model's list page, and change pages: every object of the models
    that hold secrets (keys, endpoints), three of every other model."""
    from django.contrib import admin
    from django.contrib.admin.utils import quote

    urls = ["/admin/"]
    for model in admin.site._registry:
        meta = model._meta
        urls.append(f"/admin/{meta.app_label}/{meta.model_name}/")
        pks = model._base_manager.order_by("-pk").values_list("pk", flat=True)
        for pk in pks if model in secret_bearing else pks[:3]:
            urls.append(f"/admin/{meta.app_label}/{meta.model_name}/{quote(pk)}/change/")
    return urls


def test_secrets_appear_nowhere_after_creation(
    live_stack, transactional_db: None, settings, receiver, figure
) -> None:  # type: ignore[no-untyped-def]
    """A key and a webhook secret created through the live API and two created in-process, then
    used (requests, the stream's ?access_token=, signed deliveries by the worker), appear in 0
    later responses (every non-DELETE operation, live and in-process, with an admin key and
    with the new key itself; the dashboard's key and webhook pages), 0 Django admin pages, 0 log
    lines (in-process at DEBUG with SQL, and all output of smtpd, daphne and the worker at
    DEBUG) and 0 database columns."""
    settings.RATE_LIMIT_PER_MINUTE = 1_000_000
    settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = True
    world = build_world()
    alpha = world.alpha
    base = live_stack.base_url
    every_event = list(WEBHOOK_EVENTS)
    responses: dict[str, str] = {}
    with everything_logged() as logged:
        # Created through the live web process, and in-process.
        live = httpx.Client(
            base_url=base, headers={"Authorization": f"Bearer {alpha.key}"}, timeout=30
        )
        created_key = live.post(
            "/api/v1/keys", json={"name": "fresh", "scopes": ["read", "write", "send", "admin"]}
        ).json()
        created_hook = live.post(
            "/api/v1/webhooks", json={"url": receiver.url, "events": every_event}
        ).json()
        local = key_client(alpha.key)
        local_key = local.post(
            "/api/v1/keys", {"name": "local", "scopes": ["admin"]}, format="json"
        ).json()
        local_hook = local.post(
            "/api/v1/webhooks", {"url": receiver.url, "events": every_event}, format="json"
        ).json()
        created_login = live.post(
            f"/api/v1/inboxes/{alpha.ids['inbox_id']}/smtp-credentials", json={"name": "live"}
        ).json()
        local_login = local.post(
            f"/api/v1/inboxes/{alpha.ids['inbox_id']}/smtp-credentials", {}, format="json"
        ).json()
        secrets = {
            "live key": created_key["key"],
            "live webhook secret": created_hook["secret"],
            "in-process key": local_key["key"],
            "in-process webhook secret": local_hook["secret"],
            "live SMTP password": created_login["password"],
            "in-process SMTP password": local_login["password"],
        }
        assert all(secrets.values()) and len(set(secrets.values())) == 6
        # A password used at the live smtpd where AUTH is offered without TLS (embedded mode),
        # and mail sent with it; elsewhere (no certificate) AUTH is refused before any secret.
        with smtplib.SMTP("127.0.0.1", live_stack.smtp_port, timeout=30) as smtp:
            smtp.ehlo()
            if smtp.has_extn("auth"):
                smtp.login(created_login["username"], created_login["password"])
                smtp.sendmail(
                    "app@sender.example",
                    ["someone@elsewhere.example"],
                    message(to="someone@elsewhere.example", subject="sandboxed"),
                )
            else:
                assert smtp.docmd("AUTH", "LOGIN")[0] == 538

        # Used: as credentials (header and ?access_token=), and by the worker to sign.
        fresh = {"Authorization": f"Bearer {created_key['key']}"}
        assert live.get("/api/v1/me", headers=fresh).status_code == 200
        stream = call(
            next(op for op in operations() if op.path.endswith("/stream")),
            alpha.ids,
            live=base,
            query={"access_token": created_key["key"]},
        )
        assert stream.status == 200
        # A client that names the wrong inbox gets its answer at once (and an access-log line).
        wrong = call(
            next(op for op in operations() if op.path.endswith("/stream")),
            {"inbox_id": "inb_nosuchinbox"},
            live=base,
            query={"access_token": created_key["key"]},
        )
        assert wrong.error == (404, "not_found")
        assert live.post(f"/api/v1/webhooks/{created_hook['id']}/test").status_code == 200
        with smtplib.SMTP("127.0.0.1", live_stack.smtp_port, timeout=30) as smtp:
            smtp.sendmail(
                "a@sender.example",
                [alpha.inbox_address],
                message(to=alpha.inbox_address, subject="signed"),
            )
        receiver.wait_for(3, timeout=60)  # webhook.test, and email.received for the live endpoint
        delivery = live.get(f"/api/v1/webhooks/{created_hook['id']}/deliveries").json()["data"][0]

        # Every later response: each operation but DELETE, live and in-process, with the admin
        # key and with the new key, naming the new key and endpoint where a path takes ids.
        ids = {
            **alpha.ids,
            "key_id": created_key["id"],
            "endpoint_id": created_hook["id"],
            "delivery_id": delivery["id"],
        }
        local_ids = {**alpha.ids, "key_id": local_key["id"], "endpoint_id": local_hook["id"]}
        for op in operations():
            if op.method == "DELETE" or op.session_only:
                continue
            for name, plain in (("admin key", alpha.key), ("new key", created_key["key"])):
                answer = call(
                    op,
                    ids,
                    live=base,
                    live_headers={"Authorization": f"Bearer {plain}"},
                    body=body_for(op),
                )
                responses[f"live {op} ({name})"] = answer.text + json.dumps(answer.headers)
            if not op.channels:
                for name, plain in (("admin key", alpha.key), ("new key", local_key["key"])):
                    with rolled_back():
                        answer = call(op, local_ids, client=key_client(plain), body=body_for(op))
                    responses[f"in-process {op} ({name})"] = answer.text + json.dumps(
                        answer.headers
                    )
        owner = alpha.sessions["owner"]
        for page in (
            "/keys/",
            "/webhooks/",
            f"/webhooks/{local_hook['id']}/",
            f"/webhooks/{created_hook['id']}/",
        ):
            response = owner.get(page)
            assert response.status_code == 200, page
            responses[f"dashboard {page}"] = response.content.decode()
        live.close()

    # The Django admin, with a staff user, through the live (guarded) web process.
    from django.contrib.auth import get_user_model
    from django.test import Client

    from apikeys.models import ApiKey
    from webhooks.models import Endpoint

    staff = get_user_model().objects.create_superuser("staff@example.com", "staff@example.com")
    signed_in = Client()
    signed_in.force_login(staff)
    pages = _admin_pages(
        base, signed_in.cookies["sessionid"].value, _admin_urls((ApiKey, Endpoint))
    )
    time.sleep(1)  # the processes' last lines
    output = live_stack.output()
    found_columns, searched = columns_containing(list(secrets.values()))

    # The test's own HTTP client logs the URLs it calls: that is the client's log, not ours.
    own_lines = [line for line in logged.lines if not (" httpx " in line and base in line)]
    leaks = {
        what: {
            "responses": [k for k, v in responses.items() if plain in v],
            "admin pages": [k for k, v in pages.items() if plain in v],
            "log lines (test process)": [line[:200] for line in own_lines if plain in line],
            "log lines (processes)": [line[:200] for line in output if plain in line],
        }
        for what, plain in secrets.items()
    }
    leaks = {w: {k: v for k, v in found.items() if v} for w, found in leaks.items()}
    # The searches can find things: the new key's id is in responses and pages, requests are in
    # the logs, and the marker is in the database.
    assert any(created_key["id"] in v for v in responses.values())
    assert any(created_key["id"] in v for v in pages.values())
    assert any("/api/v1/me" in line for line in output)
    assert any("apikeys_apikey" in line for line in logged.lines)
    assert columns_containing([alpha.marker])[0]
    figure(
        f"secrets: 2 keys, 2 webhook secrets and 2 SMTP passwords searched in {len(responses)} responses, "
        f"{len(pages)} admin pages, {len(logged.lines)} + {len(output)} log lines and "
        f"{searched} database columns: {sum(len(v) for f in leaks.values() for v in f.values())} "
        f"found, {sum(found_columns.values())} rows"
    )
    assert leaks == {w: {} for w in secrets}
    assert found_columns == {}


def test_the_access_log_redacts_keys_in_urls() -> None:
    """config.web: the value of every parameter the application reads as ``access_token`` is
    replaced in daphne's access log; nothing else changes."""
    from config.web import redact, redacting

    key = "pgh_" + "a" * 40
    cases = {
        f"/api/v1/inboxes/x/stream?access_token={key}": "/api/v1/inboxes/x/stream?access_token=[redacted]",
        f"/s?last_event_id=3&access_token={key}&x=1": "/s?last_event_id=3&access_token=[redacted]&x=1",
        f"/s?access%5Ftoken={key}": "/s?access%5Ftoken=[redacted]",
        f"/s?access_token={key}&access_token={key}": "/s?access_token=[redacted]&access_token=[redacted]",
        f"/s?note=access_token={key}": f"/s?note=access_token={key}",  # a value, not the name
        "/api/v1/me": "/api/v1/me",
        "/s?access_token": "/s?access_token",
    }
    assert {uri: redact(uri) for uri in cases} == cases
    lines: list[dict] = []
    redacting(lambda protocol, action, details: lines.append(details))(
        "http", "complete", {"path": f"/s?access_token={key}", "status": 404}
    )
    assert lines == [{"path": "/s?access_token=[redacted]", "status": 404}]
