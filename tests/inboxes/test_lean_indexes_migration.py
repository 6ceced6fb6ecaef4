"""``inboxes`` 0007 drops indexes only: the workspace's foreign key keeps its constraint (Django's
own ``AlterField`` for ``db_index=False`` dropped it and added it back, checking every row under a
lock, and rebuilt the table on SQLite), and reversing it puts the indexes back."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.test.utils import CaptureQueriesContext

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("inboxes", "0006_smtp_credential")]
AFTER = [("inboxes", "0007_lean_indexes")]


def _indexed_columns() -> list[tuple[str, ...]]:
    with connection.cursor() as cursor:
        found = connection.introspection.get_constraints(cursor, "inboxes_inbox")
    return sorted(
        tuple(info["columns"])
        for info in found.values()
        if info["index"] and not info["primary_key"] and not info["unique"]
    )


def _foreign_keys() -> list[tuple[str, ...]]:
    with connection.cursor() as cursor:
        found = connection.introspection.get_constraints(cursor, "inboxes_inbox")
    return sorted(tuple(info["columns"]) for info in found.values() if info["foreign_key"])


def test_the_migration_drops_indexes_and_never_the_foreign_key() -> None:
    keys = _foreign_keys()
    assert ("workspace_id",) in keys
    MigrationExecutor(connection).migrate(BEFORE)
    assert ("workspace_id",) in _indexed_columns()
    try:
        with CaptureQueriesContext(connection) as forwards:
            MigrationExecutor(connection).migrate(AFTER)
    finally:  # back to every app's latest migration, whatever comes after 0007 one day
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
    statements = " ".join(query["sql"].upper() for query in forwards.captured_queries)
    assert "FOREIGN KEY" not in statements and "CREATE TABLE" not in statements
    assert ("workspace_id",) not in _indexed_columns()
    assert _foreign_keys() == keys
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM pg_indexes WHERE tablename = 'inboxes_inbox' "
                "AND indexdef LIKE '%%varchar_pattern_ops%%'"
            )
            assert cursor.fetchone()[0] == 0
