"""The audit log (issue 30, point 5): every change a person or key makes leaves exactly one entry
with the right actor, target and client address, through the surfaces people use (the API with
a key, the dashboard with a session, sign-in and invitation pages); no entry holds a secret the
test created; ``GET /audit`` is admin-only, paged, filtered and tenant-scoped; the retention
sweep deletes what is older than a workspace's ``audit_retention_days`` and nothing else.

Each action is a generator: it prepares what the action needs (which may leave entries of its
own), yields, then performs the one action and returns what its entry must say. The driver
counts the entries the action alone added.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta

import pytest
import time_machine
from django.test import Client
from django.utils import timezone

from apikeys import audit
from apikeys import services as key_services
from apikeys.audit import Actor
from apikeys.models import ApiKey, AuditEntry, Membership, Role, Workspace
from inboxes import services as inbox_services
from mail import pipeline
from outbox.models import OutboxItem, Status
from tests.conftest import ALL, TEST_ACTOR, Api, error_of
from tests.factories import WorkspaceFactory
from tests.mail.messages import message

pytestmark = pytest.mark.django_db

PASSWORD = "owner-pass-Quokka-71"
API_IP = "203.0.113.5"  # the key's client
WEB_IP = "198.51.100.7"  # the owner's browser
STRANGER_IP = "192.0.2.44"  # sign-in attempts, the invitee
HOOK_URL = "https://hooks.example.com/services/T0AUDIT/B0AUDIT/hookpathtoken9876"


@dataclass
class World:
    workspace: Workspace
    owner: object
    key: ApiKey
    api: Api
    web: Client
    secrets: list[str] = field(default_factory=list)

    @property
    def key_actor(self) -> tuple[str, str, str]:
        return ("key", self.key.pk, self.key.name)

    @property
    def owner_actor(self) -> tuple[str, str, str]:
        return ("user", str(self.owner.pk), self.owner.get_username())  # type: ignore[attr-defined]


@dataclass(frozen=True)
class Expected:
    action: str
    actor: tuple[str, str, str]
    target: tuple[str, str, str]
    ip: str | None


@pytest.fixture(autouse=True)
def _public_targets_only(settings) -> None:  # type: ignore[no-untyped-def]
    settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = False
    settings.INVITATION_MAIL = False


@pytest.fixture
def world(db: None) -> World:
    workspace = WorkspaceFactory(name="Audited Co")
    owner = key_services.user_get_or_create(email="owner@audit.test", password=PASSWORD)
    key_services.membership_set(workspace=workspace, user=owner, role=Role.OWNER, by=TEST_ACTOR)
    created = key_services.api_key_create(
        workspace=workspace, name="ci admin", scopes=ALL, by=TEST_ACTOR
    )
    web = Client(REMOTE_ADDR=WEB_IP)
    web.force_login(owner)
    return World(
        workspace=workspace,
        owner=owner,
        key=created.key,
        api=Api(created.plain, REMOTE_ADDR=API_IP),
        web=web,
        secrets=[PASSWORD, created.plain],
    )


Action = Callable[[World], Generator[None, None, Expected]]


# --- keys ------------------------------------------------------------------------------------


def key_created(w: World) -> Generator[None, None, Expected]:
    yield
    body = w.api.call("POST", "keys", {"name": "deploy bot", "scopes": ["read"]}).json()
    w.secrets.append(body["key"])
    return Expected("key.created", w.key_actor, ("key", body["id"], "deploy bot"), API_IP)


def key_updated(w: World) -> Generator[None, None, Expected]:
    other = key_services.api_key_create(workspace=w.workspace, name="ci job", by=TEST_ACTOR)
    w.secrets.append(other.plain)
    yield
    response = w.api.call("PATCH", f"keys/{other.key.pk}", {"require_approval": True})
    assert response.status_code == 200
    return Expected("key.updated", w.key_actor, ("key", other.key.pk, "ci job"), API_IP)


def key_revoked(w: World) -> Generator[None, None, Expected]:
    other = key_services.api_key_create(workspace=w.workspace, name="old key", by=TEST_ACTOR)
    w.secrets.append(other.plain)
    yield
    assert w.api.call("DELETE", f"keys/{other.key.pk}").status_code == 200
    return Expected("key.revoked", w.key_actor, ("key", other.key.pk, "old key"), API_IP)


def key_created_on_dashboard(w: World) -> Generator[None, None, Expected]:
    yield
    response = w.web.post("/keys/new/", {"name": "laptop", "kind": "personal", "scopes": ["read"]})
    assert response.status_code == 302
    plain = w.web.session["apikeys.created_key"]["plain"]
    w.secrets.append(plain)
    key = ApiKey.objects.get(workspace=w.workspace, name="laptop")
    return Expected("key.created", w.owner_actor, ("key", key.pk, "laptop"), WEB_IP)


# --- people ----------------------------------------------------------------------------------


def _invite(w: World, email: str) -> str:
    response = w.web.post("/members/add/", {"email": email, "role": "member"})
    assert response.status_code == 302
    link = w.web.session["apikeys.created_invitation"]["link"]
    token = link.rstrip("/").rsplit("/", 1)[1]
    w.secrets.append(token)
    return token


def invitation_created(w: World) -> Generator[None, None, Expected]:
    yield
    _invite(w, "new@audit.test")
    invitation = w.workspace.invitations.get(email="new@audit.test")
    return Expected(
        "invitation.created",
        w.owner_actor,
        ("invitation", str(invitation.pk), "new@audit.test"),
        WEB_IP,
    )


def invitation_revoked(w: World) -> Generator[None, None, Expected]:
    _invite(w, "maybe@audit.test")
    invitation = w.workspace.invitations.get(email="maybe@audit.test")
    yield
    assert w.web.post(f"/members/invitations/{invitation.pk}/revoke/").status_code == 302
    return Expected(
        "invitation.revoked",
        w.owner_actor,
        ("invitation", str(invitation.pk), "maybe@audit.test"),
        WEB_IP,
    )


def member_added(w: World) -> Generator[None, None, Expected]:
    token = _invite(w, "joiner@audit.test")
    chosen = "joiner-pass-Wombat-52"
    w.secrets.append(chosen)
    yield
    response = Client(REMOTE_ADDR=STRANGER_IP).post(
        f"/invite/{token}/", {"password": chosen, "password_again": chosen}
    )
    assert response.status_code == 302
    membership = Membership.objects.get(workspace=w.workspace, user__username="joiner@audit.test")
    user = membership.user
    return Expected(
        "member.added",
        ("user", str(user.pk), "joiner@audit.test"),
        ("member", str(membership.pk), "joiner@audit.test"),
        STRANGER_IP,
    )


def _colleague(w: World, email: str) -> Membership:
    user = key_services.user_get_or_create(email=email, password="colleague-Pass-88")
    w.secrets.append("colleague-Pass-88")
    return key_services.membership_set(
        workspace=w.workspace, user=user, role=Role.MEMBER, by=TEST_ACTOR
    )


def member_role_changed(w: World) -> Generator[None, None, Expected]:
    member = _colleague(w, "promoted@audit.test")
    yield
    assert w.web.post(f"/members/{member.pk}/role/", {"role": "admin"}).status_code == 302
    return Expected(
        "member.role_changed",
        w.owner_actor,
        ("member", str(member.pk), "promoted@audit.test"),
        WEB_IP,
    )


def member_removed(w: World) -> Generator[None, None, Expected]:
    member = _colleague(w, "leaver@audit.test")
    yield
    assert w.web.post(f"/members/{member.pk}/remove/").status_code == 302
    assert not Membership.objects.filter(workspace=w.workspace, pk=member.pk).exists()
    return Expected(
        "member.removed", w.owner_actor, ("member", str(member.pk), "leaver@audit.test"), WEB_IP
    )


# --- workspace, domains, labels, webhooks, inboxes --------------------------------------------------


def workspace_updated(w: World) -> Generator[None, None, Expected]:
    yield
    response = w.web.post(
        "/settings/save/",
        {
            "name": "Audited Company",
            "classifier_enabled": "on",
            "allow_permanent_inboxes": "on",
            "audit_retention_days": "30",
        },
    )
    assert response.status_code == 302
    return Expected(
        "workspace.updated",
        w.owner_actor,
        ("workspace", w.workspace.pk, "Audited Company"),
        WEB_IP,
    )


def domain_added(w: World) -> Generator[None, None, Expected]:
    yield
    response = w.web.post("/domains/add/", {"domain": "mail.audit-test.example"})
    assert response.status_code == 302
    domain = w.workspace.domains.get(domain="mail.audit-test.example")
    return Expected(
        "domain.added", w.owner_actor, ("domain", domain.pk, "mail.audit-test.example"), WEB_IP
    )


def domain_updated(w: World) -> Generator[None, None, Expected]:
    domain = inbox_services.domain_add(
        workspace=w.workspace, domain="catch.audit-test.example", by=TEST_ACTOR
    )
    yield
    response = w.web.post("/domains/catch.audit-test.example/catch-all/", {"catch_all": "on"})
    assert response.status_code == 302
    return Expected(
        "domain.updated", w.owner_actor, ("domain", domain.pk, "catch.audit-test.example"), WEB_IP
    )


def domain_removed(w: World) -> Generator[None, None, Expected]:
    domain = inbox_services.domain_add(
        workspace=w.workspace, domain="gone.audit-test.example", by=TEST_ACTOR
    )
    yield
    assert w.web.post("/domains/gone.audit-test.example/remove/").status_code == 302
    return Expected(
        "domain.removed", w.owner_actor, ("domain", domain.pk, "gone.audit-test.example"), WEB_IP
    )


def label_created(w: World) -> Generator[None, None, Expected]:
    yield
    body = w.api.call("POST", "labels", {"key": "invoices", "name": "Invoices"}).json()
    return Expected("label.created", w.key_actor, ("label", body["id"], "invoices"), API_IP)


def label_updated(w: World) -> Generator[None, None, Expected]:
    label = w.api.call("POST", "labels", {"key": "bills", "name": "Bills"}).json()
    yield
    assert w.api.call("PATCH", "labels/bills", {"name": "Bills due"}).status_code == 200
    return Expected("label.updated", w.key_actor, ("label", label["id"], "bills"), API_IP)


def label_deleted(w: World) -> Generator[None, None, Expected]:
    label = w.api.call("POST", "labels", {"key": "spam", "name": "Spam"}).json()
    yield
    assert w.api.call("DELETE", "labels/spam").status_code == 200
    return Expected("label.deleted", w.key_actor, ("label", label["id"], "spam"), API_IP)


def _hook(w: World) -> dict:
    body = w.api.call("POST", "webhooks", {"url": HOOK_URL, "events": ["email.received"]}).json()
    w.secrets.append(body["secret"])
    return body


HOOK_NAME = "https://hooks.example.com"  # the origin: the path of such a URL is its credential


def webhook_created(w: World) -> Generator[None, None, Expected]:
    yield
    body = _hook(w)
    return Expected("webhook.created", w.key_actor, ("webhook", body["id"], HOOK_NAME), API_IP)


def webhook_updated(w: World) -> Generator[None, None, Expected]:
    body = _hook(w)
    yield
    response = w.api.call("PATCH", f"webhooks/{body['id']}", {"enabled": False})
    assert response.status_code == 200
    return Expected("webhook.updated", w.key_actor, ("webhook", body["id"], HOOK_NAME), API_IP)


def webhook_deleted(w: World) -> Generator[None, None, Expected]:
    body = _hook(w)
    yield
    assert w.api.call("DELETE", f"webhooks/{body['id']}").status_code == 200
    return Expected("webhook.deleted", w.key_actor, ("webhook", body["id"], HOOK_NAME), API_IP)


def _email(w: World, local_part: str) -> str:
    inbox = inbox_services.inbox_create(workspace=w.workspace, local_part=local_part)
    raw = message(to=inbox.address, subject="Plot rent", text="Your allotment rent is due.")
    return str(pipeline.receive_one(raw, to=inbox.address).email_id)


def label_example_added(w: World) -> Generator[None, None, Expected]:
    label = w.api.call("POST", "labels", {"key": "garden", "name": "Garden"}).json()
    email_id = _email(w, "taught")
    yield
    body = {"email_id": email_id, "answer": "yes"}
    assert w.api.call("POST", "labels/garden/examples", body).status_code == 200
    return Expected("label.example_added", w.key_actor, ("label", label["id"], "garden"), API_IP)


def label_example_removed(w: World) -> Generator[None, None, Expected]:
    label = w.api.call("POST", "labels", {"key": "plots", "name": "Plots"}).json()
    body = {"email_id": _email(w, "untaught"), "answer": "no"}
    example = w.api.call("POST", "labels/plots/examples", body).json()
    yield
    assert w.api.call("DELETE", f"labels/plots/examples/{example['id']}").status_code == 200
    return Expected("label.example_removed", w.key_actor, ("label", label["id"], "plots"), API_IP)


def inbox_deleted(w: World) -> Generator[None, None, Expected]:
    inbox = w.api.call("POST", "inboxes", {"local_part": "doomed"}).json()
    yield
    assert w.api.call("DELETE", f"inboxes/{inbox['id']}").status_code == 200
    return Expected("inbox.deleted", w.key_actor, ("inbox", inbox["id"], inbox["address"]), API_IP)


def smtp_credential_created(w: World) -> Generator[None, None, Expected]:
    inbox = w.api.call("POST", "inboxes", {"local_part": "sandboxed"}).json()
    yield
    body = w.api.call("POST", f"inboxes/{inbox['id']}/smtp-credentials", {"name": "ci"}).json()
    w.secrets.append(body["password"])
    target = ("smtp_credential", body["id"], body["username"])
    return Expected("smtp_credential.created", w.key_actor, target, API_IP)


def smtp_credential_revoked(w: World) -> Generator[None, None, Expected]:
    inbox = w.api.call("POST", "inboxes", {"local_part": "unsandboxed"}).json()
    body = w.api.call("POST", f"inboxes/{inbox['id']}/smtp-credentials", {}).json()
    w.secrets.append(body["password"])
    yield
    path = f"inboxes/{inbox['id']}/smtp-credentials/{body['id']}"
    assert w.api.call("DELETE", path).status_code == 200
    target = ("smtp_credential", body["id"], body["username"])
    return Expected("smtp_credential.revoked", w.key_actor, target, API_IP)


# --- outbox decisions -----------------------------------------------------------------------------


def _pending(w: World, subject: str) -> OutboxItem:
    """Mail an agent sent with a key whose mail waits for approval (POST /inboxes/{id}/send)."""
    agent = key_services.api_key_create(
        workspace=w.workspace,
        name="agent",
        scopes=("read", "write", "send"),
        require_approval=True,
        by=TEST_ACTOR,
    )
    w.secrets.append(agent.plain)
    sender = Api(agent.plain)
    inbox = sender.call("POST", "inboxes", {"local_part": f"out-{len(subject)}"}).json()
    body = {"to": ["someone@example.com"], "subject": subject, "text": "Hello there"}
    response = sender.call("POST", f"inboxes/{inbox['id']}/send", body)
    assert response.status_code == 202, response.json()
    return OutboxItem.objects.get(workspace=w.workspace, pk=response.json()["id"])


def outbox_approved(w: World) -> Generator[None, None, Expected]:
    item = _pending(w, "Please approve")
    yield
    response = w.web.post(
        f"/approvals/{item.pk}/decide/",
        {
            "decision": "approve",
            "approve-subject": "Please approve",
            "approve-text": "Hello there",
            "approve-note": "fine",
        },
    )
    assert response.status_code == 302
    item.refresh_from_db()
    assert item.status != Status.PENDING
    return Expected(
        "outbox.approved", w.owner_actor, ("outbox_item", item.pk, "Please approve"), WEB_IP
    )


def outbox_rejected(w: World) -> Generator[None, None, Expected]:
    item = _pending(w, "Please reject")
    yield
    response = w.web.post(
        f"/approvals/{item.pk}/decide/", {"decision": "reject", "reject-note": "no"}
    )
    assert response.status_code == 302
    item.refresh_from_db()
    assert item.status == Status.REJECTED
    return Expected(
        "outbox.rejected", w.owner_actor, ("outbox_item", item.pk, "Please reject"), WEB_IP
    )


# --- accounts ---------------------------------------------------------------------------------------


def signed_in(w: World) -> Generator[None, None, Expected]:
    yield
    response = Client(REMOTE_ADDR=STRANGER_IP).post(
        "/login/", {"username": "owner@audit.test", "password": PASSWORD}
    )
    assert response.status_code == 302
    owner = w.owner_actor
    return Expected("user.signed_in", owner, ("user", owner[1], owner[2]), STRANGER_IP)


def sign_in_failed(w: World) -> Generator[None, None, Expected]:
    wrong = "not-the-Password-3"
    w.secrets.append(wrong)
    yield
    response = Client(REMOTE_ADDR=STRANGER_IP).post(
        "/login/", {"username": "owner@audit.test", "password": wrong}
    )
    assert response.status_code == 200  # the form again, with its error
    owner = w.owner_actor
    return Expected(
        "user.sign_in_failed", ("anonymous", "", ""), ("user", owner[1], owner[2]), STRANGER_IP
    )


def password_changed(w: World) -> Generator[None, None, Expected]:
    new = "fresh-pass-Numbat-64"
    w.secrets.append(new)
    yield
    response = w.web.post(
        "/password/",
        {"old_password": PASSWORD, "new_password1": new, "new_password2": new},
    )
    assert response.status_code == 302
    w.owner.refresh_from_db()  # type: ignore[attr-defined]
    assert w.owner.check_password(new)  # type: ignore[attr-defined]
    owner = w.owner_actor
    return Expected("user.password_changed", owner, ("user", owner[1], owner[2]), WEB_IP)


ACTIONS: list[Action] = [
    key_created,
    key_created_on_dashboard,
    key_updated,
    key_revoked,
    invitation_created,
    invitation_revoked,
    member_added,
    member_role_changed,
    member_removed,
    workspace_updated,
    domain_added,
    domain_updated,
    domain_removed,
    label_created,
    label_updated,
    label_deleted,
    label_example_added,
    label_example_removed,
    webhook_created,
    webhook_updated,
    webhook_deleted,
    inbox_deleted,
    smtp_credential_created,
    smtp_credential_revoked,
    outbox_approved,
    outbox_rejected,
    signed_in,
    sign_in_failed,
    password_changed,
]


@contextmanager
def _new_entries() -> Iterator[list[AuditEntry]]:
    before = set(AuditEntry.objects.values_list("pk", flat=True))
    found: list[AuditEntry] = []
    yield found
    found.extend(AuditEntry.objects.exclude(pk__in=before).order_by("pk"))


def _run(w: World, action: Action) -> tuple[Expected, list[AuditEntry]]:
    steps = action(w)
    next(steps)
    with _new_entries() as entries:
        try:
            next(steps)
        except StopIteration as done:
            expected: Expected = done.value
        else:
            raise AssertionError(f"{action.__name__} yields once")
    return expected, entries


@pytest.mark.parametrize("action", ACTIONS, ids=[a.__name__ for a in ACTIONS])
def test_each_change_leaves_exactly_one_entry_naming_its_actor_target_and_address(
    world: World, action: Action
) -> None:
    expected, entries = _run(world, action)
    assert len(entries) == 1, [(e.action, e.target_name) for e in entries]
    entry = entries[0]
    assert entry.workspace_id == world.workspace.pk
    assert entry.action == expected.action
    assert (entry.actor_type, entry.actor_id, entry.actor_name) == expected.actor
    assert (entry.target_type, entry.target_id, entry.target_name) == expected.target
    assert entry.ip == expected.ip


def test_no_entry_holds_a_secret_and_every_action_of_the_vocabulary_is_covered(
    world: World,
) -> None:
    """All the actions in one workspace; then every entry, as stored and as GET /audit shows
    it, is searched for every secret the test made: plain keys, passwords (the right ones, a
    new one, a wrong one typed), webhook signing secrets, invitation links, the webhook URL's
    path."""
    seen = set()
    for action in ACTIONS:
        expected, entries = _run(world, action)
        assert len(entries) == 1, action.__name__
        seen.add(expected.action)
    assert seen == audit.ACTIONS
    world.secrets.append("hookpathtoken9876")
    stored = json.dumps(
        list(AuditEntry.objects.values()), default=str
    )  # every column of every entry, no-workspace ones included
    pages, cursor = [], None
    while True:
        query = {"limit": 7, **({"cursor": cursor} if cursor else {})}
        body = world.api.call("GET", "audit", query).json()
        pages.append(json.dumps(body))
        cursor = body["next_cursor"]
        if cursor is None:
            break
    secrets = set(world.secrets)
    assert len(secrets) >= 12
    for secret in secrets:
        assert secret not in stored, secret
        assert all(secret not in page for page in pages), secret


def test_settings_entries_keep_each_changed_field_before_and_after(world: World) -> None:
    _, entries = _run(world, workspace_updated)
    assert entries[0].changes == {
        "name": {"before": "Audited Co", "after": "Audited Company"},
        "audit_retention_days": {"before": 365, "after": 30},
    }
    _, entries = _run(world, key_updated)
    assert entries[0].changes == {"require_approval": {"before": False, "after": True}}


def test_a_failed_sign_in_is_recorded_with_its_address_in_the_accounts_workspaces(
    world: World,
) -> None:
    second = WorkspaceFactory(name="Second Co")
    key_services.membership_set(workspace=second, user=world.owner, role=Role.MEMBER, by=TEST_ACTOR)
    before = AuditEntry.objects.filter(action="user.sign_in_failed").count()
    response = Client(REMOTE_ADDR="192.0.2.201").post(
        "/login/", {"username": "Owner@Audit.test", "password": "wrong-Wrong-1"}
    )
    assert response.status_code == 200
    entries = AuditEntry.objects.filter(action="user.sign_in_failed").order_by("workspace_id")
    assert entries.count() == before + 2
    assert {e.workspace_id for e in entries} == {world.workspace.pk, second.pk}
    assert {(e.ip, e.target_id, e.actor_type) for e in entries} == {
        ("192.0.2.201", str(world.owner.pk), "anonymous")  # type: ignore[attr-defined]
    }


def test_a_failed_sign_in_of_no_account_keeps_the_address_not_the_name_typed(db: None) -> None:
    typed = "Hunter2-typed-in-the-wrong-field"
    response = Client(REMOTE_ADDR="192.0.2.202").post(
        "/login/", {"username": typed, "password": "whatever-1"}
    )
    assert response.status_code == 200
    entry = AuditEntry.objects.unscoped().get(action="user.sign_in_failed")
    assert entry.workspace_id is None
    assert entry.ip == "192.0.2.202"
    assert (
        typed.lower()
        not in json.dumps(list(AuditEntry.objects.unscoped().values()), default=str).lower()
    )


def test_a_refused_change_leaves_no_entry(world: World) -> None:
    inbox_services.domain_add(
        workspace=world.workspace, domain="busy.audit.example", verified=True, by=TEST_ACTOR
    )
    inbox_services.inbox_create(
        workspace=world.workspace, local_part="user", domain="busy.audit.example"
    )
    with _new_entries() as entries:
        response = world.web.post("/domains/busy.audit.example/remove/")
    assert response.status_code == 302
    assert world.workspace.domains.filter(domain="busy.audit.example").exists()
    assert entries == []


def test_the_entry_commits_with_the_change_or_not_at_all(world: World) -> None:
    from django.db import transaction

    other = key_services.api_key_create(workspace=world.workspace, name="kept", by=TEST_ACTOR)
    with pytest.raises(ZeroDivisionError), transaction.atomic():
        key_services.api_key_revoke(key=other.key, by=TEST_ACTOR)
        assert AuditEntry.objects.filter(workspace=world.workspace, action="key.revoked").exists()
        1 / 0  # noqa: B018  (the request fails after the change)
    other.key.refresh_from_db()
    assert other.key.revoked_at is None
    assert not AuditEntry.objects.filter(workspace=world.workspace, action="key.revoked").exists()


def test_entries_are_append_only_and_keep_only_allowed_fields(world: World) -> None:
    entry = audit.record(
        workspace=world.workspace,
        by=Actor("system", "", "tests"),
        action="webhook.updated",
        target=audit.Target("webhook", "whk_x", "x"),
        changes={
            "secret_encrypted": {"before": "a", "after": "b"},
            "secret": {"after": "whsec_nope"},
            "url": {"before": HOOK_URL, "after": HOOK_URL + "2"},
            "enabled": {"before": True, "after": False},
        },
    )
    assert entry.changes == {
        "url": {"before": HOOK_NAME, "after": HOOK_NAME},
        "enabled": {"before": True, "after": False},
    }
    entry.action = "key.revoked"
    with pytest.raises(RuntimeError, match="append-only"):
        entry.save()
    with pytest.raises(ValueError, match="vocabulary"):
        audit.record(
            workspace=world.workspace,
            by=Actor("system"),
            action="key.stolen",
            target=audit.Target("key", "k"),
        )


# --- GET /audit ---------------------------------------------------------------------------------


def _entry(workspace: Workspace, action: str, actor: Actor) -> AuditEntry:
    return audit.record(
        workspace=workspace, by=actor, action=action, target=audit.Target("key", "key_t", "t")
    )


@pytest.mark.parametrize("scopes", [("read",), ("read", "write", "send")])
def test_only_admin_keys_read_the_log(world: World, make_key, scopes: tuple[str, ...]) -> None:  # type: ignore[no-untyped-def]
    response = Api(make_key(world.workspace, scopes=scopes)).call("GET", "audit")
    assert error_of(response) == (403, "insufficient_scope")


def test_pages_follow_the_cursor_newest_first_and_filters_apply(world: World) -> None:
    AuditEntry.objects.filter(workspace=world.workspace).delete()
    alice, bob = Actor("user", "7", "alice", "192.0.2.1"), Actor("key", "key_bob", "bob")
    start = timezone.now() - timedelta(days=3)
    made = []
    for day, (action, actor) in enumerate(
        [
            ("key.created", alice),
            ("label.created", bob),
            ("key.revoked", bob),
            ("user.signed_in", alice),
            ("key.updated", alice),
        ]
    ):
        with time_machine.travel(start + timedelta(hours=12 * day), tick=False):
            made.append(_entry(world.workspace, action, actor))
    newest_first = [e.pk for e in reversed(made)]

    ids, cursor = [], None
    while True:
        body = world.api.call(
            "GET", "audit", {"limit": 2, **({"cursor": cursor} if cursor else {})}
        ).json()
        assert len(body["data"]) <= 2
        ids += [row["id"] for row in body["data"]]
        cursor = body["next_cursor"]
        if cursor is None:
            break
    assert ids == newest_first

    def listed(**query: str) -> list[str]:
        response = world.api.call("GET", "audit", query)
        assert response.status_code == 200, response.json()
        return [row["action"] for row in response.json()["data"]]

    assert listed(action="key.revoked") == ["key.revoked"]
    assert listed(action="key.") == ["key.updated", "key.revoked", "key.created"]
    assert listed(actor="key_bob") == ["key.revoked", "label.created"]
    assert listed(actor="7", action="key.") == ["key.updated", "key.created"]
    assert listed(
        since=(start + timedelta(hours=12)).isoformat(),
        until=(start + timedelta(hours=36)).isoformat(),
    ) == ["key.revoked", "label.created"]
    row = world.api.call("GET", "audit", {"action": "key.created"}).json()["data"][0]
    assert row == {
        "id": made[0].pk,
        "created_at": row["created_at"],
        "actor": {"type": "user", "id": "7", "name": "alice"},
        "action": "key.created",
        "target": {"type": "key", "id": "key_t", "name": "t"},
        "changes": {},
        "ip": "192.0.2.1",
    }


@pytest.mark.parametrize(
    "query",
    [{"actorr": "x"}, {"since": "yesterday"}, {"limit": "0"}, {"cursor": "not-a-cursor"}],
)
def test_bad_queries_are_validation_errors(world: World, query: dict[str, str]) -> None:
    assert error_of(world.api.call("GET", "audit", query)) == (400, "validation_error")


def test_another_workspaces_entries_are_invisible(world: World, other_api: Api) -> None:
    mine = _entry(world.workspace, "label.deleted", Actor("key", world.key.pk, world.key.name))
    body = other_api.call("GET", "audit").json()
    assert mine.pk not in [row["id"] for row in body["data"]]
    assert all(row["target"]["name"] != "Audited Co" for row in body["data"])
    assert other_api.call("GET", "audit", {"actor": world.key.pk}).json()["data"] == []
    assert (
        world.api.call("GET", "audit", {"actor": world.key.pk}).json()["data"][0]["id"] == mine.pk
    )


# --- the dashboard page ---------------------------------------------------------------------------


def test_owners_and_admins_read_the_page_members_do_not(world: World) -> None:
    _run(world, label_created)
    page = world.web.get("/audit/")
    assert page.status_code == 200
    assert "label.created" in page.content.decode()
    assert 'href="/audit/"' in page.content.decode()  # in the navigation
    _run(world, key_revoked)
    filtered = world.web.get("/audit/", {"action": "key.revoked"}).content.decode()
    assert "key.revoked" in filtered and "<code>label.created</code>" not in filtered
    member = _colleague(world, "reader@audit.test")
    reader = Client()
    reader.force_login(member.user)
    assert reader.get("/audit/").status_code == 403
    assert 'href="/audit/"' not in reader.get("/settings/").content.decode()


# --- retention ------------------------------------------------------------------------------------


def test_the_sweep_deletes_entries_older_than_each_workspaces_retention(world: World) -> None:
    from django.conf import settings

    from apikeys.tasks import prune_audit

    assert {
        "task": "apikeys.prune_audit",
        "schedule": 3600.0,
    } in settings.CELERY_BEAT_SCHEDULE.values()
    short = WorkspaceFactory(name="Short memory", audit_retention_days=10)
    actor = Actor("system", "", "tests")
    with time_machine.travel(timezone.now() - timedelta(days=20)):
        old_short = _entry(short, "key.created", actor)
        old_long = _entry(world.workspace, "key.created", actor)
    with time_machine.travel(timezone.now() - timedelta(days=400)):
        ancient = audit.record(
            workspace=None, by=actor, action="user.sign_in_failed", target=audit.Target("user", "")
        )
    fresh_short = _entry(short, "key.revoked", actor)
    deleted = prune_audit.delay().get()
    assert deleted == 2
    remaining = set(AuditEntry.objects.unscoped().values_list("pk", flat=True))
    assert old_short.pk not in remaining and ancient.pk not in remaining
    assert {old_long.pk, fresh_short.pk} <= remaining
