"""The API documentation page loads from this instance alone (issue 25, item 12).

``/api/docs`` (Redoc) asked Google for its fonts, and Redoc's bundle for a logo, which left
three console errors on a machine without internet access and told a third party who reads the
docs. Chromium loads the page from the live stack, every request it makes is recorded: none
leaves 127.0.0.1, none fails, the console stays clean, and the document is rendered.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from tests.dashboard.conftest import SCREENSHOTS
from tests.live import Stack


def test_the_api_docs_load_every_asset_from_this_instance(page: Any, stack: Stack) -> None:
    requested: list[str] = []
    failed: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    page.on("requestfailed", lambda request: failed.append(request.url))
    page.goto("/api/docs")
    page.get_by_text("Pigeonhole API").first.wait_for()
    # The operations are rendered, by their summaries.
    page.locator("h2", has_text="Create an inbox").first.wait_for()
    page.wait_for_load_state("networkidle")
    outside = [
        url
        for url in requested
        if urlsplit(url).scheme not in ("data", "blob")
        and (urlsplit(url).hostname, urlsplit(url).port) != ("127.0.0.1", stack.http_port)
    ]
    assert requested and not outside, outside
    assert not failed, failed
    # The credit keeps its text; Redoc's fallback hid the logo it would have fetched.
    assert page.get_by_text("API docs by Redocly").count() == 1
    assert page.locator("img[alt='redocly logo']").count() == 0
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)  # the viewport: the whole page is very long
    page.screenshot(path=str(SCREENSHOTS / "api-docs-desktop.png"))
