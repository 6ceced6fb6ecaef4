"""ASGI entry point (daphne): Channels routes the long-poll and SSE paths and the MCP server
(``/mcp``, ``outbox.mcp.asgi``, imported at its first request), Django serves the rest: the
REST API through ``config.api.handler`` (its sync request cycle in one thread hop), every other
page through Django's ASGI handler.

The streaming paths (the waits, the stream) are raw ASGI apps (``mail.realtime``) behind
Channels' session and auth middleware, so dashboard sessions work there too.
"""

from __future__ import annotations

import gc
import os
from typing import Any

from django.conf import settings
from django.core.asgi import get_asgi_application

from config.startup import started

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django_asgi_app = get_asgi_application()

from config.api.handler import ApiHandler  # noqa: E402  (after Django's set-up)

api_app = ApiHandler()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.urls import re_path  # noqa: E402

from mail.realtime import emails_wait_app, stream_app, wait_app  # noqa: E402
from outbox.realtime import wait_for_decision  # noqa: E402

outbox_waiting = wait_for_decision(django_asgi_app)

_mcp_app: Any = None


async def mcp(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """``/mcp``: ``outbox.mcp.asgi.mcp_app``, imported at the first request.

    The MCP SDK (and the pydantic models it builds at import) is most of a web process's start-up,
    so a process that never sees an agent never loads it; the process that does waits about a
    second on its first /mcp request. The import runs here, on the event loop's thread: imported
    from a worker thread, the app no longer noticed a client that left mid-wait (its slot stayed
    taken; tests/outbox/mcp/test_disconnect.py)."""
    global _mcp_app
    if _mcp_app is None:
        from outbox.mcp.asgi import mcp_app

        _mcp_app = mcp_app
        gc.freeze()  # the SDK's modules live as long as the process, as the rest (below)
    await _mcp_app(scope, receive, send)


application = ProtocolTypeRouter(
    {
        "http": URLRouter(
            [
                re_path(
                    r"^api/v1/inboxes/(?P<inbox_id>[^/]+)/wait$", AuthMiddlewareStack(wait_app)
                ),
                re_path(
                    r"^api/v1/inboxes/(?P<inbox_id>[^/]+)/stream$", AuthMiddlewareStack(stream_app)
                ),
                # Before Django's /emails/{id}, which would take "wait" for an email id.
                re_path(r"^api/v1/emails/wait$", AuthMiddlewareStack(emails_wait_app)),
                re_path(r"^api/v1/inboxes/(?P<inbox_id>[^/]+)/send$", outbox_waiting),
                re_path(r"^api/v1/outbox/(?P<item_id>[^/]+)$", outbox_waiting),
                re_path(r"^mcp/?$", mcp),  # bearer keys only: no session middleware
                # The rest of the REST API: Django's sync cycle in one thread hop.
                re_path(r"^api/", api_app),
                re_path(r"", django_asgi_app),
            ]
        )
    }
)

# Everything loaded so far (modules, URL map, settings) lives as long as the process: keep it out
# of the garbage collector's full passes, which otherwise stall every waiter for tens of ms. And
# make those passes rare (settings.WEB_GC_THRESHOLDS): with Python's thresholds, the objects of
# requests in flight reach the old generation and trigger a full pass every few seconds.
gc.collect()
gc.freeze()
started()  # forget the start-up's thresholds (config/startup.py) for the web process's own:
gc.set_threshold(*settings.WEB_GC_THRESHOLDS)
