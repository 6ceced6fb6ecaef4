"""``bulk_insert``: the receive path's inserts without Django's SQL compiler.

``QuerySet.bulk_create`` builds its SQL anew for every call: an insert compiler, a placeholder
and a ``get_db_prep_save`` call per field and row, the ``RETURNING`` clause. For a batch of received
mail (emails of 25 columns, raw bytes, attachments, events, labels) that cost more CPU than
PostgreSQL took to store the rows. Here the statement text is built once per (table, columns,
number of rows) and cached; each value still goes through the field's ``pre_save`` and
``get_db_prep_save``, so what is stored is exactly what ``bulk_create`` stores, on PostgreSQL and
on SQLite alike (``tests/test_bulk_insert.py`` compares the two row by row). On PostgreSQL, rows
whose primary key the caller set (emails, raw bytes, attachments) go in by ``COPY``, which
psycopg formats in C; rows that need their key back use ``INSERT … RETURNING``. A ``COPY`` is
not a query Django's debug cursor records, so ``CaptureQueriesContext`` does not count it.

Only what the receive path needs: new rows of plain concrete fields, with ``RETURNING`` of an
auto-incremented primary key. No conflict handling, no multi-table inheritance, no signals
(``bulk_create`` sends none either).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any, TypeVar

from django.db import connections, models

M = TypeVar("M", bound=models.Model)


def _quote(name: str) -> str:
    return f'"{name}"'  # PostgreSQL's and SQLite's quoting of identifiers


@functools.lru_cache(maxsize=512)
def _statement(table: str, columns: tuple[str, ...], rows: int, returning: str | None) -> str:
    quote = _quote
    row = "(" + ", ".join(["%s"] * len(columns)) + ")"
    sql = (
        f"INSERT INTO {quote(table)} ({', '.join(quote(c) for c in columns)}) VALUES "
        + ", ".join([row] * rows)
    )
    return f"{sql} RETURNING {quote(returning)}" if returning else sql


MAX_PARAMETERS = 65_535  # PostgreSQL's limit of bound parameters per statement


def _fields(model: type[models.Model]) -> tuple[models.Field | None, list[models.Field]]:
    """The auto-incremented primary key (None if the key is set by the caller), and the
    fields an insert writes."""
    opts = model._meta
    auto = opts.auto_field if opts.auto_field is not None and opts.pk is opts.auto_field else None
    return auto, [f for f in opts.concrete_fields if f is not auto]


def rows_per_statement(model: type[models.Model], rows: int, using: str = "default") -> int:
    """How many of ``rows`` rows go in one statement: the database's limit (SQLite's on
    variables; PostgreSQL's on bound parameters, should server-side binding be on)."""
    _, fields = _fields(model)
    limit = connections[using].ops.bulk_batch_size(fields, [None] * rows)
    return max(1, min(limit, MAX_PARAMETERS // max(1, len(fields))))


def bulk_insert(model: type[M], objs: Iterable[M], using: str = "default") -> list[M]:
    """Inserts new instances of ``model`` as ``bulk_create`` would (defaults, ``pre_save``,
    ``get_db_prep_save``, the auto-incremented primary key set from ``RETURNING``), in as few
    statements as the database's parameter limit allows; returns them."""
    objs = list(objs)
    if not objs:
        return objs
    connection = connections[using]
    opts = model._meta
    auto, fields = _fields(model)
    columns = tuple(f.column for f in fields)
    returning = auto.column if auto is not None else None
    size = rows_per_statement(model, len(objs), using)
    with connection.cursor() as cursor:
        if auto is None and connection.vendor == "postgresql":
            _copy(cursor, opts.db_table, columns, fields, objs, connection)
            objs = _saved(objs, using)
            return objs
        for start in range(0, len(objs), size):
            chunk = objs[start : start + size]
            params = [
                field.get_db_prep_save(field.pre_save(obj, True), connection)
                for obj in chunk
                for field in fields
            ]
            sql = _statement(opts.db_table, columns, len(chunk), returning)
            cursor.execute(sql, params)
            if auto is not None:
                for obj, (pk,) in zip(chunk, cursor.fetchall(), strict=True):
                    setattr(obj, auto.attname, pk)
    return _saved(objs, using)


def _saved(objs: list[M], using: str) -> list[M]:
    for obj in objs:
        obj._state.adding = False
        obj._state.db = using
    return objs


def _copy(
    cursor: Any,
    table: str,
    columns: tuple[str, ...],
    fields: list[models.Field],
    objs: list[Any],
    connection: Any,
) -> None:
    """PostgreSQL, rows whose keys the caller set: ``COPY … FROM STDIN``. psycopg formats the
    rows in C; the statement is a few bytes, where an INSERT of a batch of mail is megabytes of
    quoted text that psycopg builds in Python and PostgreSQL parses again."""
    statement = f"COPY {_quote(table)} ({', '.join(_quote(c) for c in columns)}) FROM STDIN"
    with cursor.cursor.copy(statement) as copy:
        for obj in objs:
            copy.write_row(
                [field.get_db_prep_save(field.pre_save(obj, True), connection) for field in fields]
            )
