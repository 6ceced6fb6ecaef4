"""Embedded mode in one process: daphne (HTTP), and on the same event loop the SMTP front door
and the periodic jobs of the Celery beat schedule. ``make run`` calls this; production runs the
Procfile's processes instead.

One process keeps the in-memory channel layer meaningful: mail received over SMTP wakes waiters
and streams in the same loop that serves them.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shlex
import signal
import socket
import sys
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser

from config.migrate import migrate_if_needed

logger = logging.getLogger(__name__)


async def _periodic(task: Any, every: float) -> None:
    name = task.name
    while True:
        await asyncio.sleep(every)
        try:
            await sync_to_async(task, thread_sensitive=False)()
        except Exception:
            logger.exception("periodic job %s failed", name)


def port_taken(host: str, port: int) -> bool:
    """True when nothing of ours could listen on ``host:port`` (another process holds it)."""
    family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    with socket.socket(family, kind, proto) as probe:
        # As both listeners bind: a port left in TIME_WAIT by the last run is free.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError:
            return True
    return False


class Command(BaseCommand):
    help = "Serve HTTP, SMTP and the periodic jobs in one process (embedded mode)."
    # Django's system checks load every URL and view to look at them, a quarter of a second of
    # each start; they run where configuration changes (``manage.py check``, the test suite).
    requires_system_checks: list[str] = []

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

        parser.add_argument(
            "--smtps-port",
            type=int,
            default=settings.SMTPS_PORT,
            help="Port for implicit TLS (SMTPS) (default: the SMTPS_PORT setting; unset: none).",
        )
        parser.add_argument(
            "--migrate",
            action="store_true",
            help="Apply the database's unapplied migrations first, in this process; with none "
            "left, nothing runs (make run; default: off).",
        )
        parser.add_argument(
            "--before",
            action="append",
            metavar="COMMAND",
            help="A management command and its arguments, as one string (--before 'migrate "
            "--noinput'), run in this process before serving; may be repeated. make run "
            "migrates and bootstraps this way: each separate Python process cost as much as "
            "the server's own start.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        # A port in use used to end in daphne's CRITICAL line and exit status 0 (HTTP), or in
        # a banner over an SMTP receiver that never listened (SMTP): refuse with what to do.
        for what, host, port, flag, variable in (
            ("HTTP", options["host"], options["port"], "--port", "PORT"),
            ("SMTP", options["smtp_host"], options["smtp_port"], "--smtp-port", "SMTP_PORT"),
            ("SMTPS", options["smtp_host"], options["smtps_port"], "--smtps-port", "SMTPS_PORT"),
        ):
            if port is not None and port_taken(host, port):
                raise CommandError(
                    f"The {what} port {host}:{port} is in use (another make run or manage.py "
                    f"serve?). Stop that process, or choose another port: {flag} {port + 1}, "
                    f"or make run {variable}={port + 1}."
                )
        if options["migrate"]:
            migrate_if_needed(verbosity=0)
        for command in options["before"] or ():
            name, *arguments = shlex.split(command)
            call_command(name, *arguments)
        import daphne.server  # installs the asyncio reactor before anything imports twisted
        from daphne.access import AccessLogGenerator
        from twisted.internet import reactor

        from config.asgi import application
        from config.celery import app
        from config.web import RedactingServer
        from mail.smtpd.server import start_servers
        from mail.smtpd.tls import TlsSetupError, embedded_context

        # STARTTLS always works here: the configured certificate, else a self-signed one.
        try:
            tls, fingerprint = embedded_context()
        except TlsSetupError as error:
            raise CommandError(str(error)) from None

        # The apps' tasks modules are imported by a Celery worker at start-up, not by the app:
        # without this every schedule entry's task is unknown here (and no periodic job ran).
        # Celery's Django fix-up runs Django's system checks first, as a worker's start does
        # (the URLconf, the OpenAPI generator: a quarter of a second); this command skips them
        # (requires_system_checks above), and says so to Celery with its own switch.
        skip_checks = os.environ.get("CELERY_SKIP_CHECKS")
        os.environ["CELERY_SKIP_CHECKS"] = "1"
        try:
            app.loader.import_default_modules()
        finally:
            if skip_checks is None:
                del os.environ["CELERY_SKIP_CHECKS"]
            else:
                os.environ["CELERY_SKIP_CHECKS"] = skip_checks
        schedule = [
            (app.tasks[entry["task"]], entry["schedule"])
            for entry in app.conf.beat_schedule.values()
        ]
        loop = daphne.server.twisted_loop
        background: list[asyncio.Task] = []

        failed: list[str] = []

        def ready() -> None:
            async def start_smtp() -> None:
                try:
                    await start_servers(
                        options["smtp_host"],
                        options["smtp_port"],
                        tls=tls,
                        smtps_port=options["smtps_port"],
                    )
                except OSError as error:  # taken since the check above: stop, say why
                    failed.append(f"SMTP on {options['smtp_host']}:{options['smtp_port']}: {error}")
                    reactor.stop()
                    return
                banner()  # once both ports listen

            background.append(loop.create_task(start_smtp()))
            for task, every in schedule:
                background.append(loop.create_task(_periodic(task, every)))

        def banner() -> None:
            base = f"http://{options['host']}:{options['port']}"
            smtps = f", implicit TLS on :{options['smtps_port']}" if options["smtps_port"] else ""
            self.stdout.write(
                f"Pigeonhole: {base}/  smtp://{options['smtp_host']}:{options['smtp_port']}  "
                "(Ctrl-C stops everything)\n"
                f"  SMTP TLS   STARTTLS{smtps}; certificate SHA-256 {fingerprint}\n"
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
        # Ctrl-C stops everything (the banner says so), also when the process was started with
        # SIGINT ignored (a script's `&`, a CI runner): Twisted only handles SIGINT when Python's
        # own handler is in place, and an ignored SIGINT left the server running (test_server_wheel
        # under such a runner).
        if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
            signal.signal(signal.SIGINT, signal.default_int_handler)
        server.run()
        if failed:
            raise CommandError(f"Could not listen: {failed[0]}")
