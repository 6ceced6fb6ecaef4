"""Strict JSON request bodies: every value must already have the JSON type its field documents.

DRF coerces quietly: ``"name": 0`` becomes ``"0"``, ``"enabled": 0`` and ``"yes"`` become
``False``/``True``, ``"ttl_minutes": "5"`` and ``5.0`` become ``5``, ``"tags": [0]`` becomes
``["0"]``. The OpenAPI document says ``string``, ``boolean``, ``integer``; a client that sends
something else has a bug it should hear about, not a guess. :class:`JsonIn` — the base of every
request-body serializer — checks each value's JSON type before DRF sees it (recursing into
lists and nested objects) and answers ``validation_error`` with one issue per offending path.
Free-form JSON (``rules``) is checked for what PostgreSQL cannot store: NUL characters and
unpaired surrogates. A string's ``max_length`` applies to the string as sent (DRF measures it
after trimming surrounding white space). A value that is not one of a choice field's choices is
refused with the choices listed (:func:`invalid_choice`, shared with the query string), where
DRF says only ``"green" is not a valid choice.``

Every serializer instance needs fields of its own (binding sets each one's name and parent).
DRF deep-copies the declared fields for that, which runs every field's ``__init__`` again, and
a nested serializer's or a list's child's too: for ``POST /inboxes`` that was 77 copies and
about a fifth of the web process's CPU per request, for a body of ``{}``. :class:`JsonIn`
copies each declared field shallowly instead (:func:`fresh_field`): the state ``__init__``
computed (validators, choices, messages) is shared read-only, what binding sets is the copy's
own, a list's child is copied and bound to the copy, a nested serializer computes its own
fields when it is first used, and a mutable ``default`` or ``initial`` is deep-copied.

Validation lends fields instead (:func:`lend`): each thread keeps one bound set of fields per
serializer class and hands it to the instance being validated, rebinding only each field's
``parent`` (what ``root``, ``context`` and ``partial`` are read through), and takes it back when
``is_valid`` returns. DRF's fields keep no state of a validation run, so a set can serve every
request of its thread in turn; a class whose fields could differ per instance (its own
``__init__`` or ``get_fields``) or that has a mutable ``default`` anywhere gets
fresh fields as above, and so does an instance whose fields were asked for before
``is_valid``. For ``POST /inboxes`` ``{}`` validation took 58 µs instead of 120 (copying and
binding 16 fields; A/B in the commit that made it).
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Mapping
from typing import Any

from rest_framework import serializers

MESSAGES = {
    "boolean": "Must be a boolean (true or false).",
    "integer": "Must be an integer.",
    "number": "Must be a number.",
    "string": "Must be a string.",
    "array": "Must be an array.",
    "object": "Must be an object.",
    "text": "Must not contain NUL characters or unpaired surrogates.",
}


# Characters that break a line somewhere (str.splitlines, the email package) or control a
# terminal: C0 controls but tab, DEL, C1 controls, and the Unicode line and paragraph separators.
LINE_BREAKING = frozenset(
    [chr(c) for c in range(0x20) if c != 0x09] + [chr(c) for c in range(0x7F, 0xA0)]
) | {"\u2028", "\u2029"}


def single_line(value: str) -> None:
    """Validator for text that ends up in a mail header (subject, display name): one line,
    no control characters. The email package refuses such headers when the message is built,
    which surfaced as a 500 long after the request was accepted."""
    if any(ch in LINE_BREAKING for ch in value):
        raise serializers.ValidationError("Must be one line without control characters.")


def _storable(text: str) -> bool:
    if "\x00" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _free_json_problem(value: Any) -> str | None:
    """Free-form JSON: every string (keys included) must be storable text."""
    if isinstance(value, str):
        return None if _storable(value) else MESSAGES["text"]
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not _storable(str(key)) or _free_json_problem(item):
                return MESSAGES["text"]
    if isinstance(value, list):
        for item in value:
            if _free_json_problem(item):
                return MESSAGES["text"]
    return None


def invalid_choice(field: serializers.Field, value: Any) -> str | None:
    """The message for ``value`` given to a choice field that does not offer it, naming every
    choice (DRF's own message names none); None for a valid choice or another kind of field."""
    if not isinstance(field, serializers.ChoiceField) or isinstance(value, list | Mapping):
        return None
    if (value == "" and field.allow_blank) or str(value) in field.choice_strings_to_values:
        return None
    choices = ", ".join(str(choice) for choice in field.choices)
    return f'"{value}" is not a valid choice; choose one of: {choices}.'


def json_type_problem(field: serializers.Field, value: Any) -> Any:
    """The validation detail for ``value`` given to ``field``, or None when its JSON type fits.

    The detail is a message, or for lists a ``{index: detail}`` mapping, like DRF's own.
    ``null`` is left to the field (``allow_null``); nested serializers check themselves.
    """
    if value is None:
        return None
    if isinstance(field, serializers.BooleanField):
        return None if isinstance(value, bool) else MESSAGES["boolean"]
    if isinstance(field, serializers.IntegerField):
        ok = isinstance(value, int) and not isinstance(value, bool)
        return None if ok else MESSAGES["integer"]
    if isinstance(field, serializers.FloatField | serializers.DecimalField):
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        return None if ok else MESSAGES["number"]
    if isinstance(field, serializers.JSONField):
        return _free_json_problem(value)
    if isinstance(field, serializers.ListField):
        if not isinstance(value, list):
            return MESSAGES["array"]
        nested = {}
        for index, item in enumerate(value):
            problem = json_type_problem(field.child, item)
            if problem is not None:
                nested[index] = problem
        return nested or None
    if isinstance(field, serializers.ListSerializer):
        return None if isinstance(value, list) else MESSAGES["array"]
    if isinstance(field, serializers.Serializer | serializers.DictField):
        return None if isinstance(value, Mapping) else MESSAGES["object"]
    if isinstance(
        field, serializers.CharField | serializers.ChoiceField | serializers.DateTimeField
    ):
        if not isinstance(value, str):
            return MESSAGES["string"]
        limit = getattr(field, "max_length", None)
        if limit is not None and len(value) > limit:
            # DRF trims surrounding white space before it measures; the limit is on the value
            # as sent (the document's maxLength), so 2,100 characters with 200 spaces is too long.
            return f"Ensure this field has no more than {limit} characters."
        return invalid_choice(field, value)
    return None


_MUTABLE = (list, dict, set)
# Field kinds copied as DRF copies them (deep), never shallowly nor lent.
_DEEP = serializers.ListSerializer | serializers.RelatedField | serializers.ManyRelatedField


def fresh_field(field: serializers.Field) -> serializers.Field:
    """An unbound copy of the declared ``field`` for one serializer instance (see module doc);
    a field kind this does not know (a list serializer, a relation) is deep-copied as DRF does."""
    if isinstance(field, _DEEP):
        return copy.deepcopy(field)
    clone = object.__new__(type(field))  # copy.copy without its __reduce_ex__ round
    clone.__dict__.update(field.__dict__)
    clone.__dict__.pop("fields", None)  # a nested serializer's cached bound fields
    for name in ("default", "initial"):
        value = clone.__dict__.get(name)
        if isinstance(value, _MUTABLE):
            setattr(clone, name, copy.deepcopy(value))
    child = getattr(clone, "child", None)
    if isinstance(clone, serializers.ListField | serializers.DictField) and child is not None:
        clone.child = fresh_field(child)  # bound by the list's __init__: only its parent changes
        clone.child.parent = clone
    return clone


def release(serializer: serializers.BaseSerializer) -> None:
    """Unbinds a serializer's fields once it has validated, so that it is freed by reference
    counting when the request lets go of it, not by the garbage collector.

    Binding makes reference cycles: the serializer holds its fields (``fields``, a
    ``BindingDict`` that points back at it), each field its ``parent``, a list field its child
    and the child its parent, a nested serializer its own fields. Every serializer a request
    validated was therefore garbage only a collection could find: about 180 objects for the
    wait's query, most of what a web process collected, and each collection of a process with
    hundreds of parked waits stalled every answer for milliseconds (docs/operations.md). The
    validated data and errors stay; ``fields`` is built again if something asks for it (from
    ``get_fields``: a serializer that adjusts its fields in ``__init__``, as the PATCH bodies do,
    must not be asked for them after validation; none is).
    """
    fields = serializer.__dict__.pop("fields", None)
    if fields is None:
        return
    for field in fields.values():
        _unbind(field)


def validated(serializer_class: type[serializers.Serializer], data: Any) -> dict[str, Any]:
    """``data`` through ``serializer_class`` (``validation_error`` when refused), the
    serializer released (:func:`release`) before the validated data is returned."""
    serializer = serializer_class(data=data)
    try:
        serializer.is_valid(raise_exception=True)
    finally:
        release(serializer)
    return dict(serializer.validated_data)


def _unbind(field: serializers.Field) -> None:
    if isinstance(field, serializers.BaseSerializer):
        release(field)
    child = getattr(field, "child", None)
    if child is not None and child.__dict__.get("parent") is field:
        _unbind(child)
        child.parent = None  # as DRF's __init__ leaves an unbound field


_lent = threading.local()  # per thread: serializer class -> its idle set of bound fields
_reusable: dict[type, bool] = {}


def _plain(field: serializers.Field) -> bool:
    """Whether ``field`` (and what it holds) can be lent across instances: no mutable
    ``default`` (validation hands it out as the value; ``initial`` only fills a browsable form),
    and of a kind :func:`fresh_field` copies shallowly."""
    if isinstance(field, _DEEP) or isinstance(field.__dict__.get("default"), _MUTABLE):
        return False
    child = getattr(field, "child", None)
    if child is not None and not _plain(child):
        return False
    if isinstance(field, serializers.Serializer):
        return _lendable(type(field)) and all(_plain(f) for f in field._declared_fields.values())
    return True


def _lendable(cls: type) -> bool:
    """Whether instances of ``cls`` may validate with lent fields (see module doc)."""
    known = _reusable.get(cls)
    if known is None:
        known = (
            issubclass(cls, JsonIn)
            and cls.__init__ is serializers.Serializer.__init__
            and cls.get_fields is JsonIn.get_fields
            and all(_plain(field) for field in cls._declared_fields.values())
        )
        _reusable[cls] = known
    return known


def lend(serializer: serializers.Serializer) -> bool:
    """Gives ``serializer`` its thread's idle set of bound fields for its class (built on first
    use), rebound to it; False (nothing lent) when it must have fields of its own."""
    cls = type(serializer)
    if "fields" in serializer.__dict__ or not _lendable(cls):
        return False
    idle = _lent.__dict__.setdefault("idle", {})
    fields = idle.pop(cls, None)
    if fields is None:
        fields = serializer.fields  # DRF's BindingDict, bound to this instance
    else:
        fields.serializer = serializer
        for field in fields.values():
            field.parent = serializer
        serializer.__dict__["fields"] = fields
    return True


def take_back(serializer: serializers.Serializer) -> None:
    """Returns the fields :func:`lend` gave ``serializer`` to its thread's idle sets; neither
    holds the other afterwards (no reference cycle, see :func:`release`)."""
    fields = serializer.__dict__.pop("fields", None)
    if fields is None:
        return
    fields.serializer = None
    for field in fields.values():
        field.parent = None
    _lent.__dict__.setdefault("idle", {})[type(serializer)] = fields


class JsonIn(serializers.Serializer):
    """Base of request-body serializers: JSON types are checked strictly (see module doc).

    A value of the wrong type is reported in place of whatever DRF would have said about it;
    the other fields are validated as usual, so one answer lists every offending path. Once
    validated, the instance lets go of its fields (:func:`release`).
    """

    def get_fields(self) -> dict[str, serializers.Field]:
        return {name: fresh_field(field) for name, field in self._declared_fields.items()}

    def is_valid(self, *, raise_exception: bool = False) -> bool:
        lent = lend(self)
        try:
            return super().is_valid(raise_exception=raise_exception)
        finally:
            if lent:
                take_back(self)
            else:
                release(self)

    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, Mapping):
            return super().to_internal_value(data)
        problems = {}
        for field in self.fields.values():
            if field.read_only:
                continue
            if field.field_name in data:
                problem = json_type_problem(field, data[field.field_name])
                if problem is not None:
                    problems[field.field_name] = problem
        if not problems:
            return super().to_internal_value(data)
        others: dict[str, Any] = {}
        try:
            super().to_internal_value({k: v for k, v in data.items() if k not in problems})
        except serializers.ValidationError as exc:
            if isinstance(exc.detail, Mapping):
                others = dict(exc.detail)
        detail = {}
        for name in self.fields:
            if name in problems:
                detail[name] = problems[name]
            elif name in others:
                detail[name] = others[name]
        raise serializers.ValidationError(detail)
