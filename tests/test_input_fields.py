"""Request-body serializers copy their declared fields shallowly (config.api.inputs.fresh_field):
each instance still gets fields of its own, bound to it, while what a field's ``__init__``
computed is not computed again per request."""

from __future__ import annotations

from rest_framework import serializers

from config.api.inputs import JsonIn
from inboxes.serializers import InboxCreateIn, InboxUpdateIn


def test_declared_fields_are_not_rebuilt_per_instance() -> None:
    declared = InboxCreateIn._declared_fields
    fields = InboxCreateIn(data={}).fields
    # DRF's deep copy re-ran every field's __init__ (new validator lists, new children).
    assert fields["name"].validators is declared["name"].validators
    assert fields["tags"].child is not declared["tags"].child
    assert fields["tags"].child.validators is declared["tags"].child.validators


def test_each_instance_has_its_own_bound_fields() -> None:
    one, two = InboxCreateIn(data={}), InboxUpdateIn(data={})
    for name in ("name", "tags", "smtp_faults"):
        assert one.fields[name] is not two.fields[name]
        assert one.fields[name].parent is one and two.fields[name].parent is two
        assert one.fields[name].field_name == name
    assert one.fields["tags"].child.parent is one.fields["tags"]
    assert InboxCreateIn._declared_fields["name"].parent is None  # the declared ones stay unbound
    assert InboxCreateIn(data={}).fields["name"].parent is not one


def test_a_mutable_default_is_not_shared() -> None:
    class WithDefault(JsonIn):
        items = serializers.ListField(child=serializers.CharField(), default=list)
        fixed = serializers.JSONField(required=False, default={"a": []})

    first = WithDefault(data={})
    assert first.is_valid(), first.errors
    first.validated_data["fixed"]["a"].append("x")
    second = WithDefault(data={})
    assert second.is_valid(), second.errors
    assert second.validated_data["fixed"] == {"a": []}


def test_validation_is_unchanged() -> None:
    body = InboxCreateIn(
        data={
            "name": "A",
            "tags": ["x", 1],
            "smtp_faults": [{"stage": "rcpt", "reply": "nope"}],
            "ttl_minutes": 0,
        }
    )
    assert not body.is_valid()
    assert set(body.errors) == {"tags", "smtp_faults", "ttl_minutes"}
    assert body.errors["tags"] == {1: "Must be a string."}
    good = InboxCreateIn(
        data={
            "name": "A",
            "tags": ["x"],
            "smtp_faults": [{"stage": "rcpt", "reply": "451 4.7.1 Later"}],
        }
    )
    assert good.is_valid(), good.errors
    assert good.validated_data["smtp_faults"][0]["mode"] == "always"
