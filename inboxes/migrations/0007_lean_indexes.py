"""Fewer indexes on ``inboxes_inbox``, which every ``POST /inboxes`` writes (each insert updates
each index; issue 32).

``workspace_id`` loses its own index: ``inbox_ws_list`` leads with it and serves every lookup and
cascade by it. The ``varchar_pattern_ops`` twins of ``id``, ``address`` and
``forward_set_by_key_id`` go too (see :mod:`config.postgresql.indexes`): ids and keys are
matched by equality, and the address by equality or ``icontains``, which no ``LIKE 'prefix%'``
index serves. 12 indexes become 7.
"""

import django.db.models.deletion
from django.db import migrations, models

from config.postgresql.indexes import drop_like_indexes


class Migration(migrations.Migration):
    dependencies = [
        ("apikeys", "0004_workspace_retention_settings"),
        ("inboxes", "0006_smtp_credential"),
    ]

    operations = [
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
        drop_like_indexes(
            ("inboxes_inbox", "id"),
            ("inboxes_inbox", "address"),
            ("inboxes_inbox", "forward_set_by_key_id"),
        ),
    ]
