"""/labels and /labels/test through the API; rule labels on receipt; manual labels; events."""

from __future__ import annotations

import pytest

from apikeys.audit import Actor
from apikeys.models import Workspace
from config.api.errors import ValidationFailed
from events.models import Event
from inboxes import services as inbox_services
from labels.models import EmailLabel, Label, LabelFeedback
from mail import pipeline
from mail.models import Email
from tests.conftest import Api, error_of
from tests.mail.messages import message

pytestmark = pytest.mark.django_db

INVOICE_RULES = {
    "match": "any",
    "conditions": [{"field": "subject", "op": "regex", "value": r"\b(invoice|receipt)\b"}],
}


def test_create_defaults_and_fields(api: Api) -> None:
    body = api.call("POST", "labels", {"key": "billing", "name": "Billing"}).json()
    assert body["key"] == "billing" and body["color"] == "violet" and body["instructions"] == ""
    assert body["threshold"] == 0.7 and body["rules"] == {} and body["enabled"] is True
    assert body["id"].startswith("lbl_")
    full = api.call(
        "POST",
        "labels",
        {
            "key": "invoices",
            "name": "Invoices",
            "color": "amber",
            "threshold": 0.99,
            "rules": INVOICE_RULES,
            "enabled": False,
        },
    ).json()
    assert full["rules"]["conditions"][0] == {
        "field": "subject",
        "op": "regex",
        "value": r"\b(invoice|receipt)\b",
        "name": "",
        "negate": False,
    }
    keys = [label["key"] for label in api.call("GET", "labels").json()["data"]]
    assert keys == ["invoices", "billing"]


@pytest.mark.parametrize(
    ("body", "path"),
    [
        ({"name": "x"}, "key"),
        ({"key": "Bad Key", "name": "x"}, "key"),
        ({"key": "-x", "name": "x"}, "key"),
        ({"key": "x" * 64, "name": "x"}, "key"),
        ({"key": "test", "name": "x"}, "key"),
        ({"key": "ok"}, "name"),
        ({"key": "ok", "name": "x", "color": "teal"}, "color"),
        ({"key": "ok", "name": "x", "threshold": 1.0}, "threshold"),
        ({"key": "ok", "name": "x", "threshold": -0.1}, "threshold"),
        (
            {
                "key": "ok",
                "name": "x",
                "rules": {
                    "match": "any",
                    "conditions": [{"field": "from", "op": "like", "value": "x"}],
                },
            },
            "rules.conditions.0.op",
        ),
        ({"key": "ok", "name": "x", "rules": {"match": "every"}}, "rules.match"),
        ({"key": "ok", "name": "x", "rules": "subject contains x"}, "rules"),
        ({"key": "ok", "name": "x", "enabled": "sometimes"}, "enabled"),
    ],
)
def test_create_validation(api: Api, body: dict, path: str) -> None:
    response = api.call("POST", "labels", body)
    assert error_of(response) == (400, "validation_error")
    assert path in [issue["path"] for issue in response.json()["error"]["issues"]]
    assert Label.objects.count() == 0


def test_label_exists(api: Api, other_api: Api) -> None:
    assert api.call("POST", "labels", {"key": "dup", "name": "x"}).status_code == 200
    assert error_of(api.call("POST", "labels", {"key": "dup", "name": "y"})) == (
        409,
        "label_exists",
    )
    assert other_api.call("POST", "labels", {"key": "dup", "name": "z"}).status_code == 200


def test_patch_and_delete(api: Api, other_api: Api, workspace: Workspace) -> None:
    api.call("POST", "labels", {"key": "vip", "name": "VIP", "rules": INVOICE_RULES})
    body = api.call("PATCH", "labels/vip", {"name": "Very", "threshold": 0.5}).json()
    assert (
        body["name"] == "Very"
        and body["threshold"] == 0.5
        and body["rules"]
        == INVOICE_RULES
        | {"conditions": [INVOICE_RULES["conditions"][0] | {"name": "", "negate": False}]}
    )
    response = api.call("PATCH", "labels/vip", {"rules": {"conditions": [{"field": "x"}]}})
    assert error_of(response) == (400, "validation_error")
    assert error_of(other_api.call("PATCH", "labels/vip", {"name": "hijack"})) == (404, "not_found")
    assert error_of(other_api.call("DELETE", "labels/vip")) == (404, "not_found")
    inbox = inbox_services.inbox_create(workspace=workspace, local_part="lbl")
    pipeline.receive_one(message(to=inbox.address, subject="Your invoice"), to=inbox.address)
    assert EmailLabel.objects.filter(key="vip").count() == 1
    deleted = api.call("DELETE", "labels/vip").json()
    assert deleted["deleted"] is True and deleted["key"] == "vip"
    assert EmailLabel.objects.count() == 0  # removed from every email


def test_rule_labels_on_receipt_and_events(api: Api, workspace: Workspace) -> None:
    api.call("POST", "labels", {"key": "invoices", "name": "Invoices", "rules": INVOICE_RULES})
    api.call(
        "POST", "labels", {"key": "off", "name": "Off", "rules": INVOICE_RULES, "enabled": False}
    )
    inbox = inbox_services.inbox_create(workspace=workspace, local_part="rules")
    hit = pipeline.receive_one(message(to=inbox.address, subject="Receipt #42"), to=inbox.address)
    miss = pipeline.receive_one(message(to=inbox.address, subject="Hello"), to=inbox.address)
    body = api.call("GET", f"emails/{hit.email_id}").json()
    assert body["labels"] == [{"key": "invoices", "source": "rule", "confidence": 1.0}]
    assert api.call("GET", f"emails/{miss.email_id}").json()["labels"] == []
    received = Event.objects.get(type="email.received", data__email__id=hit.email_id)
    assert received.data["email"]["labels"] == [
        {"key": "invoices", "source": "rule", "confidence": 1.0}
    ]
    labeled = Event.objects.filter(type="email.labeled")
    assert labeled.count() == 1 and labeled.get().data["labels"][0]["key"] == "invoices"
    assert labeled.get().id > received.id  # after email.received
    listed = api.call("GET", "emails", {"label": "invoices"}).json()["data"]
    assert [e["id"] for e in listed] == [hit.email_id]
    assert Email.objects.get(pk=hit.email_id).announced_at is not None


def test_manual_labels_keep_rule_labels_and_teach(api: Api, workspace: Workspace) -> None:
    api.call("POST", "labels", {"key": "invoices", "name": "Invoices", "rules": INVOICE_RULES})
    api.call("POST", "labels", {"key": "todo", "name": "To do"})
    inbox = inbox_services.inbox_create(workspace=workspace, local_part="manual")
    email_id = pipeline.receive_one(
        message(to=inbox.address, subject="Invoice 7"), to=inbox.address
    ).email_id
    body = api.call("PATCH", f"emails/{email_id}", {"labels": ["todo"]}).json()
    assert [(x["key"], x["source"]) for x in body["labels"]] == [
        ("invoices", "rule"),
        ("todo", "manual"),
    ]
    feedback = LabelFeedback.objects.get()
    assert feedback.positive and feedback.subject == "Invoice 7" and feedback.label.key == "todo"
    body = api.call("PATCH", f"emails/{email_id}", {"labels": []}).json()
    assert [x["key"] for x in body["labels"]] == ["invoices"]
    assert LabelFeedback.objects.count() == 0
    body = api.call("PATCH", f"emails/{email_id}", {"remove_labels": ["invoices"]}).json()
    assert body["labels"] == []
    updated = Event.objects.filter(type="email.updated", inbox_id=inbox.pk)
    assert updated.count() == 3
    response = api.call("PATCH", f"emails/{email_id}", {"remove_labels": ["ghost"]})
    assert error_of(response) == (400, "unknown_label")
    assert response.json()["error"]["issues"][0]["path"] == "remove_labels"


def test_label_test_endpoint_stores_nothing(api: Api, workspace: Workspace) -> None:
    api.call("POST", "labels", {"key": "invoices", "name": "Invoices", "rules": INVOICE_RULES})
    api.call(
        "POST",
        "labels",
        {
            "key": "bank",
            "name": "Bank",
            "rules": {"conditions": [{"field": "from", "op": "domain", "value": "bank.example"}]},
        },
    )
    api.call("POST", "labels", {"key": "plain", "name": "No rules"})
    before = (EmailLabel.objects.count(), Email.objects.count(), Event.objects.count())
    body = api.call(
        "POST", "labels/test", {"from": "alerts@bank.example", "subject": "Your invoice"}
    ).json()
    results = {r["key"]: r for r in body["results"]}
    assert results["invoices"] == {
        "key": "invoices",
        "matched": True,
        "source": "rule",
        "confidence": 1.0,
        "reason": 'subject regex "\\b(invoice|receipt)\\b"',
    }
    assert (
        results["bank"]["matched"] is True
        and results["bank"]["reason"] == 'from domain "bank.example"'
    )
    assert results["plain"]["matched"] is False and results["plain"]["source"] is None
    default = api.call("POST", "labels/test", {}).json()
    assert not any(r["matched"] for r in default["results"])
    inbox = inbox_services.inbox_create(workspace=workspace, local_part="t")
    email_id = pipeline.receive_one(
        message(to=inbox.address, sender="x@bank.example", subject="hi"), to=inbox.address
    ).email_id
    before = (EmailLabel.objects.count(), Email.objects.count(), Event.objects.count())
    stored = api.call("POST", "labels/test", {"email_id": email_id}).json()
    assert {r["key"]: r["matched"] for r in stored["results"]} == {
        "bank": True,
        "invoices": False,
        "plain": False,
    }
    assert (EmailLabel.objects.count(), Email.objects.count(), Event.objects.count()) == before


def test_label_test_cannot_reach_other_workspaces(
    api: Api, other_api: Api, workspace: Workspace
) -> None:
    inbox = inbox_services.inbox_create(workspace=workspace, local_part="mine")
    email_id = pipeline.receive_one(message(to=inbox.address), to=inbox.address).email_id
    assert error_of(other_api.call("POST", "labels/test", {"email_id": email_id})) == (
        404,
        "not_found",
    )


def test_instructions_need_the_classifier(api: Api, workspace: Workspace) -> None:
    workspace.classifier_enabled = False
    workspace.save()
    response = api.call("POST", "labels", {"key": "q", "name": "Q", "instructions": "Is it spam?"})
    assert error_of(response) == (403, "feature_disabled")
    assert api.call("POST", "labels", {"key": "q", "name": "Q"}).status_code == 200
    assert error_of(api.call("PATCH", "labels/q", {"instructions": "Spam?"})) == (
        403,
        "feature_disabled",
    )


def test_label_test_with_an_unsaved_draft(api: Api) -> None:
    api.call("POST", "labels", {"key": "invoices", "name": "Invoices", "rules": INVOICE_RULES})
    labels_before = list(Label.objects.values_list("key", "rules"))
    draft = {
        "key": "invoices",
        "rules": {"conditions": [{"field": "subject", "op": "contains", "value": "refund"}]},
    }
    body = api.call("POST", "labels/test", {"subject": "Your refund", "label": draft}).json()
    results = {r["key"]: r for r in body["results"]}
    assert results["invoices"]["matched"] is True  # the draft, in place of the saved rule
    saved = api.call("POST", "labels/test", {"subject": "Your refund"}).json()
    assert {r["key"]: r["matched"] for r in saved["results"]} == {"invoices": False}
    fresh = api.call(
        "POST", "labels/test", {"subject": "Your refund", "label": {**draft, "key": "new"}}
    ).json()
    assert {r["key"]: r["matched"] for r in fresh["results"]} == {"invoices": False, "new": True}
    bad = api.call(
        "POST",
        "labels/test",
        {"label": {"rules": {"conditions": [{"field": "subject", "op": "nope", "value": "x"}]}}},
    )
    assert error_of(bad) == (400, "validation_error")
    assert bad.json()["error"]["issues"][0]["path"] == "label.rules.conditions.0.op"
    assert list(Label.objects.values_list("key", "rules")) == labels_before  # nothing stored


def test_labels_made_by_the_service_store_complete_rules(workspace: Workspace) -> None:
    from labels import services as label_services

    label = label_services.label_create(
        workspace=workspace,
        key="shop",
        name="Shop",
        rules={"conditions": [{"field": "from", "op": "domain", "value": "shop.example"}]},
        by=Actor.system("tests"),
    )
    assert label.rules["match"] == "any"
    assert (
        label.rules["conditions"][0] | {"name": "", "negate": False} == label.rules["conditions"][0]
    )
    inbox = inbox_services.inbox_create(workspace=workspace, local_part="x")
    email_id = pipeline.receive_one(
        message(to=inbox.address, sender="a@shop.example"), to=inbox.address
    ).email_id
    assert list(EmailLabel.objects.filter(email_id=email_id).values_list("key", flat=True)) == [
        "shop"
    ]
    with pytest.raises(ValidationFailed):
        label_services.label_update(
            label=label, rules={"conditions": [{"field": "nope"}]}, by=Actor.system("tests")
        )


def test_a_label_whose_rules_cannot_run_never_costs_the_mail(workspace: Workspace) -> None:
    from labels.models import Label

    Label.objects.create(  # written around the service, as an operator's SQL might
        workspace=workspace, key="broken", name="Broken", rules={"conditions": [{"field": "from"}]}
    )
    Label.objects.create(
        workspace=workspace,
        key="fine",
        name="Fine",
        rules={
            "match": "any",
            "conditions": [
                {
                    "field": "subject",
                    "op": "contains",
                    "value": "hello",
                    "name": "",
                    "negate": False,
                }
            ],
        },
    )
    inbox = inbox_services.inbox_create(workspace=workspace, local_part="y")
    delivery = pipeline.receive_one(message(to=inbox.address, subject="Hello"), to=inbox.address)
    assert delivery.email_id is not None
    assert list(
        EmailLabel.objects.filter(email_id=delivery.email_id).values_list("key", flat=True)
    ) == ["fine"]
