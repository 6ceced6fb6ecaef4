"""PostgreSQL only: ``Inbox.stored_bytes`` recounted as what the database stores. The counters
counted each raw message and attachment kept apart as the application wrote it; from here on the
receive and delete paths count ``pg_column_size()`` of the stored values, after TOAST's LZ4
compression (``mail.selectors.stored_bytes_of``), so the counters already there are recounted
with that measure. SQLite compresses nothing: its counters already are what it stores.

A batch of inboxes per transaction (the migration itself is not atomic), each batch's rows locked
first, in id order as the receive and delete paths lock them, so mail received or deleted while
it runs is counted exactly once. The recount reads every stored value's size from its row
(``pg_column_size`` reads the inline datum or the TOAST pointer, never the TOAST chunks): a pass
over ``mail_rawmessage`` and ``mail_attachment``, not over their TOAST tables. Reversed, it
recounts with ``length()``, the measure before it."""

from django.db import migrations, transaction

BATCH = 200  # inboxes per transaction

LOCK = "SELECT id FROM inboxes_inbox WHERE id = ANY(%s) ORDER BY id FOR UPDATE"

RECOUNT = """
UPDATE inboxes_inbox i SET stored_bytes =
    (SELECT COALESCE(SUM({size}(r.content)), 0) FROM mail_rawmessage r
       JOIN mail_email e ON r.email_id = e.id WHERE e.inbox_id = i.id)
  + (SELECT COALESCE(SUM({size}(a.content)), 0) FROM mail_attachment a
       JOIN mail_email e ON a.email_id = e.id
      WHERE e.inbox_id = i.id AND a.content IS NOT NULL)
WHERE i.id = ANY(%s)
"""


def _recount(schema_editor, size: str) -> None:
    connection = schema_editor.connection
    if connection.vendor != "postgresql":
        return
    after = ""
    while True:
        with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
            cursor.execute(
                "SELECT id FROM inboxes_inbox WHERE id > %s ORDER BY id LIMIT %s", [after, BATCH]
            )
            ids = [pk for (pk,) in cursor.fetchall()]
            if not ids:
                return
            cursor.execute(LOCK, [ids])
            cursor.execute(RECOUNT.format(size=size), [ids])
        after = ids[-1]


def forwards(apps, schema_editor):
    _recount(schema_editor, "pg_column_size")


def backwards(apps, schema_editor):
    _recount(schema_editor, "length")


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("mail", "0009_sqlite_body_search_rebuilt"),
        ("inboxes", "0006_smtp_credential"),
    ]

    operations = [migrations.RunPython(forwards, backwards)]
