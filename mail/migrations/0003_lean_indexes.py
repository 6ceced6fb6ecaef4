"""Fewer indexes on the tables every received message writes (each insert updates each index).

``mail_email.inbox_id`` and ``workspace_id`` lose their own indexes: ``email_inbox_list`` and
``email_ws_list`` lead with them and serve every lookup and cascade by them. The
``varchar_pattern_ops`` twins of the ids go too (see :mod:`config.postgresql.indexes`).
``mail_email`` goes from 13 indexes to 8, ``mail_attachment`` from 4 to 2, ``mail_rawmessage``
from 2 to 1.
"""

import django.db.models.deletion
from django.db import migrations, models

from config.postgresql.indexes import drop_like_indexes


class Migration(migrations.Migration):
    dependencies = [
        ("apikeys", "0001_initial"),
        ("inboxes", "0001_initial"),
        ("mail", "0002_search_trigram"),
    ]

    operations = [
        migrations.AlterField(
            model_name="email",
            name="inbox",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="emails",
                to="inboxes.inbox",
            ),
        ),
        migrations.AlterField(
            model_name="email",
            name="workspace",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="apikeys.workspace",
            ),
        ),
        drop_like_indexes(
            ("mail_email", "id"),
            ("mail_rawmessage", "email_id"),
            ("mail_attachment", "id"),
            ("mail_attachment", "email_id"),
        ),
    ]
