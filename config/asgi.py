"""ASGI entry point (daphne): Channels routes the long-poll and SSE paths and the MCP server
(``/mcp``, ``outbox.mcp.asgi``), Django serves the rest.

The streaming paths are raw ASGI apps (``mail.realtime``) behind Channels' session and auth
middleware, so dashboard sessions work there too.
"""

from __future__ import annotations

import gc
import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.urls import re_path  # noqa: E402

from mail.realtime import stream_app, wait_app  # noqa: E402
from outbox.mcp.asgi import mcp_app  # noqa: E402
from outbox.realtime import wait_for_decision  # noqa: E402

outbox_waiting = wait_for_decision(django_asgi_app)


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
                re_path(r"^api/v1/inboxes/(?P<inbox_id>[^/]+)/send$", outbox_waiting),
                re_path(r"^api/v1/outbox/(?P<item_id>[^/]+)$", outbox_waiting),
                re_path(r"^mcp/?$", mcp_app),  # bearer keys only: no session middleware
                re_path(r"", django_asgi_app),
            ]
        )
    }
)

# Everything loaded so far (modules, URL map, settings) lives as long as the process: keep it out
# of the garbage collector's full passes, which otherwise stall every waiter for tens of ms.
gc.collect()
gc.freeze()
