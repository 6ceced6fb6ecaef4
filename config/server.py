"""``pigeonhole-server``: embedded mode from the installed wheel, anywhere, with no checkout.

``pip install .`` (or the wheel ``pip wheel .`` builds) installs this console command. It does
what ``make run`` does in a checkout: migrates, makes sure there is a workspace with an admin key,
and serves HTTP, SMTP and the periodic jobs in one process (``manage.py serve``) on a SQLite file.
Everything the instance keeps lives in one data directory: the database, the secret key, stored
mail, the admin key (``admin-key``) and the dashboard owner's first password
(``dashboard-password``), so a second start with the same directory has the same data and key.

The command sets the environment the settings are read from itself, before Django loads them (the
project's modules read no settings at import: config/celery.py), and removes what would take the
instance out of embedded mode or out of its data directory: a CI job's ``DATABASE_URL`` or
``REDIS_URL`` is its own application's, never Pigeonhole's. Every other setting of
docs/configuration.md applies as it does everywhere.

SIGTERM and Ctrl-C (SIGINT) stop it with exit status 0: Twisted's reactor (under daphne) handles
both while serving; before that (migrating) they end the command at once, with the same status.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import secrets
import signal
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import FrameType
from typing import Any

from config.files import write_private

# Settings the command decides itself: the embedded database in the data directory, no Redis,
# the secret and the files of this instance from the data directory, eager in-process jobs.
_OWN_SETTINGS = (
    "DATABASE_URL",
    "REDIS_URL",
    "SECRET_KEY",
    "MEDIA_ROOT",
    "BEAT_SCHEDULE_FILE",
    "CELERY_TASK_ALWAYS_EAGER",
)
WORKSPACE = "Pigeonhole"
KEY_FILE = "admin-key"  # in the data directory
PASSWORD_FILE = "dashboard-password"  # in the data directory


def build_parser(environ: Mapping[str, str] | None = None) -> argparse.ArgumentParser:
    """The command's options; each default may be given by an environment variable instead."""
    environ = os.environ if environ is None else environ
    parser = argparse.ArgumentParser(
        prog="pigeonhole-server",
        description="Run Pigeonhole in embedded mode (HTTP, SMTP and the periodic jobs in one "
        "process, on SQLite): migrate the data directory's database, make sure the workspace "
        f"{WORKSPACE!r} has an admin key, and serve until SIGTERM or Ctrl-C. Every option may "
        "be given by the environment variable named in its help instead.",
    )
    parser.add_argument(
        "--data-dir",
        metavar="PATH",
        default=environ.get("PIGEONHOLE_DATA_DIR", "pigeonhole-data"),
        help="Directory of the instance's state: the SQLite database, stored mail, the secret "
        f"key, the admin key ({KEY_FILE}) and the dashboard owner's first password "
        f"({PASSWORD_FILE}); created when missing (default: pigeonhole-data in the current "
        "directory; environment: PIGEONHOLE_DATA_DIR).",
    )
    parser.add_argument(
        "--host",
        default=environ.get("PIGEONHOLE_HOST", "127.0.0.1"),
        help="Address HTTP and SMTP listen on (default: 127.0.0.1, this machine only; 0.0.0.0 "
        "for every interface; environment: PIGEONHOLE_HOST).",
    )
    parser.add_argument(
        "--http-port",
        type=int,
        default=environ.get("PIGEONHOLE_HTTP_PORT", "8000"),
        help="Port of HTTP: the API, the dashboard, /healthz (default: 8000; environment: "
        "PIGEONHOLE_HTTP_PORT).",
    )
    parser.add_argument(
        "--smtp-port",
        type=int,
        default=environ.get("PIGEONHOLE_SMTP_PORT", "2525"),
        help="Port of the SMTP receiver the application under test sends its mail to "
        "(default: 2525; environment: PIGEONHOLE_SMTP_PORT).",
    )
    parser.add_argument(
        "--domain",
        default=environ.get("PIGEONHOLE_DOMAIN", "pigeonhole.test"),
        help="Domain of the inboxes' addresses, the one mail is accepted for (default: "
        "pigeonhole.test; environment: PIGEONHOLE_DOMAIN).",
    )
    parser.add_argument(
        "--key-file",
        metavar="PATH",
        default=environ.get("PIGEONHOLE_KEY_FILE") or None,
        help="Write the admin key to PATH (mode 0600) instead of printing it, for scripts: "
        "it is there before the server listens, and the same key on every start with the "
        "same data directory; the dashboard password is not printed either (default: none, "
        f"both are printed; they are kept in DATA_DIR/{KEY_FILE} and DATA_DIR/{PASSWORD_FILE} "
        "either way; environment: PIGEONHOLE_KEY_FILE).",
    )
    return parser


def _stop_before_serving(signum: int, frame: FrameType | None) -> None:
    """SIGTERM before the server runs (migrating, bootstrapping): stop as asked, status 0.
    Nothing is half-written: the migration in progress is one transaction, rolled back."""
    raise SystemExit(0)


def _password(data_dir: Path) -> str:
    """The dashboard owner's first password: made on the first start, kept in the data
    directory. The account keeps the password it has on later starts (bootstrap)."""
    path = data_dir / PASSWORD_FILE
    if not path.exists():
        write_private(path, secrets.token_urlsafe(12))
    return path.read_text().strip()


def bootstrap(owner: str, password: str, key_file: Path) -> dict[str, Any]:
    """The workspace, its owner and the admin key (the ``bootstrap`` command's JSON).

    The password goes as one ``--password=…`` token: ``call_command`` passes a required option
    given by keyword as two tokens, and argparse takes a value beginning with ``-`` for an
    option, so one first start in 64 (a generated password beginning with ``-``) ended in
    "argument --password: expected one argument"."""
    from django.core.management import call_command

    out = io.StringIO()
    call_command(
        "bootstrap",
        f"--password={password}",
        workspace=WORKSPACE,
        owner=owner,
        superuser=True,
        key_file=str(key_file),
        json=True,
        stdout=out,
    )
    created: dict[str, Any] = json.loads(out.getvalue())
    return created


def main(argv: Sequence[str] | None = None) -> int:
    """The console command: parse, set the environment, migrate, bootstrap, serve."""
    from config.startup import starting

    starting()  # the collector runs rarely until the server is loaded (config/startup.py)
    options = build_parser().parse_args(argv)
    signal.signal(signal.SIGTERM, _stop_before_serving)
    data_dir = Path(options.data_dir).expanduser().absolute()
    data_dir.mkdir(parents=True, exist_ok=True)
    for name in _OWN_SETTINGS:
        os.environ.pop(name, None)
    os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings"
    os.environ["DATA_DIR"] = str(data_dir)
    os.environ["DATABASE_URL"] = f"sqlite:///{data_dir / 'pigeonhole.sqlite3'}"
    os.environ["INBOX_DOMAINS"] = options.domain
    os.environ["SMTP_PORT"] = str(options.smtp_port)

    import django
    from django.core.management import call_command
    from django.core.management.base import CommandError

    from config.migrate import migrate_if_needed

    django.setup()
    owner = f"admin@{options.domain}"
    password = _password(data_dir)
    try:
        print(f"pigeonhole-server: migrating {data_dir / 'pigeonhole.sqlite3'}", flush=True)
        migrate_if_needed(verbosity=0)
        created = bootstrap(owner, password, data_dir / KEY_FILE)
        if options.key_file:
            key_file = Path(options.key_file).expanduser().absolute()
            write_private(key_file, created["api_key"])
            print(f"admin key  written to {key_file}", flush=True)
        else:
            print(f"admin key  {created['api_key']}", flush=True)
        # A script's log (a CI job's, often public) gets no secret: the files hold them.
        if options.key_file:
            shown = f"{owner}, first password in {data_dir / PASSWORD_FILE}"
        else:
            said = "" if created["password_set"] else " (unless changed since)"
            shown = f"{owner} / {password}{said}"
        print(f"dashboard  {shown}; data in {data_dir}", flush=True)
        call_command(
            "serve",
            host=options.host,
            port=options.http_port,
            smtp_host=options.host,
            smtp_port=options.smtp_port,
        )
    except CommandError as error:
        print(f"pigeonhole-server: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # Ctrl-C before the server runs
        return 0
    return 0
