"""Fixtures of the browser security matrices: the dashboard's live stack and browser, reused as they are
(``stack``, ``browser``, ``page``, ``team``; ``login`` is a plain function imported where used)."""

from tests.dashboard.conftest import _playwright, browser, page, stack, team

__all__ = ["_playwright", "browser", "page", "stack", "team"]
