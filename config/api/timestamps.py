"""The API's one way to write a moment: ISO 8601 in UTC with ``Z`` (spec: timestamps)."""

from __future__ import annotations

from datetime import datetime
from typing import overload


@overload
def iso(moment: datetime) -> str: ...
@overload
def iso(moment: datetime | None) -> str | None: ...
def iso(moment: datetime | None) -> str | None:
    """``2026-01-02T03:04:05.678901Z`` for an aware UTC datetime; ``None`` stays ``None``."""
    return moment.isoformat().replace("+00:00", "Z") if moment else None
