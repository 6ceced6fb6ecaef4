"""The client's contract with the server (issue 27, item 5): every operation the client declares
(``pigeonhole_client.operations.OPERATIONS`` — the client sends nothing else, its transport
refuses an undeclared parameter) exists in the server's OpenAPI document with that method and
path, takes every query parameter, header and body field the client may send, and answers the
schema component the client reads; every field a client model declares is a property of its
component with the same JSON types. The document is the one the server serves, generated
in-process by drf-spectacular."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

import pytest
from pigeonhole_client.models import MODELS, Field, InboxRecord, Record
from pigeonhole_client.operations import OPERATIONS, Operation

from tests.conftest import Api

API_PREFIX = "/api/v1"


@pytest.fixture(scope="module")
def schema(django_db_blocker: Any) -> dict[str, Any]:
    with django_db_blocker.unblock():
        response = Api().get("/api/openapi.json")
    assert response.status_code == 200
    return response.json()


def _resolve(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        node = schema["components"]["schemas"][node["$ref"].rsplit("/", 1)[-1]]
    return node


def json_types(schema: dict[str, Any], node: dict[str, Any]) -> set[str]:
    """The JSON types a property schema allows ($ref, anyOf/oneOf/allOf and enums followed)."""
    node = _resolve(schema, node)
    if "type" in node:
        kind = node["type"]
        return set(kind) if isinstance(kind, list) else {kind}
    for combinator in ("anyOf", "oneOf", "allOf"):
        if combinator in node:
            found: set[str] = set()
            for member in node[combinator]:
                found |= json_types(schema, member)
            return found
    if "enum" in node:
        names = {type(value).__name__ for value in node["enum"]}
        return {{"str": "string", "NoneType": "null", "int": "integer"}.get(n, n) for n in names}
    if "properties" in node:
        return {"object"}
    return set()  # no constraint: any type


def _component_name(node: dict[str, Any]) -> str | None:
    ref = node.get("$ref")
    return ref.rsplit("/", 1)[-1] if ref else None


def problems(
    schema: dict[str, Any], operations: Iterable[Operation], models: Iterable[type[Record]]
) -> list[str]:
    """Every way the client's declarations disagree with ``schema``, one line each."""
    found: list[str] = []
    components = schema["components"]["schemas"]
    for op in operations:
        item = schema["paths"].get(API_PREFIX + op.path, {})
        spec = item.get(op.method.lower())
        if spec is None:
            found.append(f"{op.name}: no operation {op.method} {API_PREFIX}{op.path}")
            continue
        params = [*item.get("parameters", []), *spec.get("parameters", [])]
        by_place: dict[str, set[str]] = {}
        for param in params:
            by_place.setdefault(param["in"], set()).add(param["name"])
        for place, declared in (
            ("path", set(op.path_params)),
            ("query", set(op.query)),
            ("header", set(op.headers)),
        ):
            for name in sorted(declared - by_place.get(place, set())):
                found.append(f"{op.name}: sends {place} parameter {name!r} the operation lacks")
        if op.body is not None:
            content = spec.get("requestBody", {}).get("content", {}).get("application/json")
            if content is None:
                found.append(f"{op.name}: sends a JSON body the operation does not take")
            else:
                properties = _resolve(schema, content["schema"]).get("properties", {})
                for name in sorted(op.body - set(properties)):
                    found.append(f"{op.name}: sends body field {name!r} the operation lacks")
        if op.response is not None:
            answered = {
                _component_name(
                    body.get("content", {}).get("application/json", {}).get("schema", {})
                )
                for status, body in spec.get("responses", {}).items()
                if status.startswith("2")
            }
            if op.response not in answered:
                found.append(f"{op.name}: reads {op.response}, the operation answers {answered}")
    for model in models:
        component = components.get(model.schema)
        if component is None:
            found.append(f"{model.__name__}: no schema component {model.schema}")
            continue
        properties = component.get("properties", {})
        for attribute, field in model.fields().items():
            if field.key not in properties:
                found.append(f"{model.__name__}.{attribute}: {model.schema} has no {field.key!r}")
                continue
            allowed = json_types(schema, properties[field.key])
            if allowed and set(field.types) != allowed:
                found.append(
                    f"{model.__name__}.{attribute}: declared {sorted(field.types)}, "
                    f"{model.schema}.{field.key} is {sorted(allowed)}"
                )
    return found


def test_every_declared_operation_and_field_is_in_the_servers_openapi(
    schema: dict[str, Any],
) -> None:
    assert problems(schema, OPERATIONS.values(), MODELS) == []
    # the list reaches every operation the helpers use
    assert {"inboxes.wait", "inboxes.stream", "outbox.send", "emails.raw"} <= set(OPERATIONS)


def test_the_contract_check_finds_each_kind_of_drift(schema: dict[str, Any]) -> None:
    """The check above is not vacuous: an unknown operation, query parameter, header, body field
    or response component, and a model field that is missing or typed otherwise, each fail."""
    listing = OPERATIONS["inboxes.list"]
    send = OPERATIONS["outbox.send"]
    drifted = [
        Operation(name="ghost", method="GET", path="/ghosts"),
        dataclasses.replace(OPERATIONS["inboxes.get"], method="PUT"),
        dataclasses.replace(listing, query=listing.query | {"order"}),
        dataclasses.replace(send, headers=send.headers | {"X-Priority"}),
        dataclasses.replace(send, body=(send.body or frozenset()) | {"bcc"}),
        dataclasses.replace(OPERATIONS["emails.get"], response="InboxOut"),
    ]

    class Drifted(InboxRecord):
        email_count: Field[str] = Field("string")  # an integer on the server
        expires_at: Field[str] = Field("string")  # nullable on the server
        colour: Field[str] = Field("string")  # not a field of InboxOut

    found = problems(schema, drifted, [Drifted])
    expected = [
        "ghost: no operation GET /api/v1/ghosts",
        "inboxes.get: no operation PUT /api/v1/inboxes/{inbox_id}",
        "inboxes.list: sends query parameter 'order' the operation lacks",
        "outbox.send: sends header parameter 'X-Priority' the operation lacks",
        "outbox.send: sends body field 'bcc' the operation lacks",
        "emails.get: reads InboxOut, the operation answers {'EmailOut'}",
        "Drifted.expires_at: declared ['string'], InboxOut.expires_at is ['null', 'string']",
        "Drifted.email_count: declared ['string'], InboxOut.email_count is ['integer']",
        "Drifted.colour: InboxOut has no 'colour'",
    ]
    assert found == expected


def test_the_transport_sends_nothing_undeclared() -> None:
    """What the contract test compares is all the client can send: ``build`` refuses the rest."""
    from pigeonhole_client._core import build

    assert build("inboxes.list", query={"tag": "ci", "limit": 5}).params == {
        "tag": "ci",
        "limit": 5,
    }
    with pytest.raises(TypeError, match="no query parameter"):
        build("inboxes.list", query={"order": "newest"})
    with pytest.raises(TypeError, match="no field"):
        build("inboxes.create", body={"bcc": ["x@example.com"]})
    with pytest.raises(TypeError, match="no header"):
        build("inboxes.get", {"inbox_id": "inb_1"}, headers={"X-Priority": "1"})
    with pytest.raises(TypeError, match="path parameters"):
        build("inboxes.get", {})
    send = build("outbox.send", {"inbox_id": "inb_1"}, body={"to": ["a@b.example"]})
    assert send.headers["Idempotency-Key"].startswith("pgh-client-")  # made once, kept per call
