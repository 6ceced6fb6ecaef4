"""The outbound message's bodies and MIME bytes are compressed with LZ4 (PostgreSQL only; see
:mod:`config.postgresql.compression`)."""

from django.db import migrations

from config.postgresql.compression import use_lz4


class Migration(migrations.Migration):
    dependencies = [
        ("outbox", "0002_handover"),
    ]

    operations = [
        use_lz4(
            ("outbox_outboxitem", "raw"),
            ("outbox_outboxitem", "text"),
            ("outbox_outboxitem", "html"),
        ),
    ]
