"""Fills ``Inbox.stored_bytes`` (inboxes 0004) for the mail stored before it was counted: the
raw messages' sizes plus the attachments kept apart from them. One statement, both databases;
from here on the receive path and every delete path keep the counter."""

from django.db import migrations

BACKFILL = """
UPDATE inboxes_inbox SET stored_bytes =
    (SELECT COALESCE(SUM(e.size), 0) FROM mail_email e WHERE e.inbox_id = inboxes_inbox.id)
  + (SELECT COALESCE(SUM(a.size), 0) FROM mail_attachment a
       JOIN mail_email e ON a.email_id = e.id
      WHERE e.inbox_id = inboxes_inbox.id AND a.content IS NOT NULL)
"""


class Migration(migrations.Migration):
    dependencies = [
        ("mail", "0005_body_search_index"),
        ("inboxes", "0005_inbox_stored_bytes_and_purge_index"),
    ]

    operations = [migrations.RunSQL(BACKFILL, migrations.RunSQL.noop)]
