"""``migrate`` at a start, only when there is something to apply.

The embedded server (``make run``, ``pigeonhole-server``) migrates its database on every start.
With nothing to apply, ``migrate`` still renders the project's state and runs the post-migrate
handlers (content types, permissions: a query per model), a tenth of the start; those only have
work after a migration, so a start with none left skips them.
"""

from __future__ import annotations

from typing import Any


def migrate_if_needed(**options: Any) -> bool:
    """Runs ``migrate`` (``options`` are its own) when the default database lacks a migration;
    returns whether it ran."""
    from django.core.management import call_command
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connection)
    if not executor.migration_plan(executor.loader.graph.leaf_nodes()):
        return False
    call_command("migrate", interactive=False, **options)
    return True
