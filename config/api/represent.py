"""Hand-written ``to_representation`` for the API's hot response serializers: what DRF's fields
would output, without walking its field machinery for every attribute of every object.

A response serializer (``InboxOut``, ``EmailOut`` …) still declares its fields — they are the
OpenAPI schema drf-spectacular generates and the documentation of the shape — but one that sits
on a hot read path overrides ``to_representation`` with a plain function built from the helpers
below, each the exact output of the DRF field it stands for. DRF's generic path cost about 60 µs
per inbox (25 fields, each ``get_attribute`` + ``to_representation``); a page of 50 was most of
the request's CPU (issue 32). tests/test_representations.py holds every fast path equal to DRF's
own ``Serializer.to_representation`` over the same objects, so a field added to a serializer and
forgotten here fails there.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any


def dt(value: datetime | None) -> str | None:
    """``serializers.DateTimeField()`` (ISO 8601, UTC as ``Z``; USE_TZ with TIME_ZONE UTC)."""
    if not value:
        return None
    # Read from PostgreSQL or SQLite a datetime is in UTC already (Django's connections).
    text = (value if value.tzinfo is UTC else value.astimezone(UTC)).isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


def text(value: Any) -> str | None:
    """``serializers.CharField()`` (None stays None, as DRF's serializer leaves it)."""
    return None if value is None else str(value)


def integer(value: Any) -> int | None:
    """``serializers.IntegerField()``."""
    return None if value is None else int(value)


def texts(values: Iterable[Any] | None) -> list[str | None] | None:
    """``serializers.ListField(child=serializers.CharField())``."""
    return None if values is None else [None if v is None else str(v) for v in values]


def boolean(value: Any) -> bool | None:
    """``serializers.BooleanField()`` for the booleans models hold (anything else: ``bool``)."""
    return None if value is None else bool(value)
