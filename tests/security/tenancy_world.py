"""Shared machinery of the tenancy, authorization and mass-assignment matrices.

* :func:`operations` reads the OpenAPI document the server serves (``/api/openapi.json``, which
  also documents the Channels-served ``wait`` and ``stream``), so an operation added later is in
  every matrix without anyone listing it.
* :data:`SPEC_SCOPES` is the spec's endpoint tables, transcribed by hand: the authorization
  matrix checks the server against them, not against the server's own document.
* :func:`build_world` makes two workspaces, *alpha* and *bravo*, each with one object of every
  kind (custom domain, inbox, email with an attachment and a rule label, labels, webhook endpoint
  with a delivery, pending outbox item, keys, an owner, an admin and a member); every string a
  side owns carries its marker, so a leak is a substring search.
* :func:`call` sends one request in-process (Django's test client) or, for the Channels-served
  paths, to a live web process; :func:`snapshot` reads rows to compare before and after.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
from django.apps import apps
from django.contrib.auth import get_user_model
from django.db import connection, models
from django.urls import Resolver404, resolve
from django.utils.crypto import get_random_string
from rest_framework.test import APIClient

from apikeys import services as key_services
from apikeys.audit import Actor
from apikeys.models import Membership, Role, Workspace
from apikeys.principal import Principal
from config.tenancy import TenantManager
from inboxes import services as inbox_services
from labels import services as label_services
from labels.classifier.base import EmailFacts
from mail import pipeline
from mail.models import Attachment
from outbox import services as outbox_services
from tests.dns_server import verified_domain
from tests.mail.messages import PDF, message
from webhooks import services as webhook_services

PREFIX = "/api/v1"

# The spec's endpoint tables (inbox-api.md, "Endpoints"), method and path with `{}` for each id,
# and the scope each names; wait and stream are in the Emails table too.
SPEC_SCOPES: dict[tuple[str, str], str] = {
    ("GET", "/inboxes"): "read",
    ("POST", "/inboxes"): "write",
    ("GET", "/inboxes/{}"): "read",
    ("PATCH", "/inboxes/{}"): "write",
    ("DELETE", "/inboxes/{}"): "write",
    ("GET", "/inboxes/{}/emails"): "read",
    ("GET", "/emails"): "read",
    ("GET", "/inboxes/{}/wait"): "read",
    ("GET", "/inboxes/{}/stream"): "read",
    ("GET", "/emails/{}"): "read",
    ("PATCH", "/emails/{}"): "write",
    ("DELETE", "/emails/{}"): "write",
    ("GET", "/emails/{}/raw"): "read",
    ("GET", "/emails/{}/attachments/{}"): "read",
    ("POST", "/inboxes/{}/send"): "send",
    ("GET", "/outbox"): "read",
    ("GET", "/outbox/{}"): "read",
    ("POST", "/outbox/{}/decision"): "admin",
    ("GET", "/labels"): "read",
    ("POST", "/labels"): "admin",
    ("PATCH", "/labels/{}"): "admin",
    ("DELETE", "/labels/{}"): "admin",
    ("POST", "/labels/test"): "read",
    # Not in the spec: issue 31's explicit examples; teaching a label writes like a manual label.
    ("GET", "/labels/{}/examples"): "read",
    ("POST", "/labels/{}/examples"): "write",
    ("DELETE", "/labels/{}/examples/{}"): "write",
    ("GET", "/webhooks"): "read",
    ("POST", "/webhooks"): "admin",
    ("PATCH", "/webhooks/{}"): "admin",
    ("DELETE", "/webhooks/{}"): "admin",
    ("GET", "/webhooks/{}/deliveries"): "read",
    ("POST", "/webhooks/{}/deliveries/{}/replay"): "admin",
    ("POST", "/webhooks/{}/test"): "admin",
    ("GET", "/keys"): "admin",
    ("POST", "/keys"): "admin",
    ("PATCH", "/keys/{}"): "admin",
    ("DELETE", "/keys/{}"): "admin",
    ("GET", "/domains"): "read",
    ("POST", "/domains/{}/verify"): "admin",
    ("GET", "/stats"): "read",
    ("GET", "/me"): "read",
    # Not in the spec: issue 30's audit log, admin-only like /keys.
    ("GET", "/audit"): "admin",
    # Not in the spec: issue 28's workspace-wide wait, read like the per-inbox wait.
    ("GET", "/emails/wait"): "read",
    # Not in the spec: issue 30's mbox export, read like the inbox's emails.
    ("GET", "/inboxes/{}/export"): "read",
    # Not in the spec: issue 29's sandbox SMTP credentials, sub-resources of an inbox: listing
    # them (no secrets) reads, creating and revoking them writes, as PATCH /inboxes/{id} does.
    ("GET", "/inboxes/{}/smtp-credentials"): "read",
    ("POST", "/inboxes/{}/smtp-credentials"): "write",
    ("DELETE", "/inboxes/{}/smtp-credentials/{}"): "write",
}
# Spec, Authentication 5 and decisions.md: only an owner's or admin's dashboard session decides.
SESSION_ONLY = {("POST", "/outbox/{}/decision")}
# decisions.md: admin implies read, write and send; write implies read; send implies nothing.
IMPLIES = {
    "read": {"read"},
    "write": {"write", "read"},
    "send": {"send"},
    "admin": {"admin", "write", "read", "send"},
}

# A body that makes each operation succeed for its owner (the schema cannot say what a valid
# recipient or URL is). Operations not listed get one generated from the schema's required
# fields; every matrix's positive control shows whether that was enough.
SAMPLE_BODIES: dict[str, dict[str, Any]] = {
    "createInbox": {},
    "updateInbox": {"name": "renamed"},
    "updateEmail": {"starred": True},
    "sendEmail": {"to": ["someone@example.com"], "subject": "hello", "text": "hi"},
    "decideOutboxItem": {"decision": "reject", "note": "no"},
    "createLabel": {"key": "fresh-label", "name": "Fresh"},
    "updateLabel": {"name": "Renamed"},
    "testLabels": {"subject": "hello"},
    # "{email_id}": the side's own email (``call`` fills in path values named in a body).
    "addLabelExample": {"email_id": "{email_id}", "answer": "yes"},
    "createWebhook": {"url": "https://hooks.example.com/new"},
    "updateWebhook": {"enabled": False},
    "createKey": {"name": "fresh key"},
    "updateKey": {"require_approval": True},
}


def spec_key(method: str, path: str) -> tuple[str, str]:
    """``("GET", "/inboxes/{}")`` for ``GET /api/v1/inboxes/{inbox_id}``."""
    return method.upper(), re.sub(r"\{[^}]+\}", "{}", path.removeprefix(PREFIX))


# --- the OpenAPI document -----------------------------------------------------------------------


@dataclass(frozen=True)
class Operation:
    method: str
    path: str  # the document's template, e.g. /api/v1/inboxes/{inbox_id}
    operation_id: str
    scope: str | None  # x-required-scope
    query: dict[str, dict[str, Any]]
    body_schema: dict[str, Any] | None  # resolved, with "properties"
    response_schema: dict[str, Any] | None  # of the first 2xx JSON response, resolved
    channels: bool  # served by a Channels app (wait, stream), not a Django view

    @property
    def params(self) -> tuple[str, ...]:
        return tuple(re.findall(r"\{(\w+)\}", self.path))

    @property
    def spec(self) -> tuple[str, str]:
        return spec_key(self.method, self.path)

    @property
    def session_only(self) -> bool:
        return self.spec in SESSION_ONLY

    @property
    def writes(self) -> bool:
        return self.method != "GET"

    def url(self, values: dict[str, str]) -> str:
        return re.sub(r"\{(\w+)\}", lambda m: str(values[m.group(1)]), self.path)

    def __str__(self) -> str:
        return f"{self.method} {self.path.removeprefix(PREFIX)}"


def _resolve(doc: dict, schema: dict | None) -> dict | None:
    """Follows ``$ref``s (and a one-element ``allOf``) down to a schema with properties."""
    seen = 0
    while schema is not None and seen < 20:
        seen += 1
        if "$ref" in schema:
            schema = doc["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
        elif "allOf" in schema and len(schema["allOf"]) == 1:
            schema = schema["allOf"][0]
        else:
            return schema
    return schema


@functools.cache
def document() -> dict[str, Any]:
    """The OpenAPI document as the server serves it."""
    response = APIClient().get("/api/openapi.json")
    assert response.status_code == 200, response.content
    return json.loads(response.content)


@functools.cache
def operations() -> tuple[Operation, ...]:
    """Every operation of the served document, in document order."""
    doc = document()
    found = []
    for path, item in doc["paths"].items():
        for method, op in item.items():
            if method not in {"get", "post", "put", "patch", "delete"}:
                continue
            body = (op.get("requestBody") or {}).get("content", {}).get("application/json", {})
            response = None
            for status, answer in sorted(op.get("responses", {}).items()):
                content = (answer.get("content") or {}).get("application/json")
                if status.startswith("2") and content:
                    response = _resolve(doc, content.get("schema"))
                    break
            try:
                resolve(re.sub(r"\{\w+\}", "x", path))
                channels = False
            except Resolver404:
                channels = True
            found.append(
                Operation(
                    method=method.upper(),
                    path=path,
                    operation_id=op.get("operationId", ""),
                    scope=op.get("x-required-scope"),
                    query={
                        p["name"]: p.get("schema", {})
                        for p in op.get("parameters", [])
                        if p.get("in") == "query"
                    },
                    body_schema=_resolve(doc, body.get("schema")),
                    response_schema=response,
                    channels=channels,
                )
            )
    return tuple(found)


def resolve_schema(schema: dict[str, Any] | None) -> dict[str, Any]:
    """A schema of the document with its ``$ref`` followed."""
    return _resolve(document(), schema) or {}


def schema_of(op: Operation, name: str) -> dict[str, Any]:
    """The resolved schema of one request property."""
    props = (op.body_schema or {}).get("properties", {})
    return _resolve(document(), props.get(name)) or {}


def _sample(schema: dict[str, Any]) -> Any:
    """A plain valid value for a schema (first enum value, an address for emails ...)."""
    schema = _resolve(document(), schema) or {}
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next(k for k in kind if k != "null")
    if kind == "array":
        return [_sample(schema.get("items", {}))]
    if kind == "object":
        return {}
    if kind == "boolean":
        return True
    if kind in ("integer", "number"):
        return max(1, schema.get("minimum", 1))
    return {"email": "someone@example.com", "uri": "https://hooks.example.com/x"}.get(
        schema.get("format", ""), "sample"
    )


def body_for(op: Operation) -> dict[str, Any] | None:
    """A body that makes ``op`` succeed for its owner (None for operations without one)."""
    if op.operation_id in SAMPLE_BODIES:
        return dict(SAMPLE_BODIES[op.operation_id])
    if op.body_schema is None:
        return None
    required = op.body_schema.get("required", [])
    return {name: _sample(schema_of(op, name)) for name in required}


# --- the world ----------------------------------------------------------------------------------


@dataclass
class Side:
    """One workspace with one object of every kind; ``ids`` by path parameter name."""

    marker: str
    workspace: Workspace
    key: str  # admin key (every scope), plain
    key_id: str
    users: dict[str, Any]  # role -> user
    sessions: dict[str, Any]  # role -> a signed-in client with its CSRF token
    ids: dict[str, str]
    inbox_address: str
    domain: str
    label_key: str  # only this side has it
    tokens: set[str] = field(default_factory=set)  # strings only this side owns

    def id_forms(self, param: str) -> list[str]:
        """Every way of naming this side's object for a path parameter."""
        if param == "inbox_id":
            return [self.ids[param], self.inbox_address, self.inbox_address.upper()]
        return [self.ids[param]]

    def leaks_in(self, text: str) -> list[str]:
        """Which of this side's strings appear in ``text``."""
        return sorted(token for token in self.tokens if token in text)


@dataclass
class World:
    alpha: Side
    bravo: Side

    def pairs(self) -> Iterator[tuple[Side, Side]]:
        """(attacker, victim), both ways round."""
        yield self.alpha, self.bravo
        yield self.bravo, self.alpha


COMMON_LABEL = "common"  # both workspaces have a label with this key


def build_side(marker: str) -> Side:
    """A workspace named after ``marker`` with one object of every kind."""
    workspace = Workspace.objects.create(name=f"{marker} workspace")
    users = {}
    for role in (Role.OWNER, Role.ADMIN, Role.MEMBER):
        # No password: sessions are made with force_login, and hashing one costs seconds.
        email = f"{marker}-{role}@example.com"
        user = get_user_model().objects.create(username=email, email=email)
        Membership.objects.create(workspace=workspace, user=user, role=role)
        users[str(role)] = user
    admin = key_services.api_key_create(
        workspace=workspace, name=f"{marker} admin key", scopes=["admin"], by=Actor.system("tests")
    )
    target = key_services.api_key_create(
        workspace=workspace,
        name=f"{marker} agent key",
        scopes=["send"],
        require_approval=True,
        by=Actor.system("tests"),
    )
    domain = verified_domain(workspace, f"{marker}.example")  # its TXT record on the test DNS
    label_key = f"{marker}-label"
    condition = {"field": "subject", "op": "contains", "value": marker, "name": "", "negate": False}
    rule = {"match": "any", "conditions": [condition]}
    label = label_services.label_create(
        workspace=workspace,
        key=label_key,
        name=f"{marker} label",
        rules=rule,
        by=Actor.system("tests"),
    )
    label_services.label_create(
        workspace=workspace, key=COMMON_LABEL, name=f"{marker} common", by=Actor.system("tests")
    )
    inbox = inbox_services.inbox_create(
        workspace=workspace,
        local_part=f"{marker}-box",
        name=f"{marker} inbox",
        agent_name=f"{marker}-agent",
        tags=[marker],
    )
    raw = message(
        to=inbox.address,
        sender=f"{marker}@sender.example",
        subject=f"{marker} code 482913",
        text=f"Your {marker} verification code is 482913.",
        attachments=[(f"{marker}.pdf", "application/pdf", PDF)],
    )
    email_id = str(pipeline.receive_one(raw, to=inbox.address).email_id)
    attachment = Attachment.objects.get(email_id=email_id)
    example = label_services.example_add(
        label=label,
        email_id=email_id,
        facts=EmailFacts(f"{marker}@sender.example", "", f"{marker} code", ""),
        answer=True,
        by=Actor.system("tests"),
    )
    endpoint, _ = webhook_services.endpoint_create(
        workspace=workspace,
        url=f"https://hooks.example.com/{marker}",
        events=["email.received"],
        inbox_ids=[inbox.pk],
        label_keys=[],
        by=Actor.system("tests"),
    )
    delivery = webhook_services.send_test(endpoint=endpoint)
    item, _ = outbox_services.send(
        principal=Principal(workspace=workspace, scopes=frozenset({"send"}), key=target.key),
        inbox=inbox,
        to=["someone@example.com"],
        subject=f"{marker} outgoing",
        text=f"{marker} text",
        reason=f"{marker} reason",
    )
    assert item.status == "pending"
    smtp_login = inbox_services.smtp_credential_create(
        inbox=inbox, name=f"{marker} smtp", by=Actor.system("tests")
    ).credential
    ids = {
        "inbox_id": inbox.pk,
        "email_id": email_id,
        "attachment_id": attachment.pk,
        "key_id": target.key.pk,
        "key": label_key,
        "endpoint_id": endpoint.pk,
        "delivery_id": delivery.pk,
        "item_id": item.pk,
        "domain": domain.domain,
        "example_id": example.public_id,
        "credential_id": smtp_login.pk,
    }
    tokens = {
        marker,
        workspace.pk,
        admin.key.pk,
        label.pk,
        *ids.values(),
        domain.domain,
        smtp_login.username,
    }
    return Side(
        marker=marker,
        workspace=workspace,
        key=admin.plain,
        key_id=admin.key.pk,
        users=users,
        sessions={role: session_client(user) for role, user in users.items()},
        ids=ids,
        inbox_address=inbox.address,
        domain=domain.domain,
        label_key=label_key,
        tokens=tokens,
    )


def build_world() -> World:
    return World(alpha=build_side("alphamark"), bravo=build_side("bravomark"))


# --- calling -------------------------------------------------------------------------------------


@functools.cache
def _handler(csrf: bool) -> Any:
    """One request handler per CSRF mode for every client: building one loads the middleware
    (WhiteNoise scans the static files), which costs more than a request."""
    from rest_framework.test import ForceAuthClientHandler

    return ForceAuthClientHandler(enforce_csrf_checks=csrf)


def _client(*, csrf: bool = False) -> APIClient:
    client = APIClient(enforce_csrf_checks=csrf)
    client.handler = _handler(csrf)
    return client


def key_client(plain: str | None = None, **headers: str) -> APIClient:
    """An in-process client sending ``Authorization: Bearer <plain>`` (or the given headers)."""
    client = _client()
    extra = {f"HTTP_{k.upper().replace('-', '_')}": v for k, v in headers.items()}
    if plain is not None:
        extra.setdefault("HTTP_AUTHORIZATION", f"Bearer {plain}")
    client.credentials(**extra)
    return client


def session_client(user: Any, *, csrf: bool = True, origin: str | None = None) -> APIClient:
    """A dashboard session of ``user`` that checks CSRF like a browser's would be checked."""
    client = _client(csrf=True)
    client.force_login(user)
    headers: dict[str, str] = {}
    if csrf:
        # What a page of ours would have set: a CSRF cookie, echoed in the header by the page's
        # JavaScript (Django accepts the unmasked 32-character secret in both places).
        token = get_random_string(32)
        client.cookies["csrftoken"] = token
        headers["HTTP_X_CSRFTOKEN"] = token
    if origin is not None:
        headers["HTTP_ORIGIN"] = origin
    client.credentials(**headers)
    return client


@dataclass
class Answer:
    status: int
    text: str
    headers: dict[str, str]

    def json(self) -> Any:
        return json.loads(self.text)

    @property
    def error(self) -> tuple[int, str | None]:
        """(status, envelope code); the code is None when the body is not the envelope."""
        try:
            body = self.json()
        except ValueError:
            return self.status, None
        if not isinstance(body, dict) or set(body) != {"error"}:
            return self.status, None
        return self.status, body["error"].get("code")


def call(
    op: Operation,
    values: dict[str, str],
    *,
    client: APIClient | None = None,
    live: str | None = None,
    live_headers: dict[str, str] | None = None,
    body: dict[str, Any] | None = None,
    query: dict[str, Any] | None = None,
) -> Answer:
    """One request: in-process through ``client``, or over HTTP to the live server at ``live``
    (the Channels-served paths). ``wait`` is asked for with ``timeout=0`` and the stream is read
    up to its first bytes, so neither blocks."""
    url = op.url(values)
    query = dict(query or {})
    if body:  # "{email_id}" in a sample body: that value, when the call has it
        body = {
            k: values.get(v[1:-1], v) if isinstance(v, str) and v[:1] + v[-1:] == "{}" else v
            for k, v in body.items()
        }
    if op.path.endswith("/wait"):
        query.setdefault("timeout", 0)
    if live is not None:
        with httpx.Client(base_url=live, timeout=10) as http:
            request = http.build_request(
                op.method,
                url,
                params=query,
                json=body if op.method != "GET" else None,
                headers=live_headers or {},
            )
            response = http.send(request, stream=True)
            try:
                if response.headers.get("content-type", "").startswith("text/event-stream"):
                    text = next(response.iter_text(), "")
                else:
                    text = response.read().decode("utf-8", "replace")
            finally:
                response.close()
            return Answer(response.status_code, text, dict(response.headers))
    assert client is not None
    if op.method == "GET":
        response = client.get(url, query)
    else:
        target = url + ("?" + "&".join(f"{k}={v}" for k, v in query.items()) if query else "")
        response = client.generic(
            op.method,
            target,
            json.dumps(body) if body is not None else "",
            content_type="application/json",
        )
    content = b"".join(response.streaming_content) if response.streaming else response.content
    return Answer(response.status_code, content.decode("utf-8", "replace"), dict(response.items()))


def succeeded(answer: Answer) -> bool:
    return 200 <= answer.status < 300


# --- snapshots ----------------------------------------------------------------------------------


def tenant_models() -> list[type[models.Model]]:
    """Every model whose rows belong to a workspace (its default manager is guarded)."""
    return [m for m in apps.get_models() if isinstance(m._default_manager, TenantManager)]


def _json_value(value: Any) -> Any:
    """A column value as PostgreSQL's ``row_to_json`` writes it (bytea as ``\\x`` + hex)."""
    if isinstance(value, bytes | memoryview):
        return "\\x" + bytes(value).hex()
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return str(value)


def _tables(querysets: dict[str, models.QuerySet]) -> dict[str, list[dict[str, Any]]]:
    """The rows of several querysets in one round trip (each row as PostgreSQL's JSON of it,
    ordered by primary key): a snapshot costs one query, however many tables there are."""
    if connection.vendor != "postgresql":  # SQLite: one query per table, rows made JSON alike
        return {
            label: json.loads(
                json.dumps(
                    list(queryset.order_by("pk").values()), default=_json_value, sort_keys=True
                )
            )
            for label, queryset in querysets.items()
        }
    parts, params = [], []
    for label, queryset in querysets.items():
        pk = queryset.model._meta.pk.attname
        sql, args = queryset.order_by().values().query.sql_with_params()
        parts.append(
            f"SELECT %s, coalesce(json_agg(row_to_json(s) ORDER BY s.{pk}), '[]') FROM ({sql}) s"
        )
        params += [label, *args]
    with connection.cursor() as cursor:
        cursor.execute(" UNION ALL ".join(parts), params)
        return {
            label: rows if isinstance(rows, list) else json.loads(rows)
            for label, rows in cursor.fetchall()
        }


def snapshot(workspace_id: str) -> dict[str, list[dict[str, Any]]]:
    """Every row a workspace owns (and its own row), column by column."""
    querysets = {"apikeys.Workspace": Workspace.objects.filter(pk=workspace_id)}
    for model in tenant_models():
        lookup = model.tenancy.paths[0] + "_id"
        querysets[model._meta.label] = model._base_manager.filter(**{lookup: workspace_id})
    return _tables(querysets)


def snapshot_all(*, skip: dict[str, Iterable[str]] | None = None) -> dict[str, Any]:
    """Every row of every table of the project (plus users), keyed by table and primary key;
    ``skip`` leaves out columns (e.g. keys' ``last_used_at``; users' ``last_login`` always)."""
    skip = {get_user_model()._meta.label: ["last_login"], **(skip or {})}
    models_ = [*tenant_models(), Workspace, get_user_model()]
    tables = _tables({m._meta.label: m._base_manager.all() for m in models_})
    state: dict[str, Any] = {}
    for model in models_:
        label, pk = model._meta.label, model._meta.pk.attname
        drop = set(skip.get(label, ()))
        state[label] = {
            row[pk]: {k: v for k, v in row.items() if k not in drop} for row in tables[label]
        }
    return state


def changes(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """What differs between two :func:`snapshot_all` states, one line per row."""
    out = []
    for table in sorted(set(before) | set(after)):
        old, new = before.get(table, {}), after.get(table, {})
        if isinstance(old, list):
            if old != new:
                out.append(f"{table}: rows differ")
            continue
        for pk in sorted(set(old) | set(new), key=str):
            if pk not in new:
                out.append(f"{table} {pk}: deleted")
            elif pk not in old:
                out.append(f"{table} {pk}: inserted")
            elif old[pk] != new[pk]:
                fields = sorted(k for k in new[pk] if old[pk].get(k) != new[pk].get(k))
                out.append(f"{table} {pk}: {', '.join(fields)} changed")
    return out
