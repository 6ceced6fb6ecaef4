"""The flush between tests that commit (tests/flush.py) empties every table, rows that point at
each other included (a received email with its raw message, attachment, events and the inbox and
workspace they belong to), and leaves what ``post_migrate`` always puts back."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.db import connection

from apikeys.models import Workspace
from inboxes import services as inbox_services
from mail import pipeline
from tests.mail.messages import PDF, message

pytestmark = pytest.mark.django_db(transaction=True)

# What post_migrate writes again after every flush (content types and permissions).
PUT_BACK = {"django_content_type", "auth_permission"}


def _rows() -> dict[str, int]:
    counts = {}
    with connection.cursor() as cursor:
        for table in connection.introspection.django_table_names(include_views=False):
            cursor.execute(f"SELECT count(*) FROM {connection.ops.quote_name(table)}")
            counts[table] = cursor.fetchone()[0]
    return counts


def test_a_flush_empties_every_table(workspace: Workspace) -> None:
    inbox = inbox_services.inbox_create(workspace=workspace, local_part="flush")
    raw = message(to=inbox.address, attachments=[("a.pdf", "application/pdf", PDF)])
    assert pipeline.receive_one(raw, to=inbox.address).email_id
    before = _rows()
    for table in ("mail_email", "mail_rawmessage", "mail_attachment", "inboxes_inbox"):
        assert before[table] >= 1, table
    # What pytest-django runs after a test that commits (TransactionTestCase._fixture_teardown).
    call_command("flush", verbosity=0, interactive=False)
    left = {table: n for table, n in _rows().items() if n}
    assert set(left) <= PUT_BACK, left
    if connection.vendor == "postgresql":  # the flush is tests/flush.py's
        sql = connection.ops.sql_flush(None, ["a", "b"])
        assert sql == ["SET CONSTRAINTS ALL DEFERRED;", 'DELETE FROM "a";', 'DELETE FROM "b";']
