"""Creates (or reuses) a workspace, its owner and a new admin key; prints them."""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from apikeys import services
from config.api.errors import ApiError
from inboxes import services as inbox_services


class Command(BaseCommand):
    help = "Create or reuse a workspace with its owner, and mint an admin key with all scopes."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--workspace", required=True)
        parser.add_argument("--owner", required=True, help="The owner's e-mail (dashboard login).")
        parser.add_argument(
            "--password",
            required=True,
            help="The owner's password when the account is new; an existing account keeps its "
            "own unless --reset-password is given.",
        )
        parser.add_argument(
            "--reset-password",
            action="store_true",
            help="Replace the password of an existing owner account with --password.",
        )
        parser.add_argument(
            "--domain",
            help="A custom domain for the workspace (catch-all off). It receives mail once its "
            "TXT record is verified (printed), unless --verified.",
        )
        parser.add_argument(
            "--verified",
            action="store_true",
            help="The operator vouches for --domain: it receives mail without the DNS proof.",
        )
        parser.add_argument("--require-approval", action="store_true")
        parser.add_argument("--json", action="store_true", help="Print one JSON object.")

    def handle(self, *args: Any, **options: Any) -> None:
        domain = options.get("domain")
        if domain:
            try:  # before anything is created: never a shared domain or a subdomain of one
                domain = inbox_services.domain_name_clean(domain)
            except ApiError as error:
                raise CommandError(f"--domain: {error.message}") from None
        workspace, owner, created, password_set = services.bootstrap(
            workspace_name=options["workspace"],
            owner_email=options["owner"],
            password=options["password"],
            require_approval=options["require_approval"],
            reset_password=options["reset_password"],
        )
        record = None
        if domain:
            try:
                row = inbox_services.domain_add(
                    workspace=workspace, domain=domain, verified=options["verified"]
                )
            except ApiError as error:
                raise CommandError(f"--domain: {error.message}") from None
            domain = row.domain
            if not row.verified:
                record = f"{row.record_name} TXT {row.record_value}"
        else:
            domain = settings.INBOX_DOMAINS[0] if settings.INBOX_DOMAINS else None
        result = {
            "workspace_id": workspace.pk,
            "workspace": workspace.name,
            "api_key": created.plain,
            "key_id": created.key.pk,
            "domain": domain,
            "domain_verification": record,  # the TXT record still to publish, if any
            "owner": owner.get_username(),
            "password_set": password_set,
            "login_url": "/login/",
        }
        if options["json"]:
            self.stdout.write(json.dumps(result))
            return
        self.stdout.write(f"workspace  {workspace.name} ({workspace.pk})")
        self.stdout.write(f"owner      {owner.get_username()} (dashboard: /login/)")
        if not password_set:
            self.stdout.write(
                "password   unchanged: the account existed and keeps its own "
                "(--reset-password replaces it)"
            )
        self.stdout.write(f"domain     {domain}")
        if record:
            self.stdout.write(f"publish    {record}  (the domain receives mail once verified)")
        self.stdout.write(f"admin key  {created.plain}")
