"""Migrations' helper: compress the large columns the receive path writes with LZ4, not pglz.

PostgreSQL compresses a value bigger than about 2 KB before it stores it (TOAST), with pglz unless
a column says otherwise. pglz is slow: storing the raw bytes of a large message takes markedly
longer with it than with LZ4 (``python -m tests.benchmarks.compression`` compares the two, see
docs/benchmark-methods.md), and it still runs through the whole value when most of it (a base64
attachment) does not compress.
:func:`use_lz4` sets ``COMPRESSION lz4`` on the columns given (PostgreSQL 14 and later, built with
LZ4 as Debian's and the official images are) and puts them back to the default when reversed.

Only values written afterwards use LZ4; rows already stored keep pglz and read as before (each
value records its own method). Where the server lacks LZ4 the columns keep the default and the
migration says so in a warning; on other databases it does nothing.
"""

from __future__ import annotations

import functools
import logging
from typing import Any

from django.db import DatabaseError, migrations, transaction

logger = logging.getLogger(__name__)

SET = "ALTER TABLE {table} ALTER COLUMN {column} SET COMPRESSION {method}"


def _execute(
    apps: Any, schema_editor: Any, *, columns: tuple[tuple[str, str], ...], method: str
) -> None:
    """``SET COMPRESSION method`` on each ``(table, column)``, on PostgreSQL only."""
    connection = schema_editor.connection
    if connection.vendor != "postgresql":
        return
    quote = schema_editor.quote_name
    try:
        with transaction.atomic(using=connection.alias):  # a savepoint in the migration's
            for table, column in columns:
                schema_editor.execute(
                    SET.format(table=quote(table), column=quote(column), method=method)
                )
    except DatabaseError as exc:  # e.g. 'compression method lz4 not supported'
        if method == "default":
            raise
        logger.warning("columns keep PostgreSQL's default compression: %s", exc)


def use_lz4(*columns: tuple[str, str]) -> migrations.RunPython:
    """A migration operation compressing each ``(table, column)`` with LZ4 (reversible). Its
    code is a ``functools.partial`` of a module-level function, which Django's migration writer
    can serialize."""
    return migrations.RunPython(
        functools.partial(_execute, columns=columns, method="lz4"),
        functools.partial(_execute, columns=columns, method="default"),
    )
