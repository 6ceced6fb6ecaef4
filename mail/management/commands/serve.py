"""Embedded mode in one process: daphne (HTTP), and on the same event loop the SMTP front door
and the periodic jobs of the Celery beat schedule. ``make run`` calls this; production runs the
Procfile's processes instead.

One process keeps the in-memory channel layer meaningful: mail received over SMTP wakes waiters
and streams in the same loop that serves them.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

logger = logging.getLogger(__name__)


async def _periodic(task: Any, every: float) -> None:
    name = task.name
    while True:
        await asyncio.sleep(every)
        try:
            await sync_to_async(task, thread_sensitive=False)()
        except Exception:
            logger.exception("periodic job %s failed", name)


class Command(BaseCommand):
    help = "Serve HTTP, SMTP and the periodic jobs in one process (embedded mode)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--host",
            default="127.0.0.1",
            help="Address HTTP listens on (default: 127.0.0.1, this machine only; 0.0.0.0 for "
            "every interface).",
        )
        parser.add_argument(
            "--port", type=int, default=8000, help="Port of HTTP: API, dashboard (default: 8000)."
        )
        parser.add_argument(
            "--smtp-host",
            default="127.0.0.1",
            help="Address the SMTP receiver listens on (default: 127.0.0.1).",
        )
        parser.add_argument(
            "--smtp-port",
            type=int,
            default=settings.SMTP_PORT,
            help="Port of the SMTP receiver (default: the SMTP_PORT setting, "
            f"{settings.SMTP_PORT}).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        import daphne.server  # installs the asyncio reactor before anything imports twisted
        from daphne.access import AccessLogGenerator

        from config.asgi import application
        from config.celery import app
        from config.web import RedactingServer
        from mail.smtpd.server import start_server

        # The apps' tasks modules are imported by a Celery worker at start-up, not by the app:
        # without this every schedule entry's task is unknown here (and no periodic job ran).
        app.loader.import_default_modules()
        schedule = [
            (app.tasks[entry["task"]], entry["schedule"])
            for entry in app.conf.beat_schedule.values()
        ]
        loop = daphne.server.twisted_loop
        background: list[asyncio.Task] = []

        def ready() -> None:
            async def start_smtp() -> None:
                await start_server(options["smtp_host"], options["smtp_port"])

            background.append(loop.create_task(start_smtp()))
            for task, every in schedule:
                background.append(loop.create_task(_periodic(task, every)))
            base = f"http://{options['host']}:{options['port']}"
            self.stdout.write(
                f"Pigeonhole: {base}/  smtp://{options['smtp_host']}:{options['smtp_port']}  "
                "(Ctrl-C stops everything)\n"
                f"  dashboard  {base}/login/\n"
                f"  admin      {base}/admin/  (staff accounts: bootstrap --superuser, "
                "createsuperuser)\n"
                f"  API        {base}/api/v1/  (documentation: {base}/api/docs)"
            )
            self.stdout.flush()

        # The banner above names every address; daphne's own start-up lines at INFO ("HTTP/2
        # support not enabled", "Configuring endpoint", "Listening on") were noise in every
        # make run. Its warnings and errors still show.
        logging.getLogger("daphne.server").setLevel(logging.WARNING)
        # The access log on stdout, as the production web process (config.web) writes it:
        # with ?access_token= values redacted.
        server = RedactingServer(
            application=application,
            endpoints=[f"tcp:port={options['port']}:interface={options['host']}"],
            ready_callable=ready,
            verbosity=1,
            action_logger=AccessLogGenerator(sys.stdout),
        )
        server.run()
