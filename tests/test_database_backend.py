"""The database backend: on PostgreSQL, ``config.postgresql`` compiles bulk inserts as
``VALUES`` rows, not Django 5.2's ``UNNEST`` of column arrays (docs/architecture.md, The receive path; psycopg's
client-side quoting of the arrays cost the receive path ~8 % of the smtpd's CPU)."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.db import connection
from django.test.utils import CaptureQueriesContext

from apikeys.models import Workspace


@pytest.mark.django_db
def test_bulk_inserts_are_values_rows() -> None:
    with CaptureQueriesContext(connection) as captured:
        Workspace.objects.bulk_create(Workspace(name=f"bulk {n}") for n in range(3))
    inserts = [q["sql"] for q in captured.captured_queries if q["sql"].startswith("INSERT")]
    assert len(inserts) == 1
    assert "UNNEST" not in inserts[0].upper()
    assert inserts[0].upper().count("VALUES") == 1
    assert Workspace.objects.filter(name__startswith="bulk ").count() == 3


def test_postgresql_urls_get_our_backend() -> None:
    engine = settings.DATABASES["default"]["ENGINE"]
    assert engine in ("config.postgresql", "django.db.backends.sqlite3")
    assert connection.vendor == ("postgresql" if engine == "config.postgresql" else "sqlite")
