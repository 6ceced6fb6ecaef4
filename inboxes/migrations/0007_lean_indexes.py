"""Fewer indexes on ``inboxes_inbox``, which every ``POST /inboxes`` writes (each insert updates
each index; issue 32).

``workspace_id`` loses its own index: ``inbox_ws_list`` leads with it and serves every lookup and
cascade by it. Its ``AlterField`` changes Django's state only: done by Django on the database it
would drop the foreign-key constraint and add it back (every row checked under lock), so the
index alone is dropped (:func:`config.postgresql.indexes.drop_foreign_key_indexes`). The
``varchar_pattern_ops`` twins of ``id``, ``address`` and ``forward_set_by_key_id`` go too (see
:mod:`config.postgresql.indexes`): ids and keys are matched by equality, and the address by
equality or ``icontains``, which no ``LIKE 'prefix%'`` index serves. 12 indexes become 7.
"""

import django.db.models.deletion
from django.db import migrations, models

from config.postgresql.indexes import drop_foreign_key_indexes, drop_like_indexes


class Migration(migrations.Migration):
    dependencies = [
        ("apikeys", "0004_workspace_retention_settings"),
        ("inboxes", "0006_smtp_credential"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="inbox",
                    name="workspace",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="inboxes",
                        to="apikeys.workspace",
                    ),
                ),
            ],
            database_operations=[drop_foreign_key_indexes(("inboxes_inbox", "workspace_id"))],
        ),
        drop_like_indexes(
            ("inboxes_inbox", "id"),
            ("inboxes_inbox", "address"),
            ("inboxes_inbox", "forward_set_by_key_id"),
        ),
    ]
