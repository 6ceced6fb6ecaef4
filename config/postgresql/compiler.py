"""Django's PostgreSQL compilers, the insert compiler without the ``UNNEST`` form (see
:mod:`config.postgresql.base` for why)."""

from __future__ import annotations

from typing import Any

from django.db.backends.postgresql.compiler import (
    SQLAggregateCompiler,
    SQLCompiler,
    SQLDeleteCompiler,
    SQLUpdateCompiler,
)
from django.db.models.sql.compiler import SQLInsertCompiler as BaseSQLInsertCompiler

__all__ = [
    "SQLAggregateCompiler",
    "SQLCompiler",
    "SQLDeleteCompiler",
    "SQLInsertCompiler",
    "SQLUpdateCompiler",
]


class SQLInsertCompiler(BaseSQLInsertCompiler):
    def assemble_as_sql(self, fields: Any, value_rows: Any) -> Any:
        return BaseSQLInsertCompiler.assemble_as_sql(self, fields, value_rows)
