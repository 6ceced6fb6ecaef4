"""Creates (or reuses) a workspace, its owner and an admin key; prints them.

``make run`` runs it on every start with ``--key-file``: the demo workspace's key is kept in a
file under ``var/`` (mode 0600) and shown again, instead of one more valid admin key per start.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from apikeys import services
from apikeys.audit import Actor
from config.api.errors import ApiError
from config.files import write_private
from inboxes import services as inbox_services


class Command(BaseCommand):
    help = (
        "Create or reuse a workspace with its owner, and print an admin key with all scopes: a "
        "new one, or the one --key-file keeps while it is valid."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--workspace",
            required=True,
            help="Name of the workspace; an existing workspace of that name is reused "
            "(required, no default).",
        )
        parser.add_argument(
            "--owner",
            required=True,
            help="The owner's e-mail address, their dashboard login; an existing account is "
            "reused (required, no default).",
        )
        parser.add_argument(
            "--password",
            required=True,
            help="The owner's password when the account is new; an existing account keeps its "
            "own unless --reset-password is given (required, no default).",
        )
        parser.add_argument(
            "--reset-password",
            action="store_true",
            help="Replace the password of an existing owner account with --password "
            "(default: off, an existing account keeps its password).",
        )
        parser.add_argument(
            "--superuser",
            action="store_true",
            help="Make the owner a Django superuser, who can open /admin/ with the same login "
            "(default: off; make run sets it for the demo owner).",
        )
        parser.add_argument(
            "--key-file",
            metavar="PATH",
            help="Keep the admin key in PATH (written with mode 0600, readable by its owner "
            "only): when PATH holds an active admin key of this workspace it is shown again and "
            "no new key is minted, else a new key is minted and written there (default: none, "
            "every run mints a new key; make run uses var/demo-admin-key).",
        )
        parser.add_argument(
            "--domain",
            help="A custom domain for the workspace (catch-all off). It receives mail once its "
            "TXT record is verified (printed), unless --verified (default: none, the workspace "
            "uses the shared INBOX_DOMAINS).",
        )
        parser.add_argument(
            "--verified",
            action="store_true",
            help="The operator vouches for --domain: it receives mail without the DNS proof "
            "(default: off, the TXT record must be published and verified).",
        )
        parser.add_argument(
            "--require-approval",
            action="store_true",
            help="Mail sent from the workspace waits for a human's approval; an existing "
            "workspace's setting is only ever switched on here (default: off).",
        )
        parser.add_argument(
            "--json",
            action="store_true",
            help="Print one JSON object instead of the lines for a person (default: off).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        domain = options.get("domain")
        if domain:
            try:  # before anything is created: never a shared domain or a subdomain of one
                domain = inbox_services.domain_name_clean(domain)
            except ApiError as error:
                raise CommandError(f"--domain: {error.message}") from None
        key_file = Path(options["key_file"]) if options["key_file"] else None
        kept = _read_key(key_file) if key_file else None
        workspace, owner, created, password_set = services.bootstrap(
            workspace_name=options["workspace"],
            owner_email=options["owner"],
            password=options["password"],
            require_approval=options["require_approval"],
            reset_password=options["reset_password"],
            superuser=options["superuser"],
            keep_key=kept,
        )
        key_new = created.plain != kept
        if key_file and key_new:
            write_private(key_file, created.plain)
        elif key_file:
            key_file.chmod(0o600)  # an admin key: never left readable by others
        record = None
        if domain:
            try:
                row = inbox_services.domain_add(
                    workspace=workspace,
                    domain=domain,
                    verified=options["verified"],
                    by=Actor.system("manage.py bootstrap"),
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
            "key_new": key_new,  # False: the active key of --key-file, shown again
            "key_file": str(key_file) if key_file else None,
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
        if key_file and not key_new:
            self.stdout.write(f"           the same key as before, kept in {key_file}")
        elif key_file:
            self.stdout.write(
                f"           a new key, kept in {key_file} and shown again on the next run "
                "(revoke it on the dashboard's Keys page and the next run mints another)"
            )
        if options["superuser"]:
            self.stdout.write(f"admin      /admin/ with the owner's login ({owner.get_username()})")


def _read_key(path: Path) -> str | None:
    """The key an earlier run wrote to ``path``, or None when there is none yet."""
    try:
        return path.read_text().strip() or None
    except FileNotFoundError:
        return None
