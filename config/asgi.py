"""ASGI entry point (daphne): Channels routes the long-poll and SSE paths, Django serves the rest.

The streaming paths are raw ASGI apps (``mail.realtime``) behind Channels' session and auth
middleware, so dashboard sessions work there too.
"""

from __future__ import annotations

import gc
import os
import sys
from typing import Any

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.urls import re_path  # noqa: E402

from mail.realtime import stream_app, wait_app  # noqa: E402
from outbox.realtime import wait_for_decision  # noqa: E402

outbox_waiting = wait_for_decision(django_asgi_app)


def _raw_post_bodies() -> None:
    """Under daphne, leave POST bodies to the application.

    Twisted's ``Request`` parses every POST whose Content-Type is a form (multipart or
    urlencoded) into ``request.args`` before daphne sees it; daphne never reads them. A body
    that is not valid multipart got a bare 400 with no body and no headers (not our envelope),
    and a large upload was parsed into memory for nothing. Turning the parse off hands the raw
    body to Django, where the API answers 415 unsupported_media_type in the envelope.
    Only patched when daphne is the server (its module is loaded before the application).
    """
    module = sys.modules.get("daphne.http_protocol")
    request_class = getattr(module, "WebRequest", None)
    if request_class is None or getattr(request_class, "_raw_post_bodies", False):
        return
    original = request_class.__init__

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        self._parsePOSTFormSubmission = False

    request_class.__init__ = __init__
    request_class._raw_post_bodies = True


_raw_post_bodies()

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
                re_path(r"", django_asgi_app),
            ]
        )
    }
)

# Everything loaded so far (modules, URL map, settings) lives as long as the process: keep it out
# of the garbage collector's full passes, which otherwise stall every waiter for tens of ms.
gc.collect()
gc.freeze()
