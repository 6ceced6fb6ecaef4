"""How the test database is emptied after a test that commits: ``DELETE``, not ``TRUNCATE``.

pytest-django empties the database after every test that commits (``transactional_db``, every
live test) with Django's ``flush``. On PostgreSQL that is one ``TRUNCATE`` of every table, which
gives each table and each of its indexes a new file: about 150 ms each time, whatever the tables
hold, and the fast tier has a few hundred such tests. After a test the tables hold a handful of
rows, and a ``DELETE`` of each costs well under a millisecond. Django creates its foreign keys
``DEFERRABLE INITIALLY DEFERRED``, and ``execute_sql_flush`` runs the statements in one
transaction: the order of the deletes does not matter, since the constraints are checked at its
commit, when every table is empty. A flush that resets sequences (``reset_sequences=True``)
keeps Django's own SQL. SQLite's flush is ``DELETE`` already.

Installed once per test process by ``tests/conftest.py``; ``tests/test_flush.py`` checks that a
flush leaves every table empty, rows that point at each other included.
"""

from __future__ import annotations

from typing import Any

from django.db.backends.postgresql.operations import DatabaseOperations

_truncate = DatabaseOperations.sql_flush


def _delete(
    self: DatabaseOperations,
    style: Any,
    tables: list[str],
    *,
    reset_sequences: bool = False,
    allow_cascade: bool = False,
) -> list[str]:
    if reset_sequences or not tables:
        return _truncate(
            self, style, tables, reset_sequences=reset_sequences, allow_cascade=allow_cascade
        )
    return ["SET CONSTRAINTS ALL DEFERRED;"] + [
        f"DELETE FROM {self.quote_name(table)};" for table in tables
    ]


def install() -> None:
    """Makes the PostgreSQL backend's flush delete instead of truncate, in this process."""
    DatabaseOperations.sql_flush = _delete  # type: ignore[method-assign]
