"""The full recount the storage counters are checked against: the bytes the database keeps for
an inbox's raw messages and the attachments kept apart from them, counted from the rows
themselves. On PostgreSQL ``pg_column_size()`` of each stored value (after TOAST's compression);
on SQLite, which compresses nothing, the bytes' length, read into Python."""

from __future__ import annotations

from django.db import connection

from mail.models import Attachment, RawMessage

PG_RECOUNT = """
SELECT (SELECT COALESCE(SUM(pg_column_size(r.content)), 0) FROM mail_rawmessage r
          JOIN mail_email e ON r.email_id = e.id WHERE e.inbox_id = %s)
     + (SELECT COALESCE(SUM(pg_column_size(a.content)), 0) FROM mail_attachment a
          JOIN mail_email e ON a.email_id = e.id WHERE e.inbox_id = %s AND a.content IS NOT NULL)
"""


def stored_bytes(inbox_id: str) -> int:
    """What ``inbox_id``'s ``stored_bytes`` counter should say, recounted from its rows."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(PG_RECOUNT, [inbox_id, inbox_id])
            return int(cursor.fetchone()[0])
    raw = sum(len(bytes(r.content)) for r in RawMessage.objects.filter(email__inbox_id=inbox_id))
    apart = sum(
        len(bytes(a.content))
        for a in Attachment.objects.filter(email__inbox_id=inbox_id, content__isnull=False)
    )
    return raw + apart
