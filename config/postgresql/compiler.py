"""Django's PostgreSQL compilers, but the insert compiler is Django's generic one, which writes
``VALUES`` rows, instead of PostgreSQL's ``UNNEST`` form (see :mod:`config.postgresql.base` for
why)."""

from __future__ import annotations

from django.db.backends.postgresql.compiler import (
    SQLAggregateCompiler,
    SQLCompiler,
    SQLDeleteCompiler,
    SQLUpdateCompiler,
)
from django.db.models.sql.compiler import SQLInsertCompiler

__all__ = [
    "SQLAggregateCompiler",
    "SQLCompiler",
    "SQLDeleteCompiler",
    "SQLInsertCompiler",
    "SQLUpdateCompiler",
]
