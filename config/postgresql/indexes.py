"""Migrations' helpers: drop the ``varchar_pattern_ops`` twins Django's PostgreSQL backend adds,
and a foreign key's own index without touching its constraint.

Beside the index of every indexed or unique ``varchar`` column (primary keys and foreign keys
included) Django creates a second index, ``<name>_like``, so that ``LIKE 'prefix%'`` can use an
index under a non-C collation. We never match ids or foreign keys with ``LIKE``, so on the tables
the receive path writes for every message these twins are only a cost: each insert updates them.
:func:`drop_like_indexes` removes them (and puts them back when the migration is reversed); on
other databases it does nothing. The names are the ones Django's schema editor gives them
(:func:`config.django_adapter.index_name`).
"""

from __future__ import annotations

import functools
from typing import Any

from django.db import migrations

from config.django_adapter import index_name

DROP = "DROP INDEX IF EXISTS {name}"
CREATE = "CREATE INDEX IF NOT EXISTS {name} ON {table} ({column} varchar_pattern_ops)"
CREATE_PLAIN = "CREATE INDEX IF NOT EXISTS {name} ON {table} ({column})"


def _execute(
    apps: Any, schema_editor: Any, *, columns: tuple[tuple[str, str], ...], sql: str
) -> None:
    """``sql`` for the ``_like`` index of each ``(table, column)``, on PostgreSQL only."""
    if schema_editor.connection.vendor != "postgresql":
        return
    quote = schema_editor.quote_name
    for table, column in columns:
        name = index_name(schema_editor, table, column, "_like")
        schema_editor.execute(
            sql.format(name=quote(name), table=quote(table), column=quote(column))
        )


def drop_like_indexes(*columns: tuple[str, str]) -> migrations.RunPython:
    """A migration operation dropping the ``_like`` index of each ``(table, column)``. Its code
    is a ``functools.partial`` of a module-level function, which Django's migration writer
    can serialize (``squashmigrations`` copies the operation as it is)."""
    return migrations.RunPython(
        functools.partial(_execute, columns=columns, sql=DROP),
        functools.partial(_execute, columns=columns, sql=CREATE),
    )


def _execute_own(
    apps: Any, schema_editor: Any, *, columns: tuple[tuple[str, str], ...], forwards: bool
) -> None:
    """Drops (or, backwards, creates) the plain index Django gives each ``(table, column)``, on
    every database, and its ``_like`` twin on PostgreSQL."""
    quote = schema_editor.quote_name
    for table, column in columns:
        name = index_name(schema_editor, table, column, "")
        sql = DROP if forwards else CREATE_PLAIN
        schema_editor.execute(
            sql.format(name=quote(name), table=quote(table), column=quote(column))
        )
    _execute(apps, schema_editor, columns=columns, sql=DROP if forwards else CREATE)


def drop_foreign_key_indexes(*columns: tuple[str, str]) -> migrations.RunPython:
    """The database side of ``ForeignKey(db_index=False)`` for each ``(table, column)``: its
    index (and ``_like`` twin) dropped, put back when reversed. Django's own ``AlterField`` for
    that change drops the foreign-key constraint and adds it back, which checks every row under
    a lock on both tables (and rebuilds the table on SQLite); a migration pairs this with the
    ``AlterField`` as state only (``SeparateDatabaseAndState``)."""
    return migrations.RunPython(
        functools.partial(_execute_own, columns=columns, forwards=True),
        functools.partial(_execute_own, columns=columns, forwards=False),
    )
