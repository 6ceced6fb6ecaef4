"""``manage.py smtpd``: the SMTP receiver as its own process (Procfile ``smtp``)."""

from __future__ import annotations

import asyncio
import gc
import signal
import sys
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from mail.smtpd.server import start_server
from mail.smtpd.writer import writer_for

# How long a thread may hold the GIL while another waits for it (CPython's default: 5 ms). The
# event loop (the SMTP sessions) shares the interpreter with the threads of the RCPT lookups and,
# with SMTP_WRITER=thread, with the thread that writes a batch: when PostgreSQL answered, that
# writer waited up to 5 ms for a busy loop to let go, and every session of the batch waited with
# it. A shorter interval hands the GIL back sooner; of the intervals tried with the ingest
# benchmark and the writer thread, 1 ms served the sessions best, shorter and longer ones alike
# did worse (the figures are in the commit that set it).
GIL_SWITCH_INTERVAL = 0.001


def tune_interpreter() -> None:
    """Settings of the interpreter for a long-lived smtpd process."""
    gc.collect()
    gc.freeze()  # startup objects live forever: keep them out of full collections
    sys.setswitchinterval(GIL_SWITCH_INTERVAL)


class Command(BaseCommand):
    help = "Receive mail over SMTP for every hosted address (several processes may share a port)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--host",
            default="0.0.0.0",
            help="Address to listen on (default: 0.0.0.0, every interface).",
        )
        parser.add_argument(
            "--port",
            type=int,
            default=settings.SMTP_PORT,
            help="Port to listen on; several smtpd processes may share it (default: the "
            f"SMTP_PORT setting, {settings.SMTP_PORT}).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        tune_interpreter()
        asyncio.run(self._serve(options["host"], options["port"]))

    async def _serve(self, host: str, port: int) -> None:
        writer = writer_for(settings.SMTP_WRITER)
        await writer.start()  # the writer process is ready before the port opens
        server = await start_server(host, port, writer)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        self.stdout.write(f"smtpd listening on {host}:{port}", ending="\n")
        self.stdout.flush()
        await stop.wait()
        server.close()
        await server.wait_closed()
        await writer.close()  # after the batches it holds are written and answered
