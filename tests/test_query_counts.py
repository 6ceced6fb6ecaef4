"""No N+1 queries on any list endpoint: a page of many rows costs the same number of queries as a
page of a few. The rows carry what the serializers read (labels, attachments, attempts,
deciders), so a missing ``select_related`` or ``prefetch_related`` shows up as a count that grows
with the page."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from apikeys import services as key_services
from apikeys.audit import Actor
from apikeys.models import Workspace
from events.models import Event
from inboxes import services as inbox_services
from inboxes.models import Inbox
from labels.models import Label
from mail import selectors
from mail.exceptions import EmailNotFound
from mail.models import Email
from mail.pipeline import receive_one
from tests.conftest import Api, error_of
from tests.mail.messages import PNG, message
from webhooks import services as webhook_services
from webhooks.models import Attempt, Delivery, Endpoint

FEW, MANY = 2, 12


def queries(api: Api, path: str, params: dict | None = None) -> int:
    with CaptureQueriesContext(connection) as captured:
        response = api.get(api.url(path), params or {})
    assert response.status_code == 200, response.content
    return len(captured.captured_queries)


def _email(inbox: Inbox, n: int) -> None:
    raw = message(
        to=inbox.address,
        subject=f"invoice {n} code {100000 + n}",
        attachments=[("a.png", "image/png", PNG)],
    )
    delivery = receive_one(raw, to=inbox.address)
    assert delivery.refusal is None


def _endpoint(workspace: Workspace) -> Endpoint:
    endpoint, _ = webhook_services.endpoint_create(
        workspace=workspace,
        url="https://hooks.example.net/in",
        events=["email.received"],
        inbox_ids=[],
        label_keys=[],
        enabled=False,  # no delivery is attempted; the rows below are the log
        by=Actor.system("tests"),
    )
    return endpoint


def _delivery(endpoint: Endpoint, n: int) -> None:
    delivery = Delivery.objects.create(
        endpoint=endpoint,
        workspace_id=endpoint.workspace_id,
        event="email.received",
        body="{}",
        status="failed",
    )
    for i in range(2):
        Attempt.objects.create(delivery=delivery, at=timezone.now(), status_code=500 + (n + i) % 3)


@pytest.fixture
def setting(workspace: Workspace, api: Api) -> Workspace:
    rules = {"match": "any", "conditions": [{"field": "subject", "op": "contains", "value": "inv"}]}
    created = api.call("POST", "labels", {"key": "invoice", "name": "Invoice", "rules": rules})
    assert created.status_code == 200, created.content
    return workspace


Grow = Callable[[int], None]


def _case(workspace: Workspace, api: Api, make_key: Callable[..., str]) -> dict[str, Grow]:
    inbox = inbox_services.inbox_create(workspace=workspace, local_part="counts")
    endpoint = _endpoint(workspace)
    sender = Api(make_key(workspace, ("send",), require_approval=True))
    return {
        "keys": lambda n: key_services.api_key_create(
            workspace=workspace, name=f"k{n}", scopes=["read"], by=Actor.system("tests")
        ),
        "inboxes": lambda n: inbox_services.inbox_create(workspace=workspace, tags=["t"]),
        "emails": lambda n: _email(inbox, n),
        f"inboxes/{inbox.pk}/emails": lambda n: _email(inbox, n),
        "labels": lambda n: Label.objects.create(workspace=workspace, key=f"l{n}", name=f"L{n}"),
        "webhooks": lambda n: _endpoint(workspace),
        f"webhooks/{endpoint.pk}/deliveries": lambda n: _delivery(endpoint, n),
        "outbox": lambda n: sender.call(
            "POST",
            f"inboxes/{inbox.pk}/send",
            {"to": ["someone@example.net"], "subject": f"s{n}", "text": "t", "reason": "r"},
        ),
        "domains": lambda n: inbox_services.domain_add(
            workspace=workspace, domain=f"d{n}.example.org", by=Actor.system("tests")
        ),
        "stats": lambda n: _email(inbox, n),
    }


@pytest.mark.parametrize(
    "endpoint",
    [
        "keys",
        "inboxes",
        "emails",
        "inbox emails",
        "labels",
        "webhooks",
        "deliveries",
        "outbox",
        "domains",
        "stats",
    ],
)
def test_list_query_count_does_not_grow_with_the_page(
    endpoint: str, setting: Workspace, api: Api, make_key: Callable[..., str]
) -> None:
    cases = _case(setting, api, make_key)
    path = {
        "inbox emails": next(p for p in cases if p.endswith("/emails")),
        "deliveries": next(p for p in cases if p.endswith("/deliveries")),
    }.get(endpoint, endpoint)
    grow = cases[path]
    for n in range(FEW):
        grow(n)
    queries(api, path)  # once first: the key's once-a-minute last_used_at write is not the page's
    # /domains and /stats are no pages: they take no limit (an unknown parameter is refused).
    page = {} if endpoint in ("domains", "stats") else {"limit": 50}
    few = queries(api, path, page)
    for n in range(FEW, MANY):
        grow(n)
    # Once first again: writing keys (the "keys" case) moves the credentials epoch, and the
    # next request reads its key again (apikeys.keycache); that read is not the page's.
    queries(api, path)
    many = queries(api, path, page)
    assert many == few, f"{path}: {few} queries for {FEW} rows, {many} for {MANY}"


def test_get_email_is_one_statement(setting: Workspace, api: Api) -> None:
    """GET /emails/{id}: the email, its labels and its attachments in one statement on
    PostgreSQL (mail.selectors.email_record), whatever their number; three elsewhere."""
    inbox = inbox_services.inbox_create(workspace=setting, local_part="one-read")
    for n in range(2):
        _email(inbox, n)  # labelled "invoice" by the rule; one attachment each
    raw = message(
        to=inbox.address,
        subject="invoice with three",
        attachments=[
            ("a.png", "image/png", PNG),
            ("b.png", "image/png", PNG),
            ("c.txt", "text/plain", b"c"),
        ],
    )
    many = receive_one(raw, to=inbox.address).email_id
    few = Email.objects.filter(workspace=setting).exclude(pk=many).values_list("pk", flat=True)[0]
    tables = ("mail_email", "labels_emaillabel", "mail_attachment")
    expected = 1 if connection.vendor == "postgresql" else 3
    queries(api, f"emails/{few}")  # once first: the key's read and its last_used_at write
    for email_id in (few, many):
        with CaptureQueriesContext(connection) as captured:
            response = api.get(api.url(f"emails/{email_id}"))
        assert response.status_code == 200, response.content
        body = response.json()
        assert body["labels"][0]["key"] == "invoice"
        assert len(body["attachments"]) == (3 if email_id == many else 1)
        reads = [q for q in captured.captured_queries if any(t in q["sql"] for t in tables)]
        assert len(reads) == expected, [q["sql"] for q in reads]


def test_get_email_reads_by_primary_key_without_statistics(setting: Workspace) -> None:
    """getEmail's read finds the row by its primary key, not by walking the workspace's emails,
    even where the table has no planner statistics (autovacuum off, or a table just loaded, as
    here: the test database is never analyzed). Before, PostgreSQL chose a workspace index
    there and filtered every email of the workspace to find one."""
    inbox = inbox_services.inbox_create(workspace=setting, local_part="by-key")
    for n in range(30):
        _email(inbox, n)
    email_id = Email.objects.filter(workspace=setting).values_list("pk", flat=True)[7]
    if connection.vendor == "postgresql":
        sql, _, _ = selectors._record_statement()
        params = [email_id, setting.pk]
        scans = _email_scans("EXPLAIN (ANALYZE, COSTS OFF, FORMAT JSON) " + sql, params)
        assert [s.get("Index Name") for s in scans] == ["mail_email_pkey"], scans
        assert all(s.get("Rows Removed by Filter", 0) == 0 for s in scans), scans
        # Served prepared, the statement soon runs on a generic plan (no values): that one too.
        with connection.cursor() as cursor:
            cursor.execute("SET plan_cache_mode = force_generic_plan")
            cursor.execute(
                "PREPARE pgh_by_key AS " + sql.replace("%s", "$1", 1).replace("%s", "$2", 1)
            )
        try:
            scans = _email_scans("EXPLAIN (FORMAT JSON) EXECUTE pgh_by_key(%s, %s)", params)
        finally:
            with connection.cursor() as cursor:
                cursor.execute("DEALLOCATE pgh_by_key")
                cursor.execute("RESET plan_cache_mode")
        assert [s.get("Index Name") for s in scans] == ["mail_email_pkey"], scans
    else:  # SQLite reads by the ORM (mail.selectors.email_get): the same promise of its query
        query = Email.objects.filter(workspace=setting, pk=email_id).order_by("pk")[:1].query
        sql, orm_params = query.sql_with_params()
        with connection.cursor() as cursor:
            cursor.execute("EXPLAIN QUERY PLAN " + sql, orm_params)
            details = [row[-1] for row in cursor.fetchall()]
        assert any("PRIMARY KEY" in d or "autoindex_mail_email_1" in d for d in details), details
    record = selectors.email_record(setting, email_id)
    assert record.email.pk == email_id
    other = key_services.workspace_get_or_create(name="someone else")
    with pytest.raises(EmailNotFound):
        selectors.email_record(other, email_id)


def _email_scans(explain: str, params: list) -> list[dict]:
    """The nodes of a PostgreSQL ``EXPLAIN (FORMAT JSON)`` that read ``mail_email``."""
    with connection.cursor() as cursor:
        cursor.execute(explain, params)
        plan = cursor.fetchone()[0]
    plan = plan if isinstance(plan, list) else json.loads(plan)
    found, nodes = [], [plan[0]["Plan"]]
    while nodes:
        node = nodes.pop()
        if node.get("Relation Name") == "mail_email":
            found.append(node)
        nodes.extend(node.get("Plans", []))
    return found


def test_wait_answer_is_read_like_get_email(setting: Workspace, api: Api) -> None:
    """A wait's answer (REST wait, /emails/wait, MCP wait_for_email) is getEmail's record, read
    by getEmail's one statement on PostgreSQL: the ORM's three (and their prefetch, whose
    querysets and the email point at each other) cost a wake-up a database thread's worth of
    work more and left garbage for the collector."""
    from mail.waiting import _record

    inbox = inbox_services.inbox_create(workspace=setting, local_part="wait-read")
    _email(inbox, 1)
    email_id = Email.objects.get(inbox=inbox).pk
    _record(setting, email_id)  # once first: anything cached per process
    tables = ("mail_email", "labels_emaillabel", "mail_attachment")
    with CaptureQueriesContext(connection) as captured:
        record = _record(setting, email_id)
    reads = [q for q in captured.captured_queries if any(t in q["sql"] for t in tables)]
    assert len(reads) == (1 if connection.vendor == "postgresql" else 3), reads
    response = api.get(api.url(f"emails/{email_id}"))
    assert record == response.json()
    # the rule label's confidence 1.0 is written 1.0, as the list endpoints write it (json_agg
    # on PostgreSQL wrote 1)
    listed = api.get(api.url(f"inboxes/{inbox.pk}/emails")).content.decode()
    assert '"confidence":1.0' in listed and '"confidence":1.0' in response.content.decode()
    assert record["labels"] == [{"key": "invoice", "source": "rule", "confidence": 1.0}]
    assert isinstance(record["labels"][0]["confidence"], float)
    assert _record(setting, "eml_00000000000000000000000000") is None


def _create_statements(api: Api, autocommit: list[bool] | None = None) -> tuple[Inbox, list[str]]:
    """POST /inboxes {} once, and the statements it ran but for the key's and the domains'
    reads (cached with Redis: apikeys.keycache, the domain cache; read again on every request
    without it, in embedded mode), and whether each ran in autocommit mode."""

    def spy(execute, sql, params, many, context):  # type: ignore[no-untyped-def]
        if autocommit is not None:
            autocommit.append(connection.get_autocommit())
        return execute(sql, params, many, context)

    with CaptureQueriesContext(connection) as captured, connection.execute_wrapper(spy):
        response = api.call("POST", "inboxes", {})
    assert response.status_code == 200, response.content
    statements = [
        q["sql"]
        for q in captured.captured_queries
        if not q["sql"].upper().startswith(("SAVEPOINT", "RELEASE", "BEGIN", "COMMIT"))
    ]
    cached = ('SELECT "apikeys_apikey"', 'SELECT "inboxes_domain"')
    reads = [s for s in statements if s.startswith(cached)]
    assert not reads if settings.REDIS_URL else 1 <= len(reads) <= 3, reads
    return Inbox.objects.get(pk=response.json()["id"]), [s for s in statements if s not in reads]


def test_create_inbox_is_three_statements(workspace: Workspace, api: Api) -> None:
    """POST /inboxes {} in a transaction (as a caller's atomic block, or these tests' own, runs
    it): the inbox's INSERT, its inbox.created event's INSERT and the webhook endpoints' read
    (the fan-out hook), nothing else: the new inbox's event chain is empty, so its head is
    neither read nor locked (events.services.Change.first)."""
    api.call("POST", "inboxes", {})  # once first: the key's read and its last_used_at write
    created, statements = _create_statements(api)
    assert len(statements) == 3, statements
    assert statements[0].startswith('INSERT INTO "inboxes_inbox"')
    assert statements[1].startswith('INSERT INTO "webhooks_event"')
    assert "webhooks_endpoint" in statements[2]
    first = Event.objects.unscoped().get(inbox_id=created.pk)
    assert first.type == "inbox.created" and first.prev_id is None


def _hook(workspace: Workspace, events: list[str], *, enabled: bool = True) -> Endpoint:
    endpoint, _ = webhook_services.endpoint_create(
        workspace=workspace,
        url="https://hooks.example.net/in",
        events=events,
        inbox_ids=[],
        label_keys=[],
        enabled=enabled,
        by=Actor.system("tests"),
    )
    return endpoint


@pytest.mark.django_db(transaction=True)
def test_create_inbox_is_one_statement_outside_a_transaction(
    workspace: Workspace, api: Api
) -> None:
    """POST /inboxes {} as the web process serves it (no transaction open) in a workspace where
    no enabled endpoint wants inbox.created: the inbox and its event go in by one statement in
    autocommit mode (events.insert_with_event) — one round trip, where the transaction took
    five (BEGIN, two INSERTs, the endpoints' read, COMMIT). On SQLite (no INSERT in WITH) the
    transaction stays. The event is the one the transactional way records; nothing else is
    written."""
    _hook(workspace, ["email.received"])  # wants another type
    _hook(workspace, ["inbox.created"], enabled=False)
    api.call("POST", "inboxes", {})  # once first: the key's read and its last_used_at write
    autocommit: list[bool] = []
    created, statements = _create_statements(api, autocommit)
    if connection.vendor == "postgresql":
        assert len(statements) == 1, statements
        assert statements[0].startswith('WITH "a" AS (INSERT INTO "inboxes_inbox"')
        assert 'INSERT INTO "webhooks_event"' in statements[0]
        assert autocommit == [True]  # no transaction around it: it commits as it runs
    else:
        assert len(statements) == 3, statements
    first = Event.objects.unscoped().get(inbox_id=created.pk)
    assert first.type == "inbox.created" and first.prev_id is None
    assert first.workspace_id == workspace.pk
    assert first.data == {"inbox": inbox_services.inbox_record(created), "source": "api"}
    assert not Delivery.objects.filter(workspace_id=workspace.pk).exists()


@pytest.mark.django_db(transaction=True)
def test_create_inbox_for_an_endpoint_takes_the_transaction(workspace: Workspace, api: Api) -> None:
    """An enabled endpoint that wants inbox.created: the one statement writes nothing (its
    condition fails in the statement's snapshot) and the create runs in a transaction, where the
    delivery commits with the event."""
    endpoint = _hook(workspace, ["inbox.created"])
    api.call("POST", "inboxes", {})
    autocommit: list[bool] = []
    created, statements = _create_statements(api, autocommit)
    inserts = [s for s in statements if s.startswith(("INSERT", "WITH"))]
    if connection.vendor == "postgresql":
        assert inserts[0].startswith('WITH "a" AS'), statements  # tried, wrote nothing
        assert autocommit[0] is True and False in autocommit[1:]
    event = Event.objects.unscoped().get(inbox_id=created.pk)
    assert Inbox.objects.filter(workspace=workspace).count() == 2
    assert Event.objects.unscoped().filter(workspace_id=workspace.pk).count() == 2
    delivery = Delivery.objects.get(workspace_id=workspace.pk, event_id=event.pk)
    assert delivery.endpoint_id == endpoint.pk and delivery.event == "inbox.created"
    assert Delivery.objects.filter(workspace_id=workspace.pk).count() == 2


@pytest.mark.django_db(transaction=True)
def test_create_inbox_one_statement_taken_address(workspace: Workspace, api: Api) -> None:
    """A taken address through the one statement: 409 address_taken, nothing written."""
    assert api.call("POST", "inboxes", {"local_part": "same"}).status_code == 200
    before = (Inbox.objects.count(), Event.objects.unscoped().count())
    with CaptureQueriesContext(connection) as captured:
        response = api.call("POST", "inboxes", {"local_part": "same"})
    if connection.vendor == "postgresql":  # refused by the one statement itself
        inserts = [q["sql"] for q in captured.captured_queries if "INSERT" in q["sql"]]
        assert len(inserts) == 1 and inserts[0].startswith('WITH "a" AS'), inserts
    assert response.status_code == 409, response.content
    assert response.json()["error"]["code"] == "address_taken"
    assert (Inbox.objects.count(), Event.objects.unscoped().count()) == before


@pytest.mark.postgresql  # the one statement's subject: SQLite never takes it
@pytest.mark.django_db(transaction=True)
def test_create_inbox_in_a_transaction_managed_by_hand_takes_the_transaction(
    workspace: Workspace,
) -> None:
    """Autocommit turned off by the caller (no atomic block): the create is the caller's to
    commit or roll back, so it takes the transactional way, and a rollback leaves nothing."""
    transaction.set_autocommit(False)
    try:
        with CaptureQueriesContext(connection) as captured:
            created = inbox_services.inbox_create(workspace=workspace, local_part="by-hand")
        transaction.rollback()
    finally:
        transaction.set_autocommit(True)
    inserts = [q["sql"] for q in captured.captured_queries if "INSERT" in q["sql"]]
    assert inserts[0].startswith('INSERT INTO "inboxes_inbox"'), inserts
    assert not Inbox.objects.filter(pk=created.pk).exists()
    assert not Event.objects.unscoped().filter(inbox_id=created.pk).exists()


@pytest.mark.django_db(transaction=True)
def test_the_cap_on_inboxes_holds_outside_a_transaction(workspace: Workspace, api: Api) -> None:
    """A capped workspace's creates take the transaction (counted under the workspace's lock),
    also where a create would otherwise be one statement."""
    workspace.max_inboxes = 1
    workspace.save(update_fields=["max_inboxes"])
    assert api.call("POST", "inboxes", {}).status_code == 200
    assert error_of(api.call("POST", "inboxes", {})) == (429, "limit_reached")
    assert Inbox.objects.filter(workspace=workspace).count() == 1


@pytest.mark.django_db(transaction=True)
def test_another_workspaces_endpoint_leaves_a_create_one_statement(
    workspace: Workspace, other_workspace: Workspace, api: Api
) -> None:
    """An endpoint that wants inbox.created in another workspace: this workspace's create is
    still one statement (PostgreSQL), and the other workspace gets no delivery."""
    _hook(other_workspace, ["inbox.created"])
    api.call("POST", "inboxes", {})
    created, statements = _create_statements(api)
    if connection.vendor == "postgresql":
        assert len(statements) == 1 and statements[0].startswith('WITH "a" AS'), statements
    assert Event.objects.unscoped().filter(inbox_id=created.pk).count() == 1
    assert not Delivery.objects.filter(workspace_id=other_workspace.pk).exists()


@pytest.mark.django_db(transaction=True)
def test_a_create_for_a_deleted_workspace_is_not_an_address_taken(workspace: Workspace) -> None:
    """A foreign key's violation (the workspace deleted meanwhile) is raised as it is, not taken
    for a taken address and retried; nothing is written."""
    gone = Workspace.objects.get(pk=workspace.pk)
    Workspace.objects.filter(pk=workspace.pk).delete()
    with pytest.raises(IntegrityError):
        inbox_services.inbox_create(workspace=gone)
    assert not Inbox.objects.filter(workspace_id=gone.pk).exists()
    assert not Event.objects.unscoped().filter(workspace_id=gone.pk).exists()
