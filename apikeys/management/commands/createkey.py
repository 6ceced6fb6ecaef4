"""Mints an API key for a workspace and prints the plain key once."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apikeys import services
from apikeys.audit import Actor
from apikeys.models import KeyKind, Workspace


class Command(BaseCommand):
    help = "Create an API key: createkey WORKSPACE NAME [--scopes read,write] [--kind agent]."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "workspace", help="The workspace, by id (ws_…) or name (the oldest of that name)."
        )
        parser.add_argument("name", help="A name for the key, shown on the dashboard's Keys page.")
        parser.add_argument(
            "--scopes",
            default="read,write",
            help=f"Comma list of scopes among {', '.join(services.ALL_SCOPES)} "
            "(default: read,write).",
        )
        parser.add_argument(
            "--kind",
            default=KeyKind.AGENT,
            choices=KeyKind.values,
            help=f"What the key is for, one of {', '.join(KeyKind.values)} "
            f"(default: {KeyKind.AGENT}).",
        )
        parser.add_argument(
            "--expires-in-days",
            type=int,
            metavar="DAYS",
            help="The key stops working this many days from now (default: none, it never expires).",
        )
        parser.add_argument(
            "--require-approval",
            action="store_true",
            help="Mail sent with this key waits for a human's approval (default: off; the "
            "workspace's own setting still applies).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        ref = options["workspace"]
        workspace = (
            Workspace.objects.filter(pk=ref).first()
            or Workspace.objects.filter(name=ref).order_by("created_at").first()
        )
        if workspace is None:
            raise CommandError(f"No workspace '{ref}'.")
        scopes = [s.strip() for s in options["scopes"].split(",") if s.strip()]
        unknown = set(scopes) - set(services.ALL_SCOPES)
        if unknown or not scopes:
            raise CommandError(f"Scopes must be among {', '.join(services.ALL_SCOPES)}.")
        created = services.api_key_create(
            workspace=workspace,
            name=options["name"],
            kind=options["kind"],
            scopes=scopes,
            expires_in_days=options["expires_in_days"],
            require_approval=options["require_approval"],
            by=Actor.system("manage.py createkey"),
        )
        self.stdout.write(created.plain)
