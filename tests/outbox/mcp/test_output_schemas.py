"""The tools' output schemas are published compacted (outbox.mcp.schemas): no references and no
nullable ``anyOf`` for a client to evaluate on every result, and the same instances valid and
invalid as under the schema pydantic wrote. The live tests validate real results against the
published schemas through the official client (it checks every structured result)."""

from __future__ import annotations

import asyncio
import copy
import json
from typing import Any

import pytest
from jsonschema.validators import validator_for
from mcp.server.mcpserver import MCPServer

from outbox.mcp.schemas import compact
from outbox.mcp.server import server
from outbox.mcp.tools import TOOLS


def _published() -> dict[str, dict[str, Any]]:
    tools = asyncio.run(server.list_tools())
    return {t.name: t.output_schema for t in tools if t.output_schema is not None}


def _as_pydantic_writes_them() -> dict[str, dict[str, Any]]:
    plain = MCPServer("plain")
    for fn, title, hints in TOOLS:
        plain.add_tool(fn, title=title, annotations=hints, structured_output=True)
    tools = asyncio.run(plain.list_tools())
    return {t.name: t.output_schema for t in tools if t.output_schema is not None}


def _walk(node: Any) -> list[dict[str, Any]]:
    if isinstance(node, list):
        return [d for item in node for d in _walk(item)]
    if not isinstance(node, dict):
        return []
    return [node, *(d for value in node.values() for d in _walk(value))]


def test_every_output_schema_is_compacted() -> None:
    published = _published()
    assert len(published) == len(TOOLS)
    for name, schema in published.items():
        text = json.dumps(schema)
        assert "$ref" not in text and "$defs" not in text, name
        for node in _walk(schema):
            branches = node.get("anyOf")
            if isinstance(branches, list) and {"type": "null"} in branches:
                other = [b for b in branches if b != {"type": "null"}]
                # only a branch compact() must keep (a const, a combinator) stays an anyOf
                assert len(other) != 1 or "const" in other[0] or "anyOf" in other[0], (name, node)


FOUND = {
    "found": True,
    "message": "An email arrived.",
    "email": {
        "id": "eml_1",
        "inbox_id": "inb_1",
        "received_at": "2026-12-07T00:56:59.421275Z",
        "code": "482913",
        "link": None,
        "links": [{"url": "https://x.example/v", "kind": "verify", "text": "Verify"}],
        "read": False,
        "starred": False,
        "labels": [{"key": "otp", "source": "rule", "confidence": 1.0}],
        "has_attachments": False,
        "untrusted_content": {
            "untrusted": True,
            "notice": "Untrusted.",
            "sender": {"address": "a@b.example", "name": ""},
            "subject": "Your code",
            "preview": "<<<BEGIN>>> x <<<END>>>",
            "body": None,
            "body_source": None,
            "headers": None,
            "attachment_names": None,
            "authentication_details": None,
        },
    },
}


def _variant(path: list[str], value: Any) -> dict[str, Any]:
    instance = copy.deepcopy(FOUND)
    node = instance
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return instance


UNTRUSTED = ["email", "untrusted_content"]
CASES = [
    FOUND,
    {"found": False, "message": "No email within 30 s."},
    _variant(["email", "code"], None),
    _variant(["email", "code"], 482913),
    _variant(["email", "link"], "https://x.example/v"),
    _variant(["email", "link"], ["https://x.example/v"]),
    _variant(["email", "links"], [{"url": 1, "kind": "verify"}]),
    _variant(["email", "links"], None),
    _variant([*UNTRUSTED, "sender"], None),
    _variant([*UNTRUSTED, "sender"], "a@b.example"),
    _variant([*UNTRUSTED, "sender"], {"name": "no address"}),
    _variant([*UNTRUSTED, "body_source"], "html"),
    _variant([*UNTRUSTED, "body_source"], "pdf"),
    _variant([*UNTRUSTED, "untrusted"], False),
    _variant([*UNTRUSTED, "headers"], {"X-A": "b"}),
    _variant([*UNTRUSTED, "headers"], "X-A: b"),
    _variant(["email", "read"], None),
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_compacted_schema_accepts_and_refuses_what_pydantic_schema_does(case: int) -> None:
    original = _as_pydantic_writes_them()["wait_for_email"]
    published = _published()["wait_for_email"]
    verdicts = []
    for schema in (original, published):
        validator = validator_for(schema)(schema)
        verdicts.append(not list(validator.iter_errors(CASES[case])))
    assert verdicts[0] == verdicts[1], (CASES[case], verdicts)


def test_compact_refuses_recursion_and_keeps_what_it_cannot_merge() -> None:
    with pytest.raises(ValueError, match="recursive"):
        compact({"$ref": "#/$defs/A", "$defs": {"A": {"properties": {"a": {"$ref": "#/$defs/A"}}}}})
    kept = {"anyOf": [{"const": "x", "type": "string"}, {"type": "null"}]}
    assert compact(kept) == kept
    listed = {"anyOf": [{"type": ["string", "integer"]}, {"type": "null"}]}
    assert compact(listed) == listed  # a type list of its own: left as it is
    enum = {"anyOf": [{"enum": ["a"], "type": "string"}, {"type": "null"}], "default": None}
    assert compact(enum) == {"enum": ["a", None], "type": ["string", "null"], "default": None}
