"""Schemathesis hooks and the envelope check for the schema fuzzer.

``st run`` loads this module through ``SCHEMATHESIS_HOOKS`` (see ``test_schema_fuzz``):

- ``error_envelope``: a check on every response: an error status (4xx, 5xx) carries
  ``application/json`` and exactly the spec's envelope ``{"error": {"code", "message",
  "issues"?}}`` (``issues`` a non-empty list of ``{path, message}``, present for
  ``validation_error``); a success carries no ``error`` key.
- on CPython before 3.11.8, ``ast.parse`` is serialised (see ``_serialise_ast_parse``), so the
  run can use two workers.
- ``before_call``: keeps the long-poll operations short — a missing or valid ``timeout`` (wait,
  stream) or ``wait`` (send, outbox item) above 1 s becomes 0 (the stream then sends what it has
  and ends), invalid values are left alone so the negative cases stay negative — and keeps the fuzzer from revoking the very key it runs with (that request is
  sent for a well-formed id that does not exist, a 404 case; every other key is fair game).
"""

from __future__ import annotations

import ast
import os
import sys
import threading
from typing import Any

import schemathesis
from schemathesis import CheckContext, HookContext

# Query parameters that make an operation hold its answer, per operation id, with the
# documented maximum (a larger value is negative data and must stay as generated).
HOLDING = {
    "waitForEmail": ("timeout", 120),
    "waitForEmails": ("timeout", 120),
    "streamInbox": ("timeout", 86_400),
    "getOutboxItem": ("wait", 120),
    "sendEmail": ("wait", 120),
}
ABSENT_KEY_ID = "key_" + "0" * 26


def _serialise_ast_parse() -> None:
    """Let two worker threads run safely on CPython 3.11.7: its AST validation keeps its
    recursion depth in shared state (fixed in 3.11.8), and Hypothesis parses lambda sources in
    both threads ("SystemError: AST constructor recursion depth mismatch"). One lock around
    ``ast.parse`` in this (the fuzzer's) process is enough."""
    if sys.version_info >= (3, 11, 8) or getattr(ast.parse, "_serialised", False):
        return
    lock = threading.Lock()
    parse = ast.parse

    def locked_parse(*args: Any, **kwargs: Any) -> Any:
        with lock:
            return parse(*args, **kwargs)

    locked_parse._serialised = True  # type: ignore[attr-defined]
    ast.parse = locked_parse


_serialise_ast_parse()


def envelope_problem(status: int, content_type: str, body: Any) -> str | None:
    """What is wrong with an error response, or None when it is the envelope."""
    if not content_type.startswith("application/json"):
        return f"Content-Type is {content_type or 'missing'}, not application/json"
    if not isinstance(body, dict) or set(body) != {"error"}:
        return "The body is not an object with the single key `error`"
    error = body["error"]
    if not isinstance(error, dict):
        return "`error` is not an object"
    extra = set(error) - {"code", "message", "issues"}
    if extra:
        return f"`error` has keys outside code, message, issues: {sorted(extra)}"
    code, message = error.get("code"), error.get("message")
    if not isinstance(code, str) or not code:
        return "`error.code` is not a non-empty string"
    if not isinstance(message, str) or not message:
        return "`error.message` is not a non-empty string"
    issues = error.get("issues")
    if code == "validation_error" and issues is None:
        return "A validation_error without `issues`"
    if issues is not None:
        if not isinstance(issues, list) or not issues:
            return "`error.issues` is not a non-empty list"
        for issue in issues:
            if (
                not isinstance(issue, dict)
                or set(issue) != {"path", "message"}
                or not isinstance(issue["path"], str)
                or not isinstance(issue["message"], str)
                or not issue["message"]
            ):
                return f"An issue is not {{path, message}}: {issue!r}"
    return None


@schemathesis.check
def error_envelope(ctx: CheckContext, response: Any, case: Any) -> bool | None:
    """Every error answer is ``{"error": {"code", "message", "issues"?}}`` in JSON."""
    if response.status_code < 400:
        return None
    content_type = (response.headers.get("content-type") or [""])[0].lower()
    try:
        body = response.json()
    except Exception:
        body = None
    problem = envelope_problem(response.status_code, content_type, body)
    if problem is not None:
        body_text = response.content[:500].decode("utf-8", "replace")
        raise AssertionError(f"Error body is not the envelope ({problem}): {body_text}")
    return None


def _is_valid_int(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    return isinstance(value, str) and value.isascii() and value.isdigit()


@schemathesis.hook
def before_call(context: HookContext, case: Any, kwargs: dict[str, Any]) -> None:
    operation_id = case.operation.definition.raw.get("operationId")
    holding = HOLDING.get(operation_id)
    if holding is not None:
        name, maximum = holding
        query = case.query if isinstance(case.query, dict) else {}
        absent = name not in query
        if absent or (_is_valid_int(query[name]) and 1 < int(query[name]) <= maximum):
            query[name] = 0
            case.query = query
    own = os.environ.get("FUZZ_KEY_ID")
    if (
        own
        and operation_id in {"revokeKey"}
        and isinstance(case.path_parameters, dict)
        and case.path_parameters.get("key_id") == own
    ):
        case.path_parameters["key_id"] = ABSENT_KEY_ID
