"""``manage.py smtpd``: the SMTP receiver as its own process (Procfile ``smtp``)."""

from __future__ import annotations

import asyncio
import gc
import signal
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from mail.smtp import start_server


class Command(BaseCommand):
    help = "Receive mail over SMTP for every hosted address (several processes may share a port)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default="0.0.0.0")
        parser.add_argument("--port", type=int, default=settings.SMTP_PORT)

    def handle(self, *args: Any, **options: Any) -> None:
        gc.collect()
        gc.freeze()  # startup objects live forever: keep them out of full collections
        asyncio.run(self._serve(options["host"], options["port"]))

    async def _serve(self, host: str, port: int) -> None:
        server = await start_server(host, port)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        self.stdout.write(f"smtpd listening on {host}:{port}", ending="\n")
        self.stdout.flush()
        await stop.wait()
        server.close()
        await server.wait_closed()
