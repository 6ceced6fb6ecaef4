"""The database backend: Django's own for each database the URL names (no replaced compiler),
and a bulk insert stores every row in one statement on either database."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.db import connection
from django.test.utils import CaptureQueriesContext

from apikeys.models import Workspace


@pytest.mark.django_db
def test_a_bulk_insert_is_one_statement_storing_every_row() -> None:
    with CaptureQueriesContext(connection) as captured:
        Workspace.objects.bulk_create(Workspace(name=f"bulk {n}") for n in range(3))
    inserts = [q["sql"] for q in captured.captured_queries if q["sql"].startswith("INSERT")]
    assert len(inserts) == 1
    assert sorted(
        Workspace.objects.filter(name__startswith="bulk ").values_list("name", flat=True)
    ) == [
        "bulk 0",
        "bulk 1",
        "bulk 2",
    ]


def test_database_urls_get_djangos_own_backends() -> None:
    engine = settings.DATABASES["default"]["ENGINE"]
    assert engine in ("django.db.backends.postgresql", "django.db.backends.sqlite3")
    assert connection.vendor == ("postgresql" if engine.endswith("postgresql") else "sqlite")
