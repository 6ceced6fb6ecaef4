"""How many generated examples a property test draws in this run.

``make test`` runs every property test at its full size; ``make test-fast`` (``TEST_TIER=fast``)
draws a fifth of it (at least 25), so the tier a developer runs after every edit stays under a
minute while the whole suite keeps the depth the numbers in the tests were chosen for."""

from __future__ import annotations

import os

FAST = os.environ.get("TEST_TIER") == "fast"


def examples(full: int) -> int:
    """The number of examples for a test whose full size is ``full``."""
    return max(25, full // 5) if FAST else full
