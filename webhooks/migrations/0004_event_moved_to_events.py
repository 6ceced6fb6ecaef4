"""``webhooks.Event`` leaves this app's state: the event log is ``events.Event`` now, over the
same table (see ``events`` 0001). Nothing in the database changes."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("webhooks", "0003_lz4"),
        ("events", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name="Event")],
            database_operations=[],
        ),
    ]
