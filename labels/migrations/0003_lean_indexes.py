"""Fewer indexes on ``labels_emaillabel``, which the receive path writes for every labelled email.

``email_id`` loses its own index (``email_label_unique`` leads with it), and the
``varchar_pattern_ops`` twins go (see :mod:`config.postgresql.indexes`): 7 indexes to 4.
"""

import django.db.models.deletion
from django.db import migrations, models

from config.postgresql.indexes import drop_like_indexes


class Migration(migrations.Migration):
    dependencies = [
        ("labels", "0002_initial"),
        ("mail", "0003_lean_indexes"),
    ]

    operations = [
        migrations.AlterField(
            model_name="emaillabel",
            name="email",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="email_labels",
                to="mail.email",
            ),
        ),
        drop_like_indexes(("labels_emaillabel", "label_id")),
    ]
