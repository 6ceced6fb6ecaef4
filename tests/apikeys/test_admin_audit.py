"""The operator's changes in the Django admin are audited like the same change through the API
or the dashboard (``apikeys.admin.AuditedAdmin``): a re-roled, added or removed member, workspace
settings, key settings and deletion, a domain, a label, a webhook endpoint — each leaves exactly
one entry naming the signed-in operator, and none holds a secret. Fault rules, which reach the
SMTP wire, are read-only there (set through the API's or the dashboard's validation)."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.admin.utils import quote
from django.test import Client
from django.urls import reverse

from apikeys import services as key_services
from apikeys.audit import Actor
from apikeys.models import ApiKey, AuditEntry, Membership, Workspace
from inboxes import services as inbox_services
from inboxes.models import Domain, Inbox
from labels import services as label_services
from labels.models import Label
from tests.factories import MembershipFactory, UserFactory
from webhooks import services as webhook_services
from webhooks.models import Endpoint

pytestmark = pytest.mark.django_db
SYSTEM = Actor.system("tests")


@pytest.fixture
def operator(client: Client) -> Client:
    client.force_login(UserFactory(is_staff=True, is_superuser=True))
    return client


def _url(model: type, view: str, *args: str) -> str:
    name = f"admin:{model._meta.app_label}_{model._meta.model_name}_{view}"
    return reverse(name, args=[quote(arg) for arg in args])


def _value(field: Any) -> Any:
    value = field.value()
    if value is None:
        return ""
    if isinstance(value, bool):
        return "on" if value else ""
    return value


def _form_data(page: Any) -> dict[str, Any]:
    """The change page's form as a browser would post it back: the object's fields and every
    inline formset's management form and rows."""
    data: dict[str, Any] = {}
    form = page.context["adminform"].form
    for name in form.fields:
        value = _value(form[name])
        if value != "":
            data[name] = value
    for inline in page.context["inline_admin_formsets"]:
        formset = inline.formset
        for name in formset.management_form.fields:
            data[f"{formset.prefix}-{name}"] = formset.management_form[name].value()
        for row in formset.forms:
            for name in row.fields:
                value = _value(row[name])
                if value != "":
                    data[row.add_prefix(name)] = value
    return data


def _change(client: Client, model: type, pk: str, **changes: Any) -> Client:
    page = client.get(_url(model, "change", pk))
    assert page.status_code == 200
    data = {**_form_data(page), **changes}
    data = {k: v for k, v in data.items() if v is not None}
    response = client.post(_url(model, "change", pk), data)
    assert response.status_code == 302, response.content.decode()[:2000]
    return client


def _entries(workspace: Workspace, action: str) -> list[tuple[str, str, str, dict]]:
    rows = AuditEntry.objects.filter(workspace=workspace, action=action)
    return [(e.actor_type, e.target_type, e.target_id, e.changes) for e in rows]


def test_a_member_re_roled_in_the_admin_is_audited(operator: Client, workspace: Workspace) -> None:
    member = MembershipFactory(workspace=workspace, role="member")
    _change(operator, Membership, str(member.pk), role="admin")
    assert _entries(workspace, "member.role_changed") == [
        ("user", "member", str(member.pk), {"role": {"before": "member", "after": "admin"}})
    ]


def test_workspace_settings_and_member_rows_on_its_page_are_audited(
    operator: Client, workspace: Workspace
) -> None:
    leaving = MembershipFactory(workspace=workspace, role="member")
    page = operator.get(_url(Workspace, "change", workspace.pk))
    data = _form_data(page)
    data["require_approval"] = "on"
    prefix = next(i.formset.prefix for i in page.context["inline_admin_formsets"])
    rows = int(data[f"{prefix}-TOTAL_FORMS"])
    for i in range(rows):
        if str(data.get(f"{prefix}-{i}-id")) == str(leaving.pk):
            data[f"{prefix}-{i}-DELETE"] = "on"
    newcomer = UserFactory()
    data.update(
        {
            f"{prefix}-TOTAL_FORMS": rows + 1,
            f"{prefix}-{rows}-user": newcomer.pk,
            f"{prefix}-{rows}-role": "member",
            f"{prefix}-{rows}-workspace": workspace.pk,
        }
    )
    response = operator.post(_url(Workspace, "change", workspace.pk), data)
    assert response.status_code == 302, response.content.decode()[:3000]
    assert _entries(workspace, "workspace.updated") == [
        (
            "user",
            "workspace",
            workspace.pk,
            {"require_approval": {"before": False, "after": True}},
        )
    ]
    assert _entries(workspace, "member.removed") == [("user", "member", str(leaving.pk), {})]
    added = Membership.objects.get(workspace=workspace, user=newcomer)
    assert _entries(workspace, "member.added") == [
        ("user", "member", str(added.pk), {"role": {"after": "member"}})
    ]


def test_key_settings_and_deletion_in_the_admin_are_audited(
    operator: Client, workspace: Workspace
) -> None:
    created = key_services.api_key_create(
        workspace=workspace, name="ci", scopes=["read"], by=SYSTEM
    )
    key = created.key
    _change(operator, ApiKey, key.pk, require_approval="on")
    assert _entries(workspace, "key.updated")[-1:] == [
        ("user", "key", key.pk, {"require_approval": {"before": False, "after": True}})
    ]
    response = operator.post(_url(ApiKey, "delete", key.pk), {"post": "yes"})
    assert response.status_code == 302
    assert [e[:3] for e in _entries(workspace, "key.revoked")] == [("user", "key", key.pk)]
    stored = str(list(AuditEntry.objects.values()))
    assert created.plain not in stored


def test_domain_label_and_webhook_changes_in_the_admin_are_audited(
    operator: Client, workspace: Workspace
) -> None:
    domain = inbox_services.domain_add(workspace=workspace, domain="mail.example.org", by=SYSTEM)
    _change(operator, Domain, domain.pk, catch_all="on")
    assert _entries(workspace, "domain.updated") == [
        ("user", "domain", domain.pk, {"catch_all": {"before": False, "after": True}})
    ]
    label = label_services.label_create(workspace=workspace, key="bank", name="Bank", by=SYSTEM)
    _change(operator, Label, label.pk, name="Banking")
    assert _entries(workspace, "label.updated")[-1:] == [
        ("user", "label", label.pk, {"name": {"before": "Bank", "after": "Banking"}})
    ]
    endpoint, secret = webhook_services.endpoint_create(
        workspace=workspace,
        url="https://hooks.example.com/services/T0/B0/XYZsecretpath",
        events=["email.received"],
        inbox_ids=[],
        label_keys=[],
        by=SYSTEM,
    )
    _change(operator, Endpoint, endpoint.pk, enabled="")
    [entry] = _entries(workspace, "webhook.updated")
    assert entry == ("user", "webhook", endpoint.pk, {"enabled": {"before": True, "after": False}})
    response = operator.post(_url(Endpoint, "delete", endpoint.pk), {"post": "yes"})
    assert response.status_code == 302
    assert [e[:3] for e in _entries(workspace, "webhook.deleted")] == [
        ("user", "webhook", endpoint.pk)
    ]
    stored = str(list(AuditEntry.objects.values()))
    assert "XYZsecretpath" not in stored and str(secret) not in stored


def test_fault_rules_are_read_only_in_the_admin(operator: Client, workspace: Workspace) -> None:
    inbox = inbox_services.inbox_create(workspace=workspace, local_part="faults")
    page = operator.get(_url(Inbox, "change", inbox.pk))
    assert "smtp_faults" not in page.context["adminform"].form.fields
    rule = '[{"stage": "rcpt", "reply": "250 ok\\r\\nRSET", "mode": "always"}]'
    _change(operator, Inbox, inbox.pk, smtp_faults=rule)
    inbox.refresh_from_db()
    assert inbox.smtp_faults == []
