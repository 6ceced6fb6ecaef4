"""The API's JSON renderer: DRF's ``JSONRenderer`` output, written by orjson.

DRF renders with the standard library's encoder (compact separators, UTF-8, U+2028 and U+2029
escaped); orjson writes the same bytes about ten times faster, and a page of 50 inboxes spent
about 1 ms of its CPU in ``json.dumps`` (issue 32). What orjson would write differently goes
through DRF's own encoder instead: datetimes (DRF cuts them to milliseconds; the API's
serializers write their own strings anyway) and dataclasses reach it through orjson's
``default``; a value orjson refuses (an int beyond 64 bits, a key that is not a string) or a
request for indented output falls back to DRF's renderer whole. One difference is accepted: a
float that needs an exponent is written ``1e-7`` rather than ``1e-07`` (the same number).

:class:`JsonNegotiation` is DRF's content negotiation, answered at once for what nearly every
client sends (no ``Accept``, ``*/*`` or ``application/json``) to a view with the one JSON
renderer: DRF parsed the header and ranked its media types on every request, about 3 % of a
``GET /emails/{id}``'s CPU (issue 32). Anything else (``text/html``: 406) goes through DRF.
"""

from __future__ import annotations

from typing import Any

import orjson
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.utils.encoders import JSONEncoder

_OPTIONS = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS
_default = JSONEncoder().default


class JsonRenderer(JSONRenderer):
    """``JSONRenderer`` through orjson (see the module docstring)."""

    def render(
        self,
        data: Any,
        accepted_media_type: str | None = None,
        renderer_context: dict[str, Any] | None = None,
    ) -> bytes:
        if data is None:
            return b""
        if self.get_indent(accepted_media_type or "", renderer_context or {}) is None:
            try:
                out = orjson.dumps(data, default=_default, option=_OPTIONS)
            except TypeError:
                pass
            else:
                # As DRF does: JavaScript's line terminators escaped.
                if b"\xe2\x80" in out:
                    out = out.replace(b"\xe2\x80\xa8", b"\\u2028").replace(
                        b"\xe2\x80\xa9", b"\\u2029"
                    )
                return out
        return super().render(data, accepted_media_type, renderer_context)


_ANY_JSON = frozenset({"*/*", "application/json"})


class JsonNegotiation(DefaultContentNegotiation):
    """DRF's negotiation with the common case answered first (see the module docstring)."""

    def select_renderer(
        self, request: Request, renderers: list[BaseRenderer], format_suffix: str | None = None
    ) -> tuple[BaseRenderer, str]:
        if (
            format_suffix is None
            and len(renderers) == 1
            and renderers[0].media_type == "application/json"
            and request.META.get("HTTP_ACCEPT", "*/*") in _ANY_JSON
        ):
            return renderers[0], renderers[0].media_type
        return super().select_renderer(request, renderers, format_suffix)
