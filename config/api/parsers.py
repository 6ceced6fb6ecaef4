"""JSON request bodies with a nesting limit.

The standard library's JSON decoder recurses once per level of nesting and gives up with a
``RecursionError`` at the interpreter's limit (a body of 100,000 ``{"a":`` was a 500), and every
walk over the parsed value after it (the strict type checks of ``JsonIn``, the rules validator,
the renderer that echoes a value) recurses as deep again. So a body is measured before it is
parsed, without recursion, and one that nests deeper than :data:`MAX_DEPTH` is 400
``invalid_json`` saying so. :func:`loads` is the same for JSON that arrives another way (the
dashboard's rule editor).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import IO, Any

from django.conf import settings
from rest_framework import parsers
from rest_framework.exceptions import ParseError

from config.api.errors import InvalidJson

# The deepest body the API documents nests 5 levels (POST /labels/test: label.rules.conditions.N);
# 64 leaves room for any JSON a client means to send, and keeps every recursive walk over a
# parsed value (ours, DRF's, the json module's) far below Python's limit of 1,000 frames.
MAX_DEPTH = 64

# What the depth scan keeps of a text's UTF-8 bytes: brackets (braces become brackets) and quotes.
# A byte of a multi-byte character is never an ASCII byte, so nothing else can pose as these.
_TO_BRACKETS = bytes.maketrans(b"{}", b"[]")
_NOT_STRUCTURE = bytes(byte for byte in range(256) if byte not in b'[]{}"')


class TooDeep(ValueError):
    """The JSON text nests deeper than the limit."""

    def __init__(self, limit: int = MAX_DEPTH) -> None:
        super().__init__(f"arrays and objects nest deeper than {limit} levels")


def nests_deeper_than(text: str, limit: int = MAX_DEPTH) -> bool:
    """True when ``text``, read as JSON, opens more than ``limit`` arrays or objects inside
    one another (also when it never closes them). Linear, in string operations implemented in
    C: no Python loop over characters, and no recursion."""
    if text.count("[") + text.count("{") <= limit:
        return False  # most bodies: too few brackets to nest that deep, nothing more to do
    data = text.encode("utf-8", "surrogatepass")
    # Escapes first (a backslash pair, then an escaped quote): every quote left then opens or
    # closes a string. Then only brackets and quotes are kept, and strings are dropped with
    # the brackets they hold: the segments between quotes alternate outside, inside (an odd
    # last quote opens a string that never ends, and the decoder stops in it).
    data = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    data = data.translate(_TO_BRACKETS, _NOT_STRUCTURE).replace(b'""', b"")
    brackets = b"".join(data.split(b'"')[::2])
    # Each pass removes every innermost pair, so after k passes every balanced group at most
    # k deep is gone; a pair still there after `limit` passes sat deeper than `limit`.
    for _ in range(limit):
        reduced = brackets.replace(b"[]", b"")
        if len(reduced) == len(brackets):
            break
        brackets = reduced
    if b"[]" in brackets:
        return True
    # Without an adjacent pair, what is left is some closers then some openers that nothing
    # closes: each such opener is a level the decoder enters and never leaves.
    return brackets.count(b"[") > limit


def loads(text: str) -> Any:
    """``json.loads`` for text from outside: :class:`TooDeep` beyond :data:`MAX_DEPTH`, and
    ``NaN``/``Infinity`` refused as the API refuses them (both are ``ValueError``)."""
    if nests_deeper_than(text):
        raise TooDeep()
    return json.loads(text, parse_constant=_refuse_constant)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


class JsonParser(parsers.JSONParser):
    """DRF's JSON parser with the nesting limit (the API's only parser)."""

    def parse(
        self,
        stream: IO[bytes],
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> Any:
        encoding = (parser_context or {}).get("encoding", settings.DEFAULT_CHARSET)
        try:
            return loads(stream.read().decode(encoding))
        except TooDeep as exc:
            raise InvalidJson(f"The request body is not accepted as JSON: {exc}.") from None
        except ValueError as exc:  # also UnicodeDecodeError
            raise ParseError(f"JSON parse error - {exc}") from None
