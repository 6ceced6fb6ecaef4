"""The hot statements built once are prepared on the connection (``prepared_cursor``, issue 32):
PostgreSQL parses and plans getEmail's read, the inbox page and a one-row insert once per
connection, not per request; the answers are those of the unprepared path, the statements are
still recorded and seen by execute wrappers, and ``DB_PREPARED_STATEMENTS=false`` (behind
PgBouncer) prepares none."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext, override_settings

from apikeys.models import Workspace
from inboxes import selectors as inbox_selectors
from inboxes import services as inbox_services
from mail import pipeline, selectors
from mail.serializers import email_record_out
from tests.mail.messages import message

pytestmark = [pytest.mark.django_db, pytest.mark.postgresql]


def _prepared() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        return [row[0] for row in cursor.fetchall()]


def _received(workspace: Workspace) -> str:
    inbox = inbox_services.inbox_create(workspace=workspace, local_part="prep")
    delivery = pipeline.receive_one(message(to=inbox.address, subject="Hi"), to=inbox.address)
    assert delivery.email_id
    return delivery.email_id


def test_the_email_read_the_inbox_page_and_the_insert_are_prepared(workspace: Workspace) -> None:
    email_id = _received(workspace)
    with CaptureQueriesContext(connection) as queries:
        first = email_record_out(selectors.email_record(workspace, email_id))
        second = email_record_out(selectors.email_record(workspace, email_id))
        inbox_selectors.inbox_page_rows(workspace, limit=5)
    assert first == second and first["id"] == email_id
    assert len(queries) == 3  # recorded as any statement, by its text
    assert all(q["sql"] and "%s" in q["sql"] for q in queries), queries.captured_queries
    prepared = _prepared()
    assert any('FROM "mail_email" WHERE "id" = $1 OFFSET 0) e' in s for s in prepared), prepared
    assert any('FROM "inboxes_inbox" WHERE workspace_id' in s for s in prepared), prepared
    assert any(s.startswith('INSERT INTO "inboxes_inbox"') for s in prepared), prepared
    with override_settings(DB_PREPARED_STATEMENTS=False):
        unprepared = email_record_out(selectors.email_record(workspace, email_id))
    assert unprepared == first


def test_nothing_is_prepared_when_turned_off(workspace: Workspace) -> None:
    before = set(_prepared())  # the session's, from earlier tests on this connection
    with override_settings(DB_PREPARED_STATEMENTS=False):
        email_id = _received(workspace)
        selectors.email_record(workspace, email_id)
        inbox_selectors.inbox_page_rows(workspace, limit=5)
    assert set(_prepared()) == before


def test_execute_wrappers_see_prepared_statements(workspace: Workspace) -> None:
    email_id = _received(workspace)
    seen: list[str] = []

    def wrapper(execute, sql, params, many, context):  # type: ignore[no-untyped-def]
        seen.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(wrapper):
        selectors.email_record(workspace, email_id)
    assert len(seen) == 1 and 'FROM "mail_email" WHERE "id"' in seen[0]
