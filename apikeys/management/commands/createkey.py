"""Mints an API key for a workspace and prints the plain key once."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apikeys import services
from apikeys.models import KeyKind, Workspace


class Command(BaseCommand):
    help = "Create an API key: createkey WORKSPACE NAME [--scopes read,write] [--kind agent]."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("workspace", help="Workspace id (ws_…) or name.")
        parser.add_argument("name")
        parser.add_argument("--scopes", default="read,write")
        parser.add_argument("--kind", default=KeyKind.AGENT, choices=KeyKind.values)
        parser.add_argument("--expires-in-days", type=int)
        parser.add_argument("--require-approval", action="store_true")

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
        )
        self.stdout.write(created.plain)
