"""Django's private internals, used here and nowhere else (house style, idiom 10).

Django has no public way for these, so the modules that need them call this one:

- **a queryset's evaluation and its conditions** (the tenant guard, ``config.tenancy``): a hook
  before a queryset reads its rows (``QuerySet._fetch_all``, ``_result_cache``), a copy
  (``_chain``), and a hook on every condition a query receives (``sql.Query.add_q``), whose
  attributes travel with the query's clones;
- **a column's converters, the backend's batch size and the DB-API cursor** (whole rows without
  the SQL compiler, ``config.rows``): what the compiler finds for a column
  (``Field.get_col``, ``ops.get_db_converters``, ``Col.get_db_converters``),
  ``ops.bulk_batch_size``, and the driver's cursor under Django's ``CursorWrapper``;
- **a cursor of another class under Django's wrapper** (``prepared_cursor``): the PostgreSQL
  backend's server-side binding cursor class (``ServerBindingCursor``) and the wrapping that
  ``connection.cursor()`` applies (``_prepare_cursor``: queries recorded, execute wrappers);
- **the health-check flag of a connection** (``config.db``): ``health_check_done``;
- **the name of an index twin** (``config.postgresql.indexes``): the schema editor's
  ``_create_index_name``.

It was written against Django 5.2 (the pin in ``pyproject.toml``);
``tests/test_django_internals.py`` checks every internal named above and fails naming Django's
version and what moved.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Sequence
from typing import Any

from django.db import models
from django.db.models import Q, sql


class HookedQuery(sql.Query):
    """Django's SQL query, calling :meth:`on_condition` with every condition it receives
    (``filter``, ``get``, related managers and the prefetches Django builds itself all arrive
    through ``add_q``, before model instances are reduced to ids)."""

    def on_condition(self, q: Q) -> None:
        """Sees each condition before it is added."""

    def add_q(self, q_object: Q, *args: Any, **kwargs: Any) -> Any:
        self.on_condition(q_object)
        return super().add_q(q_object, *args, **kwargs)


class HookedQuerySet(models.QuerySet):
    """Django's queryset, calling :meth:`_before_evaluation` (for subclasses to override; the
    underscore keeps it, like :meth:`copy`, off the managers made ``from_queryset``) before it
    reads rows."""

    def _before_evaluation(self) -> None:
        """Runs before the rows are read (not when they were read already)."""

    @property
    def evaluated(self) -> bool:
        """Whether the rows were read (and are kept) already."""
        return self._result_cache is not None

    def copy(self) -> Any:
        """A copy to change (what ``filter`` and ``all`` start from)."""
        return self._chain()

    copy.queryset_only = True  # type: ignore[attr-defined]

    def _fetch_all(self) -> None:
        if self._result_cache is None:
            self._before_evaluation()
        super()._fetch_all()


def column_converters(field: models.Field, table: str, connection: Any) -> tuple[Any, list[Any]]:
    """The column of ``field`` in ``table`` and the functions that turn a value read from it
    into the field's Python value, as Django's compiler finds them (backend's, then field's)."""
    col = field.get_col(table)
    return col, connection.ops.get_db_converters(col) + col.get_db_converters(connection)


def bulk_batch_size(connection: Any, fields: Sequence[models.Field], rows: int) -> int:
    """How many rows of ``fields`` the database takes in one statement (its limit on
    variables, if it has one)."""
    return connection.ops.bulk_batch_size(list(fields), [None] * rows)


def driver_cursor(cursor: Any) -> Any:
    """The database driver's cursor under Django's cursor wrapper (psycopg's, for ``COPY``)."""
    return cursor.cursor


def prepared_cursor(connection: Any) -> Any:
    """``connection.cursor()``, but on PostgreSQL with ``settings.DB_PREPARED_STATEMENTS`` a
    cursor that binds parameters server-side and has each statement prepared on the connection
    at its first execution, so that PostgreSQL parses and plans it once per connection, not
    once per request. Django's own cursors bind client-side (the values spelled into the text)
    and never prepare. For statements whose text is built once (a hot read or a one-row insert);
    the driver keeps up to 100 per connection. Django's wrapper stays around it as around any
    cursor: recorded by the debug cursor, seen by execute wrappers (the tenant guard), errors
    translated."""
    from django.conf import settings

    if connection.vendor != "postgresql" or not settings.DB_PREPARED_STATEMENTS:
        return connection.cursor()
    connection.close_if_health_check_failed()
    connection.ensure_connection()
    with connection.wrap_database_errors:
        return connection._prepare_cursor(_preparing_cursor_class()(connection.connection))


@functools.cache
def _preparing_cursor_class() -> type:
    from django.db.backends.postgresql.base import ServerBindingCursor

    class PreparingCursor(ServerBindingCursor):  # type: ignore[misc, valid-type]
        """Django's server-side binding cursor, every statement prepared (``prepare=True``)."""

        def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
            kwargs.setdefault("prepare", True)
            try:
                return super().execute(query, params, **kwargs)
            finally:
                # Django's debug cursor records ``_query.query``, which psycopg sets for
                # client-side cursors only: the statement's text, its values not spelled in
                # (they never are); a statement that failed is recorded by its text too.
                text = query.encode() if isinstance(query, str) else query
                self._query = types.SimpleNamespace(query=text)

    return PreparingCursor


def health_checked(connection: Any) -> bool:
    """Whether Django counts ``connection`` as checked since its last request cycle."""
    return connection.health_check_done


def mark_health_checked(connection: Any) -> None:
    """Lets Django skip the health check (``SELECT 1``) before the connection's next query."""
    connection.health_check_done = True


def index_name(schema_editor: Any, table: str, column: str, suffix: str) -> str:
    """The name Django's schema editor gives the index of ``table.column`` with ``suffix``."""
    return schema_editor._create_index_name(table, [column], suffix=suffix)
