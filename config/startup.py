"""The garbage collector while a process starts.

Setting Django up and importing the project allocate some 175,000 objects that live as long as
the process; the collector's passes over them while they are being made (a couple of hundred,
with CPython's default thresholds) were about a tenth of the start's CPU and freed almost
nothing. The entry points (``manage.py``, ``python -m config.web``, ``pigeonhole-server``) call
:func:`starting` first, so that it runs rarely; the long-lived processes call :func:`started`
once they are set up (after ``gc.freeze()`` of their start-up objects), which gives the default
thresholds back. A short command that ends without calling it loses nothing.
"""

from __future__ import annotations

import gc

# A young-generation pass every 50,000 allocations rather than 700 while starting.
STARTING_THRESHOLDS = (50_000, 20, 100)
_before: tuple[int, int, int] | None = None


def starting() -> None:
    """Collect rarely until :func:`started`."""
    global _before
    if _before is None:
        _before = gc.get_threshold()
        gc.set_threshold(*STARTING_THRESHOLDS)


def started() -> None:
    """The thresholds as they were before :func:`starting` (nothing if it was not called)."""
    global _before
    if _before is not None:
        gc.set_threshold(*_before)
        _before = None
