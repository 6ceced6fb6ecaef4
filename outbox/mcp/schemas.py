"""The tools' output schemas as published: the same constraints, in the form a client checks
fastest.

An MCP client validates every structured result against the tool's output schema (the official
Python SDK with ``jsonschema``, on every call). pydantic writes an optional field as
``anyOf: [{type: string}, {type: null}]`` and a nested model as a ``$ref`` into ``$defs``, and
``jsonschema`` evaluates each ``anyOf`` branch and resolves each reference with a validator of
its own: half the time it spent on a ``wait_for_email`` result (0.64 → 0.31 ms per result in
its validator, measured on a code email). :func:`compact` rewrites, without changing what
validates:

- a reference to ``$defs`` becomes the definition itself (the result models are not recursive;
  a recursive one raises rather than loop);
- ``anyOf`` of one typed schema and ``{type: null}`` becomes that schema with the type list
  ``[T, "null"]`` (and ``null`` added to an ``enum``): every other keyword of a JSON Schema
  applies to one instance type only, so a null meets them as it did its own branch. A branch
  with ``const``, a combinator or a type list of its own is left as it was.
"""

from __future__ import annotations

import copy
from typing import Any

NULL = {"type": "null"}
_MERGEABLE_TYPES = {"string", "integer", "number", "boolean", "object", "array"}
_KEEP_BRANCH = ("const", "anyOf", "oneOf", "allOf", "not", "$ref", "if")


def compact(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with its references inlined and its nullable ``anyOf`` merged (a copy)."""
    defs = schema.get("$defs", {})
    out = _node(schema, defs, ())
    out.pop("$defs", None)
    return out


def _node(node: Any, defs: dict[str, Any], expanding: tuple[str, ...]) -> Any:
    if isinstance(node, list):
        return [_node(item, defs, expanding) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        name = ref.removeprefix("#/$defs/")
        if name in expanding:
            raise ValueError(f"recursive output schema: {name}")
        siblings = {k: v for k, v in node.items() if k != "$ref"}
        target = _node(copy.deepcopy(defs[name]), defs, (*expanding, name))
        return {**target, **_node(siblings, defs, expanding)}
    out = {k: _node(v, defs, expanding) for k, v in node.items() if k != "$defs"}
    if "$defs" in node and not expanding:
        out["$defs"] = node["$defs"]
    merged = _nullable(out.get("anyOf"))
    if merged is not None:
        del out["anyOf"]
        out = {**merged, **out}
    return out


def _nullable(branches: Any) -> dict[str, Any] | None:
    """The one typed branch of ``anyOf: [branch, {type: null}]`` made nullable, or None."""
    if not isinstance(branches, list) or len(branches) != 2 or NULL not in branches:
        return None
    branch = branches[0] if branches[1] == NULL else branches[1]
    if not isinstance(branch, dict) or not isinstance(branch.get("type"), str):
        return None  # a type list of its own (already nullable, say) is left as it is
    if branch["type"] not in _MERGEABLE_TYPES:
        return None
    if any(key in branch for key in _KEEP_BRANCH):
        return None
    merged = {**branch, "type": [branch["type"], "null"]}
    if "enum" in merged:
        merged["enum"] = [*merged["enum"], None]
    return merged
