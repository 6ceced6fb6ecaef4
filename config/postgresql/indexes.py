"""Migrations' helper: drop the ``varchar_pattern_ops`` twins Django's PostgreSQL backend adds.

Beside the index of every indexed or unique ``varchar`` column (primary keys and foreign keys
included) Django creates a second index, ``<name>_like``, so that ``LIKE 'prefix%'`` can use an
index under a non-C collation. We never match ids or foreign keys with ``LIKE``, so on the tables
the receive path writes for every message these twins are only a cost: each insert updates them.
:func:`drop_like_indexes` removes them (and puts them back when the migration is reversed); on
other databases it does nothing. The names are the ones Django's schema editor gives them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db import migrations

Columns = tuple[tuple[str, str], ...]  # (table, column)


def _like_index(schema_editor: Any, table: str, column: str) -> str:
    return schema_editor._create_index_name(table, [column], suffix="_like")


def _each(columns: Columns, sql: Callable[[str, str, str], str]) -> Callable[[Any, Any], None]:
    def run(apps: Any, schema_editor: Any) -> None:
        if schema_editor.connection.vendor != "postgresql":
            return
        for table, column in columns:
            name = schema_editor.quote_name(_like_index(schema_editor, table, column))
            schema_editor.execute(
                sql(name, schema_editor.quote_name(table), schema_editor.quote_name(column))
            )

    return run


def drop_like_indexes(*columns: tuple[str, str]) -> migrations.RunPython:
    """A migration operation dropping the ``_like`` index of each ``(table, column)``."""
    return migrations.RunPython(
        _each(columns, lambda name, table, column: f"DROP INDEX IF EXISTS {name}"),
        _each(
            columns,
            lambda name, table, column: (
                f"CREATE INDEX IF NOT EXISTS {name} ON {table} ({column} varchar_pattern_ops)"
            ),
        ),
    )
