"""Cursor pagination: ``{"data": [...], "next_cursor": "..." | null}``.

Lists are ordered newest first by their time-ordered id, so a cursor is the last id of a page,
wrapped so clients treat it as opaque. A malformed cursor is a ``validation_error`` on ``cursor``.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from django.db.models import Model, QuerySet
from rest_framework.response import Response
from rest_framework.serializers import Serializer

from config.api.errors import ValidationFailed

M = TypeVar("M", bound=Model)

_MAGIC = "c1:"


def encode_cursor(last_id: str) -> str:
    return base64.urlsafe_b64encode((_MAGIC + last_id).encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> str:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raw = ""
    if not raw.startswith(_MAGIC) or not 3 < len(raw) <= 64 or not raw[3:].isascii():
        raise ValidationFailed.at("cursor", "Malformed cursor.")
    return raw[len(_MAGIC) :]


def paginate(
    queryset: QuerySet[M], *, limit: int, cursor: str | None
) -> tuple[Sequence[M], str | None]:
    """One page of ``queryset`` (newest first by ``pk``) and the cursor of the next page."""
    queryset = queryset.order_by("-pk")
    if cursor:
        queryset = queryset.filter(pk__lt=decode_cursor(cursor))
    rows = list(queryset[: limit + 1])
    if len(rows) > limit:
        rows = rows[:limit]
        return rows, encode_cursor(str(rows[-1].pk))
    return rows, None


def cursor_id(query: Mapping[str, Any]) -> str | None:
    """The id a page of ``query`` starts after (its ``cursor`` decoded), or None."""
    cursor = query.get("cursor")
    return decode_cursor(cursor) if cursor else None


def rows_page(
    rows: list[tuple], limit: int, render: Callable[[list[tuple]], list[dict[str, Any]]]
) -> Response:
    """A page of rows read as tuples (the primary key first, newest first, ``limit + 1`` of
    them asked for), rendered by ``render`` — no model instance per row. For the hot lists,
    whose ``render`` writes the serializer's output from the tuple (held equal to it by
    tests/test_representations.py)."""
    next_cursor = None
    if len(rows) > limit:
        rows = rows[:limit]
        next_cursor = encode_cursor(str(rows[-1][0]))
    return Response(page_body(render(rows), next_cursor))


def page_body(data: list, next_cursor: str | None) -> dict:
    return {"data": data, "next_cursor": next_cursor}


def page_response(
    queryset: QuerySet[M],
    query: Mapping[str, Any],
    out: type[Serializer],
    record: Callable[[M], Any] | None = None,
) -> Response:
    """The page that ``query`` (``limit``, ``cursor``) asks for, each row rendered by ``out``
    (after ``record``, when the serializer reads a plain record rather than the model)."""
    rows, cursor = paginate(queryset, limit=query["limit"], cursor=query.get("cursor"))
    items = [record(row) for row in rows] if record is not None else rows
    return Response(page_body(out(items, many=True).data, cursor))
