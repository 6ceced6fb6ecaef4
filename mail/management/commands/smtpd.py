"""``manage.py smtpd``: the SMTP receiver as its own process (Procfile ``smtp``).

Every process loads ``SMTP_TLS_CERT`` and ``SMTP_TLS_KEY`` itself at start (several processes
share the port with ``SO_REUSEPORT``, and any of them may take a connection); one that cannot
load them exits with the reason rather than serve without TLS.
"""

from __future__ import annotations

import asyncio
import gc
import signal
import ssl
import sys
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from config.startup import started
from mail.smtpd.server import start_servers
from mail.smtpd.tls import TlsSetupError, configured_context
from mail.smtpd.writer import writer_for

# How long a thread may hold the GIL while another waits for it (CPython's default: 5 ms). The
# event loop (the SMTP sessions) shares the interpreter with the threads of the RCPT lookups and,
# with SMTP_WRITER=thread, with the thread that writes a batch: when PostgreSQL answered, that
# writer waited up to 5 ms for a busy loop to let go, and every session of the batch waited with
# it. A shorter interval hands the GIL back sooner; of the intervals tried with the ingest
# benchmark and the writer thread, 1 ms served the sessions best, shorter and longer ones alike
# did worse (the figures are in the commit that set it).
GIL_SWITCH_INTERVAL = 0.001
# Seconds the smtpd waits, when its writer ended while starting, for a stop signal that came with
# it to be handled (the writer's end and the signal are noticed by the event loop in any order).
STOP_SIGNAL_GRACE = 0.2


def tune_interpreter() -> None:
    """Settings of the interpreter for a long-lived smtpd process."""
    gc.collect()
    gc.freeze()  # startup objects live forever: keep them out of full collections
    started()  # the collector's usual thresholds (config/startup.py)
    sys.setswitchinterval(GIL_SWITCH_INTERVAL)


class Command(BaseCommand):
    help = "Receive mail over SMTP for every hosted address (several processes may share a port)."
    # Django's system checks load the URLconf (every API view, DRF, drf-spectacular) to look at
    # it: a quarter of a second of every restart, for modules this process never uses. They run
    # where configuration changes: the release step (``migrate``), ``manage.py check --deploy``
    # and the test suite.
    requires_system_checks: list[str] = []

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

        parser.add_argument(
            "--smtps-port",
            type=int,
            default=settings.SMTPS_PORT,
            help="Port for implicit TLS (SMTPS), needs SMTP_TLS_CERT and SMTP_TLS_KEY (default: "
            "the SMTPS_PORT setting; unset: no such port).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            tls = configured_context()
        except TlsSetupError as error:
            raise CommandError(str(error)) from None
        if options["smtps_port"] is not None and tls is None:
            raise CommandError("SMTPS_PORT needs SMTP_TLS_CERT and SMTP_TLS_KEY.")
        tune_interpreter()
        asyncio.run(self._serve(options["host"], options["port"], tls, options["smtps_port"]))

    async def _serve(
        self, host: str, port: int, tls: ssl.SSLContext | None, smtps_port: int | None
    ) -> None:
        writer = writer_for(settings.SMTP_WRITER)
        # The writer starts (a process of its own sets Django up) while the port opens: a
        # restarted smtpd accepts connections at once, and a batch that arrives before the
        # writer is ready waits for it rather than the senders waiting for the port. The task
        # is created before the port opens, so the writer's start comes before any batch.
        starting = asyncio.create_task(writer.start())
        try:
            servers = await start_servers(host, port, writer, tls=tls, smtps_port=smtps_port)
        except BaseException:
            starting.cancel()
            await writer.close()
            raise
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        listening = f"smtpd listening on {host}:{port}"
        if tls is not None:
            listening += " (STARTTLS)"
        if smtps_port is not None:
            listening += f" and {host}:{smtps_port} (implicit TLS)"
        self.stdout.write(listening, ending="\n")
        self.stdout.flush()
        try:
            await starting  # a writer that cannot start ends the process, as it did before
        except Exception:
            # A stop sent to the process group (a supervisor's, Ctrl-C) reaches the writer too,
            # and ends it if it comes before the writer ignores signals: a stop, not a failure.
            # Its handler here may run just after the writer's end is noticed.
            await asyncio.sleep(STOP_SIGNAL_GRACE)
            if not stop.is_set():
                for server in servers:
                    server.close()
                raise
        await stop.wait()
        for server in servers:
            server.close()
        for server in servers:
            await server.wait_closed()
        await writer.close()  # after the batches it holds are written and answered
