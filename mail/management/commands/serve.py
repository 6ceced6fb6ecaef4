"""Embedded mode in one process: daphne (HTTP) plus, on the same event loop, the SMTP front door
and the periodic jobs. ``make run`` calls this; production uses the Procfile's processes instead.

One process keeps the in-memory channel layer meaningful: a message received over SMTP wakes
waiters and streams in the same loop that serves them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

logger = logging.getLogger(__name__)

# Callables run once the HTTP listener is up, on daphne's event loop: each starts one embedded
# service (SMTP, jobs). Apps add theirs in ``EMBEDDED_SERVICES`` below.
EMBEDDED_SERVICES: list[str] = []


class Command(BaseCommand):
    help = "Serve HTTP (and SMTP and background jobs) in one process, for embedded mode."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--smtp-port", type=int, default=settings.SMTP_PORT)

    def handle(self, *args: Any, **options: Any) -> None:
        import daphne.server  # installs the asyncio reactor before anything imports twisted
        from django.utils.module_loading import import_string

        from config.asgi import application

        loop = daphne.server.twisted_loop
        starters: list[Callable[..., None]] = [import_string(p) for p in EMBEDDED_SERVICES]

        def ready() -> None:
            for start in starters:
                start(loop=loop, options=options)
            self.stdout.write(
                f"Pigeonhole serving http://{options['host']}:{options['port']}/ "
                f"(Ctrl-C stops everything)"
            )

        server = daphne.server.Server(
            application=application,
            endpoints=[f"tcp:port={options['port']}:interface={options['host']}"],
            ready_callable=ready,
            verbosity=1,
        )
        server.run()
