"""The benchmarks' bulk loader (tests/benchmarks/scale.py, which lifecycle.py shares) writes
``mail_email`` with COPY and a column list of its own: a column added to the model without a
database default must be added there too, or ``make bench`` fails at its first COPY (it did:
``envelope_recipients``). Checked here against the migrated schema, so the suite says so first."""

from __future__ import annotations

import io

import pytest
from django.db import connection

from tests.benchmarks import scale

pytestmark = pytest.mark.django_db


def test_the_loader_names_every_column_that_has_no_default() -> None:
    listed = {name.strip().strip('"') for name in scale.COLUMNS.split(",")}
    with connection.cursor() as cursor:
        columns = connection.introspection.get_table_description(cursor, "mail_email")
    required = {
        column.name
        for column in columns
        if not column.null_ok
        and column.default is None
        and not getattr(column, "is_autofield", False)
    }
    if connection.vendor == "postgresql":  # generated columns are never written
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT column_name FROM information_schema.columns "
                "WHERE table_name = 'mail_email' AND is_generated = 'ALWAYS'"
            )
            required -= {row[0] for row in cursor.fetchall()}
    assert required <= listed, sorted(required - listed)


def test_each_row_has_a_value_per_column() -> None:
    rows = scale._rows([("inb_x", "x@pigeonhole.test")], "ws_x", 0, 3)
    assert isinstance(rows, io.BytesIO)
    lines = rows.getvalue().decode().splitlines()
    assert len(lines) == 3
    assert {len(line.split("\t")) for line in lines} == {len(scale.COLUMNS.split(","))}
