"""Matrix 1 of issue 11, tenancy (OWASP API1, broken object-level authorization).

Generated from the served OpenAPI document: every operation x both workspaces x every way of
naming the other workspace's object answers 404 ``not_found`` and leaves that workspace's rows
as they were; lists and searches show none of its items; references to its objects inside
request bodies are refused with nothing stored; a thousand events in one workspace reach none of
the other's waiters, streams or webhooks. And the tenant guard (``config.tenancy``) that keeps
application code from querying a workspace-owned model without a workspace filter.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import smtplib
import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import httpx
import pytest
from django.db import transaction
from django.db.models import Count, Q
from django.utils import timezone

from apikeys.models import Workspace
from config.api.pagination import encode_cursor, paginate
from config.tenancy import Tenancy, TenantManager, UnscopedTenantQuery
from events.models import Event
from inboxes import services as inbox_services
from inboxes.models import Inbox
from mail.models import Attachment, Email
from tests.live import ROOT, child_env, embedded
from tests.mail.messages import message
from tests.security.tenancy_live import StreamReader
from tests.security.tenancy_world import (
    COMMON_LABEL,
    Answer,
    Operation,
    Side,
    World,
    body_for,
    build_world,
    call,
    changes,
    document,
    key_client,
    operations,
    snapshot,
    snapshot_all,
    succeeded,
    tenant_models,
)
from tests.webhooks.receiver import Receiver
from webhooks.models import Delivery
from webhooks.services import WEBHOOK_EVENTS

NOT_FOUND = (404, "not_found")


@pytest.fixture
def unlimited(settings) -> None:  # type: ignore[no-untyped-def]
    settings.RATE_LIMIT_PER_MINUTE = 1_000_000


@contextlib.contextmanager
def rolled_back() -> Iterator[None]:
    """Whatever happens inside is undone (a savepoint rolled back)."""
    with transaction.atomic():
        yield
        transaction.set_rollback(True)


def owner_client(side: Side, op: Operation) -> Any:
    """The strongest credential of ``side`` for ``op``: its admin key, or its owner's dashboard
    session for the session-only decision endpoint."""
    if op.session_only:
        return side.sessions["owner"]
    return key_client(side.key)


def cells(op: Operation, attacker: Side, victim: Side) -> list[dict[str, str]]:
    """Path values naming at least one of the victim's objects, in every id form, each outer
    parameter either the attacker's own or the victim's (an attachment of B under A's email, A's
    under B's, B's under B's)."""
    if not op.params:
        return [{}]  # nothing to name: the attacker's own call must not touch the victim
    options = [
        [(attacker.ids[p], False)] + [(form, True) for form in victim.id_forms(p)]
        for p in op.params
    ]
    return [
        dict(zip(op.params, (value for value, _ in combo), strict=True))
        for combo in itertools.product(*options)
        if any(foreign for _, foreign in combo)
    ]


def _in_process() -> list[Operation]:
    return [op for op in operations() if not op.channels]


def _streaming() -> list[Operation]:
    return [op for op in operations() if op.channels]


# --- the tenant guard ---------------------------------------------------------------------------


@pytest.fixture
def two_inboxes(db: None) -> tuple[Inbox, Inbox]:
    a = Workspace.objects.create(name="a")
    b = Workspace.objects.create(name="b")
    return (
        inbox_services.inbox_create(workspace=a, local_part="guard-a"),
        inbox_services.inbox_create(workspace=b, local_part="guard-b"),
    )


def test_guard_raises_on_unscoped_queries_from_application_code(
    two_inboxes: tuple[Inbox, Inbox],
) -> None:
    inbox, other = two_inboxes
    # paginate() is application code that evaluates whatever queryset it is handed.
    for unscoped in (
        Inbox.objects.all(),
        Inbox.objects.filter(pk=other.pk),  # a bare id is exactly the BOLA bug
        Inbox.objects.filter(address=other.address),
        Inbox.objects.exclude(workspace=inbox.workspace),
        Inbox.objects.filter(Q(workspace=inbox.workspace) | Q(pk=other.pk)),
        Email.objects.filter(inbox_id=other.pk),  # an id of the parent is no scope either
        Attachment.objects.filter(email_id="eml_x"),
    ):
        with pytest.raises(UnscopedTenantQuery, match=r"config/api/pagination\.py"):
            paginate(unscoped, limit=10, cursor=None)
    # Every other way of running a query is guarded too; the probe's code is compiled as if it
    # were application code (the guard exempts callers under tests/).
    probe = {"Inbox": Inbox, "ws": inbox.workspace}
    for statement in (
        "Inbox.objects.count()",
        "Inbox.objects.exists()",
        "Inbox.objects.get(address='guard-b@pigeonhole.test')",
        "Inbox.objects.first()",
        "Inbox.objects.aggregate(n=Count('pk'))",
        "list(Inbox.objects.iterator())",
        "Inbox.objects.in_bulk()",
        "Inbox.objects.update(name='x')",
        "Inbox.objects.filter(name='').delete()",
        "Inbox.objects.get_or_create(address='guard-b@pigeonhole.test')",
    ):
        with pytest.raises(UnscopedTenantQuery, match=r"probe\.py"):
            _run_as_application_code(statement, probe)
    _run_as_application_code("Inbox.objects.filter(workspace=ws).update(name='x')", probe)
    assert Inbox.objects.get(pk=inbox.pk).name == "x" and Inbox.objects.get(pk=other.pk).name == ""


def _run_as_application_code(statement: str, namespace: dict[str, Any]) -> None:
    from django.db.models import Count

    code = compile(statement, str(ROOT / "config" / "probe.py"), "exec")
    exec(code, {**namespace, "Count": Count})


def test_guard_lets_scoped_and_declared_queries_through(
    two_inboxes: tuple[Inbox, Inbox], settings
) -> None:  # type: ignore[no-untyped-def]
    inbox, other = two_inboxes
    workspace = inbox.workspace
    for scoped, expected in (
        (Inbox.objects.filter(workspace=workspace), [inbox]),
        (Inbox.objects.filter(workspace_id=workspace.pk, pk=other.pk), []),
        (Inbox.objects.filter(Q(workspace=workspace), Q(name="") | Q(name="x")), [inbox]),
        (Email.objects.filter(inbox=inbox), []),  # a parent instance scopes
        (Email.objects.filter(inbox__in=Inbox.objects.filter(workspace=workspace)), []),
        (Attachment.objects.filter(email__workspace=workspace), []),
        (Inbox.objects.unscoped(), [other, inbox]),  # said out loud
    ):
        rows, _ = paginate(scoped, limit=10, cursor=None)
        assert list(rows) == expected
    assert list(paginate(inbox.emails.all(), limit=10, cursor=None)[0]) == []  # related manager
    settings.TENANT_GUARD = False
    assert len(paginate(Inbox.objects.all(), limit=10, cursor=None)[0]) == 2


def test_test_code_may_read_across_workspaces(two_inboxes: tuple[Inbox, Inbox]) -> None:
    # Test code inspects the database freely; the operator's Django admin is exempt too
    # (tests/security/test_mass_assignment.py browses it in a live, guarded web process).
    assert Inbox.objects.count() == 2


def test_every_workspace_owned_model_is_guarded() -> None:
    """A model that reaches a workspace (directly or through its parents) has the guarded
    manager and a tenancy whose paths are real relations ending at the workspace."""
    from django.apps import apps

    guarded = set(tenant_models())
    project = [
        m
        for m in apps.get_models()
        if m.__module__.split(".")[0]
        in {"events", "apikeys", "inboxes", "mail", "labels", "outbox", "webhooks"}
    ]
    assert {m.__name__ for m in project if m not in guarded} == {"Workspace"}
    for model in guarded:
        tenancy: Tenancy = model.tenancy
        assert isinstance(model._default_manager, TenantManager)
        for path in tenancy.paths:
            # The lookup works (raises FieldError otherwise) and ends at a workspace id.
            model._base_manager.filter(**{f"{path}_id": "ws_x"}).query.sql_with_params()
        for parent in tenancy.parents:
            assert model._meta.get_field(parent).is_relation, (model, parent)


def test_processes_started_by_tests_run_with_the_guard() -> None:
    assert child_env("x")["TENANT_GUARD"] == "true"


# --- every operation x every id form ------------------------------------------------------------


@pytest.fixture
def world(db: None, unlimited: None) -> World:
    return build_world()


def _check_cell(
    op: Operation,
    attacker: Side,
    victim: Side,
    values: dict[str, str],
    mismatches: list[str],
    send: Callable[[], Answer],
) -> None:
    before = snapshot(victim.workspace.pk)
    answer = send()
    after = snapshot(victim.workspace.pk)
    where = f"{op} {values} ({attacker.marker} -> {victim.marker})"
    if op.params and answer.error != NOT_FOUND:
        mismatches.append(f"{where}: {answer.status} {answer.text[:200]}")
    if not op.params and not succeeded(answer):
        mismatches.append(f"{where}: {answer.status} {answer.text[:200]}")
    if before != after:
        mismatches.append(f"{where}: the victim's rows changed")
    if leaked := victim.leaks_in(answer.text):
        mismatches.append(f"{where}: the answer shows {leaked}")


def test_bola_matrix(world: World, figure) -> None:  # type: ignore[no-untyped-def]
    """Every in-process operation x both workspaces x every id form (wait and stream, served by
    Channels, are in test_bola_matrix_streaming)."""
    mismatches: list[str] = []
    total = controls = 0
    for op in _in_process():
        for attacker, victim in world.pairs():
            with rolled_back():
                for values in cells(op, attacker, victim):
                    total += 1
                    _check_cell(
                        op,
                        attacker,
                        victim,
                        values,
                        mismatches,
                        lambda op=op, values=values, a=attacker: call(
                            op, values, client=owner_client(a, op), body=body_for(op)
                        ),
                    )
            with rolled_back():  # the owner's own request succeeds: the cells could fail
                controls += 1
                own = call(op, victim.ids, client=owner_client(victim, op), body=body_for(op))
                if not succeeded(own):
                    mismatches.append(f"{op} control ({victim.marker}): {own.status} {own.text}")
    figure(
        f"tenancy (BOLA), in-process: {len(_in_process())} operations, {total} cells, "
        f"{controls} positive controls, {len(mismatches)} mismatches"
    )
    assert mismatches == []
    assert total >= 2 * len(_in_process())


# --- lists and searches -------------------------------------------------------------------------


def _query_values(op: Operation, victim: Side) -> list[dict[str, Any]]:
    """The plain query, and each string query parameter set to each of the victim's names."""
    names = [
        victim.marker,
        victim.ids["inbox_id"],
        victim.inbox_address,
        victim.label_key,
        victim.ids["email_id"],
        victim.domain,
    ]
    variants: list[dict[str, Any]] = [{}]
    for param, schema in op.query.items():
        if param == "cursor":
            variants += [{"cursor": encode_cursor(victim.ids[p])} for p in victim.ids]
        elif schema.get("type") == "string" and "format" not in schema and "enum" not in schema:
            variants += [{param: name} for name in names]
    return variants


def test_lists_and_searches_show_nothing_foreign(world: World, figure) -> None:  # type: ignore[no-untyped-def]
    """Every GET of the document, with the attacker's own ids and every string query parameter
    set to each of the victim's names, shows none of the victim's ids, addresses or markers."""
    mismatches: list[str] = []
    total = 0
    for op in [op for op in _in_process() if op.method == "GET"]:
        for attacker, victim in world.pairs():
            for query in _query_values(op, victim):
                total += 1
                answer = call(op, attacker.ids, client=key_client(attacker.key), query=query)
                if answer.status >= 500:
                    mismatches.append(f"{op} {query}: {answer.status}")
                if leaked := victim.leaks_in(answer.text):
                    mismatches.append(f"{op} {query} by {attacker.marker}: shows {leaked}")
            own = call(op, victim.ids, client=key_client(victim.key))
            if not succeeded(own):
                mismatches.append(f"{op} control: {own.status}")
            elif "data" in own.text[:20] and not victim.leaks_in(own.text):
                # A list of the victim's own shows its items: the search above could fail.
                mismatches.append(f"{op} control: the owner's list is empty")
    for attacker, victim in world.pairs():  # a search that finds the owner's items finds none
        for template in ("emails", "inboxes/{}/emails", "inboxes"):
            total += 1
            mine = key_client(victim.key).get(
                "/api/v1/" + template.format(victim.ids["inbox_id"]), {"q": victim.marker}
            )
            theirs = key_client(attacker.key).get(
                "/api/v1/" + template.format(attacker.ids["inbox_id"]), {"q": victim.marker}
            )
            found, leaked = len(mine.json()["data"]), len(theirs.json()["data"])
            if not found or leaked:
                mismatches.append(f"q={victim.marker} on {template}: {found} own, {leaked} foreign")
    figure(f"tenancy, lists and searches: {total} requests, {len(mismatches)} mismatches")
    assert mismatches == []


# --- references inside bodies ---------------------------------------------------------------------

# Body properties that name another object, and which of a side's objects (in every form).
REFERENCES: dict[str, Callable[[Side], list[Any]]] = {
    "inbox_ids": lambda s: [[s.ids["inbox_id"]], [s.inbox_address]],
    "label_keys": lambda s: [[s.label_key]],
    "labels": lambda s: [[s.label_key]],
    "remove_labels": lambda s: [[s.label_key]],
    "email_id": lambda s: [s.ids["email_id"]],
    "in_reply_to": lambda s: [s.ids["email_id"]],
    "domain": lambda s: [s.domain],
}
REFUSALS = {
    (400, "validation_error"),
    (400, "unknown_label"),
    (400, "invalid_domain"),
    (404, "not_found"),
}


def _reference_properties(op: Operation) -> list[str]:
    props = (op.body_schema or {}).get("properties", {})
    return [name for name in props if name in REFERENCES]


def test_every_reference_property_is_known() -> None:
    """A body property that looks like a reference to another object is in REFERENCES, so a
    new one is tested (or this fails)."""
    unknown = [
        f"{op} {name}"
        for op in operations()
        for name in (op.body_schema or {}).get("properties", {})
        if name.endswith(("_id", "_ids", "_key", "_keys")) and name not in REFERENCES
    ]
    assert unknown == []


def test_foreign_references_in_bodies_are_refused(world: World, figure) -> None:  # type: ignore[no-untyped-def]
    mismatches: list[str] = []
    total = 0
    skip = {"apikeys.ApiKey": ["last_used_at"]}
    for op in _in_process():
        for name in _reference_properties(op):
            for attacker, victim in world.pairs():
                client = owner_client(attacker, op)
                for value in REFERENCES[name](victim):
                    total += 1
                    with rolled_back():
                        before = snapshot_all(skip=skip)
                        body = {**(body_for(op) or {}), name: value}
                        answer = call(op, attacker.ids, client=client, body=body)
                        changed = changes(before, snapshot_all(skip=skip))
                    if answer.error not in REFUSALS or changed:
                        mismatches.append(f"{op} {name}={value}: {answer.status} {changed}")
                with rolled_back():  # the same with one's own object is accepted
                    own = REFERENCES[name](attacker)[0]
                    answer = call(
                        op, attacker.ids, client=client, body={**(body_for(op) or {}), name: own}
                    )
                    if not succeeded(answer):
                        mismatches.append(f"{op} {name} control: {answer.status} {answer.text}")
    figure(f"tenancy, foreign references in bodies: {total} cells, {len(mismatches)} mismatches")
    assert mismatches == []
    assert total >= 14


def test_same_label_key_in_both_workspaces(world: World) -> None:
    """Both workspaces have a label ``common``: each one's requests reach only its own."""
    alpha, bravo = world.alpha, world.bravo
    before = snapshot(bravo.workspace.pk)
    client = key_client(alpha.key)
    assert (
        client.patch(f"/api/v1/labels/{COMMON_LABEL}", {"name": "mine"}, format="json").status_code
        == 200
    )
    email = alpha.ids["email_id"]
    patched = client.patch(f"/api/v1/emails/{email}", {"labels": [COMMON_LABEL]}, format="json")
    assert patched.status_code == 200
    assert client.delete(f"/api/v1/labels/{COMMON_LABEL}").status_code == 200
    assert snapshot(bravo.workspace.pk) == before
    assert key_client(bravo.key).get("/api/v1/labels").json()["data"]


# --- wait and stream, through a live web process --------------------------------------------------


def _settle_deliveries(limit: float = 60) -> None:
    """Waits until no webhook delivery is pending or retrying (embedded mode: the one process
    attempts them in the background, which would change the victim's rows during a cell)."""
    from webhooks.models import Delivery, DeliveryStatus

    open_ = [DeliveryStatus.PENDING, DeliveryStatus.RETRYING]
    deadline = time.monotonic() + limit
    while Delivery.objects.filter(status__in=open_).exists():
        assert time.monotonic() < deadline, "webhook deliveries still moving after 60 s"
        time.sleep(0.2)


def test_bola_matrix_streaming(live_stack, transactional_db: None, unlimited: None, figure) -> None:  # type: ignore[no-untyped-def]
    """The operations Channels serves (wait, stream) x both workspaces x every id form, over
    HTTP to a live web process."""
    world = build_world()
    if embedded():  # serve's own sweeper works on the world's webhooks: let it finish first
        _settle_deliveries()
    mismatches: list[str] = []
    total = 0
    for op in _streaming():
        for attacker, victim in world.pairs():
            for values in cells(op, attacker, victim):
                total += 1
                _check_cell(
                    op,
                    attacker,
                    victim,
                    values,
                    mismatches,
                    lambda op=op, values=values, a=attacker: call(
                        op,
                        values,
                        live=live_stack.base_url,
                        live_headers={"Authorization": f"Bearer {a.key}"},
                    ),
                )
            own = call(
                op,
                victim.ids,
                live=live_stack.base_url,
                live_headers={"Authorization": f"Bearer {victim.key}"},
            )
            if not succeeded(own):
                mismatches.append(f"{op} control ({victim.marker}): {own.status} {own.text}")
    figure(
        f"tenancy (BOLA), Channels-served: {len(_streaming())} operations, {total} cells, "
        f"{len(mismatches)} mismatches"
    )
    assert mismatches == []
    # Each inbox path x its three id forms; GET /emails/wait (no path id) once per workspace.
    assert total == sum(3 if op.params else 1 for op in _streaming()) * 2


# --- a thousand events in one workspace, none anywhere in the other -------------------------------

EVENTS = int(os.environ.get("SECURITY_EVENTS", "1000"))  # make fuzz: 10,000
STREAM_EVENTS = (
    "email.received",
    "email.labeled",
    "email.updated",
    "email.deleted",
    "mail.rejected",
)


class Waiter(threading.Thread):
    """Parks on ``wait`` again and again (120 s is its longest timeout) until stopped; every
    answer other than 204 is kept."""

    def __init__(self, base_url: str, key: str, inbox_id: str) -> None:
        super().__init__(daemon=True)
        self.client = httpx.Client(
            base_url=base_url + "/api/v1",
            headers={"Authorization": f"Bearer {key}"},
            timeout=httpx.Timeout(150, connect=5),
        )
        self.inbox_id = inbox_id
        self.answers: list[tuple[int, str]] = []
        self.parked = 0
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.is_set():
            self.parked += 1
            try:
                response = self.client.get(f"inboxes/{self.inbox_id}/wait", params={"timeout": 120})
            except httpx.HTTPError:
                return
            if response.status_code != 204:
                self.answers.append((response.status_code, response.text))
                return


def _send_mail(port: int, to: str, messages: list[bytes], mail_from: str) -> int:
    """Sends each message in its own transaction over one SMTP connection; returns how many
    were accepted."""
    accepted = 0
    with smtplib.SMTP("127.0.0.1", port, timeout=60) as smtp:
        for raw in messages:
            try:
                smtp.sendmail(mail_from, [to], raw)
                accepted += 1
            except smtplib.SMTPRecipientsRefused:
                pass
            except smtplib.SMTPDataError:
                pass
    return accepted


def _until(condition: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.2)
    return condition()


def test_foreign_events_reach_no_waiter_stream_or_webhook(
    live_stack, transactional_db: None, receiver: Receiver, figure
) -> None:  # type: ignore[no-untyped-def]
    """With A's waiter parked, A's stream open and A's webhook endpoint listening to every event
    type, B's workspace has at least EVENTS events (mail over SMTP, refused mail, changes through
    the API): A receives 0 of them, while B's own stream and webhook receive all of theirs; then
    one mail to A reaches A's three listeners, so they were listening."""
    world = build_world()
    alpha, bravo = world.alpha, world.bravo
    base = live_stack.base_url
    # B's expired inbox: each RCPT to it is refused at once with a mail.rejected event.
    expired = inbox_services.inbox_create(
        workspace=bravo.workspace, local_part=f"{bravo.marker}-gone", ttl_minutes=1
    )
    Inbox.objects.filter(pk=expired.pk).update(
        expires_at=timezone.now() - timedelta(minutes=1), expiry_notified_at=timezone.now()
    )
    hooks: dict[str, str] = {}
    for side in (alpha, bravo):
        with httpx.Client(
            base_url=base + "/api/v1", headers={"Authorization": f"Bearer {side.key}"}
        ) as http:
            created = http.post(
                "webhooks",
                json={
                    "url": f"http://127.0.0.1:{receiver.port}/{side.marker}",
                    "events": list(WEBHOOK_EVENTS),
                },
            )
            assert created.status_code == 200, created.text
            hooks[side.marker] = created.json()["id"]
    waiter = Waiter(base, alpha.key, alpha.ids["inbox_id"])
    alpha_stream = StreamReader(base, f"/api/v1/inboxes/{alpha.ids['inbox_id']}/stream", alpha.key)
    bravo_stream = StreamReader(base, f"/api/v1/inboxes/{bravo.ids['inbox_id']}/stream", bravo.key)
    for listener in (waiter, alpha_stream, bravo_stream):
        listener.start()
    try:
        assert alpha_stream.connected.wait(10) and bravo_stream.connected.wait(10)
        assert alpha_stream.status == bravo_stream.status == 200
        first_event = Event.objects.order_by("-id").values_list("id", flat=True).first() or 0

        # B's events, of every kind: mail over SMTP (email.received and, by B's rule label,
        # email.labeled), refusals at RCPT (mail.rejected), and changes through the API
        # (email.updated twice per email, email.deleted, inbox.created).
        mails, refused = EVENTS * 3 // 20, EVENTS // 4
        updates, deletes, creates = 2 * mails, EVENTS // 10, EVENTS // 20
        started = time.monotonic()
        messages = [
            message(
                to=bravo.inbox_address,
                sender=f"shop{i}@sender.example",
                subject=f"{bravo.marker} code {100000 + i}",
                text=f"Your code is {100000 + i}.",
            )
            for i in range(mails)
        ]
        accepted = _send_mail(
            live_stack.smtp_port, bravo.inbox_address, messages, "shop@sender.example"
        )
        assert accepted == mails
        with smtplib.SMTP("127.0.0.1", live_stack.smtp_port, timeout=60) as smtp:
            smtp.ehlo()
            for _ in range(refused):
                assert smtp.mail("someone@sender.example")[0] == 250
                code, _reply = smtp.rcpt(expired.address)
                assert code == 550
                smtp.rset()
        with httpx.Client(
            base_url=base + "/api/v1", headers={"Authorization": f"Bearer {bravo.key}"}
        ) as http:
            listed: list[str] = []
            cursor = None
            while cursor or not listed:
                page = http.get(
                    f"inboxes/{bravo.ids['inbox_id']}/emails",
                    params={"limit": 100, **({"cursor": cursor} if cursor else {})},
                ).json()
                listed += [e["id"] for e in page["data"]]
                cursor = page["next_cursor"]
            assert len(listed) >= mails
            for i in range(updates):  # starred on, then off again: each PATCH is a change
                email_id = listed[i % mails]
                answer = http.patch(f"emails/{email_id}", json={"starred": i < mails})
                assert answer.status_code == 200, answer.text
            for email_id in listed[:deletes]:
                assert http.delete(f"emails/{email_id}").status_code == 200
            for i in range(creates):
                answer = http.post("inboxes", json={"name": f"{bravo.marker} extra {i}"})
                assert answer.status_code == 200, answer.text
        generated = time.monotonic() - started
        produced = Event.objects.filter(workspace_id=bravo.workspace.pk, id__gt=first_event)
        bravo_events = produced.count()
        assert bravo_events >= EVENTS, bravo_events
        kinds = dict(
            produced.values_list("type")
            .annotate(n=Count("pk"))
            .order_by("type")
            .values_list("type", "n")
        )

        # B's own listeners get everything that is theirs (so A's could have).
        to_stream = produced.filter(inbox_id=bravo.ids["inbox_id"], type__in=STREAM_EVENTS).count()
        to_hooks = produced.filter(type__in=WEBHOOK_EVENTS).count()
        assert _until(lambda: bravo_stream.count() >= to_stream, 60), (
            bravo_stream.count(),
            to_stream,
        )
        assert _until(
            lambda: sum(r.path == f"/{bravo.marker}" for r in receiver.requests) >= to_hooks, 120
        ), (len(receiver.requests), to_hooks)
        time.sleep(1)  # anything misrouted to A would have arrived with B's own by now

        # A got nothing: no delivery was even created for its endpoint.
        assert not Delivery.objects.filter(endpoint_id=hooks[alpha.marker]).exists()
        alpha_hooks = [r for r in receiver.requests if r.path == f"/{alpha.marker}"]
        assert waiter.is_alive() and waiter.answers == []
        assert alpha_stream.frames == []
        assert alpha_hooks == []

        # One mail to A reaches A's three listeners (email.received, and email.labeled: the
        # subject matches A's rule label).
        _send_mail(
            live_stack.smtp_port,
            alpha.inbox_address,
            [message(to=alpha.inbox_address, subject=f"{alpha.marker} code 777111")],
            "shop@sender.example",
        )
        waiter.join(15)
        assert [status for status, _ in waiter.answers] == [200]
        assert json.loads(waiter.answers[0][1])["subject"] == f"{alpha.marker} code 777111"
        assert _until(lambda: alpha_stream.count() >= 2, 15)
        assert _until(lambda: sum(r.path == f"/{alpha.marker}" for r in receiver.requests) >= 2, 30)
        time.sleep(0.5)
        alpha_hooks = [r for r in receiver.requests if r.path == f"/{alpha.marker}"]
        seen_by_alpha = [
            *(text for _, text in waiter.answers),
            *alpha_stream.raw,
            *(r.body.decode() for r in alpha_hooks),
        ]
        assert [bravo.leaks_in(text) for text in seen_by_alpha if bravo.leaks_in(text)] == []
        assert {f["event"] for f in alpha_stream.frames} == {"email.received", "email.labeled"}
        assert {r.headers["Service-Event"] for r in alpha_hooks} == {
            "email.received",
            "email.labeled",
        }
        assert all(f["data"]["inboxId"] == alpha.ids["inbox_id"] for f in alpha_stream.frames)
    finally:
        waiter.stopped.set()
        alpha_stream.stop()
        bravo_stream.stop()
    figure(
        f"tenancy, foreign events: {bravo_events} events in B ({kinds}; from {accepted} SMTP "
        f"mails, {refused} refused recipients and {updates + deletes + creates} API calls, "
        f"generated in {generated:.1f} s); B's stream {bravo_stream.count()} frames, B's webhook "
        f"{sum(r.path == f'/{bravo.marker}' for r in receiver.requests)} requests; A's waiter, "
        f"stream and webhook received 0, 0 and 0 of them"
    )


def test_matrix_covers_every_documented_operation() -> None:
    documented = {
        (method.upper(), path)
        for path, item in document()["paths"].items()
        for method in item
        if method in {"get", "post", "put", "patch", "delete"}
    }
    covered = {(op.method, op.path) for op in _in_process() + _streaming()}
    assert covered == documented
    assert {str(op) for op in _streaming()} == {
        "GET /inboxes/{inbox_id}/wait",
        "GET /inboxes/{inbox_id}/stream",
        "GET /emails/wait",
    }
