"""Content-Security-Policy for the dashboard: scripts, styles and frames from this origin only.

The API (JSON; Redoc at /api/docs needs its own inline bootstrap) and the Django admin are left
alone; a response that already carries a policy keeps it.
"""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

DASHBOARD_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "frame-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'"
)
EXEMPT_PREFIXES = ("/api/", "/admin/", "/static/")


class DashboardCspMiddleware:
    """Adds :data:`DASHBOARD_POLICY` to every response outside :data:`EXEMPT_PREFIXES`."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if not request.path.startswith(EXEMPT_PREFIXES):
            response.headers.setdefault("Content-Security-Policy", DASHBOARD_POLICY)
        return response
