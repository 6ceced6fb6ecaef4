"""Request-body serializers copy their declared fields shallowly (config.api.inputs.fresh_field):
each instance still gets fields of its own, bound to it, while what a field's ``__init__``
computed is not computed again per request. Validation lends each thread one bound set per
class instead (config.api.inputs.lend): reused by the thread's next validation, rebound to the
instance being validated, never shared between threads or with an instance that still holds
it."""

from __future__ import annotations

import threading
from typing import Any

import pytest
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


def _fields_used(serializer_class: type[serializers.Serializer], data: Any, **kwargs: Any) -> dict:
    """The field objects ``serializer_class`` validated ``data`` with, by name, each with what
    it read at that moment (its parent, ``root.partial``, ``context``), as the class's
    ``validate`` recorded them on the instance (``seen``)."""
    serializer = serializer_class(data=data, **kwargs)
    assert serializer.is_valid(), serializer.errors
    return {"serializer": serializer, **serializer.seen}


class Recording(JsonIn):
    """Records, in ``validate`` (while its fields are bound to it), each field's view."""

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        self.seen = {
            name: (field, field.parent, field.root.partial, field.context)
            for name, field in self.fields.items()
        }
        return attrs


class Lent(Recording):
    name = serializers.CharField(required=False)
    count = serializers.IntegerField(required=False)


def test_validation_reuses_the_threads_fields() -> None:
    first = _fields_used(Lent, {"name": "a", "count": 1}, context={"n": 1})
    second = _fields_used(Lent, {"name": "b", "count": 2}, context={"n": 2})
    # The same field objects served both validations (copying them was a tenth of a POST's CPU)…
    assert first["name"][0] is second["name"][0]
    assert first["count"][0] is second["count"][0]
    # …each bound, while it ran, to the instance being validated: its context, its partial.
    assert first["name"][1] is first["serializer"] and second["name"][1] is second["serializer"]
    assert (first["name"][3], second["name"][3]) == ({"n": 1}, {"n": 2})
    assert second["serializer"].validated_data == {"name": "b", "count": 2}
    # Afterwards neither holds the other (no reference cycle, nothing kept alive).
    assert second["name"][0].parent is None
    assert "fields" not in second["serializer"].__dict__


def test_each_thread_has_its_own_set() -> None:
    used: list[Any] = []
    barrier = threading.Barrier(2)

    def run() -> None:
        barrier.wait()
        used.append(_fields_used(Lent, {"name": "t"})["name"][0])

    threads = [threading.Thread(target=run) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(used) == 2 and used[0] is not used[1]
    assert _fields_used(Lent, {"name": "main"})["name"][0] not in used


def test_partial_is_read_from_the_instance_being_validated() -> None:
    full = _fields_used(Lent, {"name": "a"})
    partial = _fields_used(Lent, {"name": "a"}, partial=True)
    assert full["name"][0] is partial["name"][0]
    assert (full["name"][2], partial["name"][2]) == (False, True)
    assert Lent(data={}, partial=False).is_valid()
    refused = type("Required", (Recording,), {"name": serializers.CharField()})
    assert not refused(data={}).is_valid()
    assert refused(data={}, partial=True).is_valid()
    assert not refused(data={}).is_valid()  # partial did not stick to the lent fields


@pytest.mark.parametrize("kind", ["own fields asked first", "mutable default", "own __init__"])
def test_what_is_not_lent_gets_fresh_fields(kind: str) -> None:
    if kind == "own fields asked first":
        serializer = Lent(data={"name": "x"})
        mine = serializer.fields["name"]
        assert serializer.is_valid()
        assert "fields" not in serializer.__dict__  # released as before…
        assert _fields_used(Lent, {"name": "y"})["name"][0] is not mine  # …not lent onwards
        return
    if kind == "mutable default":

        class Shape(Recording):
            name = serializers.CharField(required=False)
            fixed = serializers.JSONField(required=False, default={"a": []})

    else:

        class Shape(Recording):  # type: ignore[no-redef]
            name = serializers.CharField(required=False)

            def __init__(self, *args: Any, **kwargs: Any) -> None:
                super().__init__(*args, **kwargs)

    one = _fields_used(Shape, {"name": "a"})
    two = _fields_used(Shape, {"name": "b"})
    assert one["name"][0] is not two["name"][0]
