"""The database backend ``config.postgresql``: Django's PostgreSQL backend, but bulk inserts
compile as ``INSERT … VALUES (…), (…)`` rather than Django 5.2's ``UNNEST`` of column arrays.

Under psycopg's client-side binding (Django's default), each ``UNNEST`` array is quoted element
by element by psycopg's pure-Python list dumper: on the receive path, which inserts the emails of
a group commit in one statement, that quoting was about 8 % of the smtpd's CPU. ``VALUES`` rows
are quoted by psycopg's C dumpers; the planning time ``UNNEST`` saves only shows for thousands
of rows, and we insert a batch of tens at most.
"""

from __future__ import annotations

from django.db.backends.postgresql import base, operations


class DatabaseOperations(operations.DatabaseOperations):
    compiler_module = "config.postgresql.compiler"


class DatabaseWrapper(base.DatabaseWrapper):
    ops_class = DatabaseOperations
