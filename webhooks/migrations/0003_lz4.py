"""The event log's data and the deliveries' signed bodies are compressed with LZ4 (PostgreSQL
only; see :mod:`config.postgresql.compression`)."""

from django.db import migrations

from config.postgresql.compression import use_lz4


class Migration(migrations.Migration):
    dependencies = [
        ("webhooks", "0002_delivery_lease_token"),
    ]

    operations = [
        use_lz4(("webhooks_event", "data"), ("webhooks_delivery", "body")),
    ]
