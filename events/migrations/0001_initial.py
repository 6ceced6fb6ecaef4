"""The event log moves from the webhooks app to this one without touching the database: the table
``webhooks_event`` (its rows, indexes and sequence) stays as it is, and only Django's state says
that ``events.Event`` owns it now (``webhooks`` 0004 drops ``webhooks.Event`` from its state).
The admin's content type of the model follows it, with the permissions that point at it."""

from django.db import migrations, models


def _move_content_type(apps, schema_editor):
    ContentType = apps.get_model("contenttypes", "ContentType")
    db = schema_editor.connection.alias
    if not ContentType.objects.using(db).filter(app_label="events", model="event").exists():
        ContentType.objects.using(db).filter(app_label="webhooks", model="event").update(
            app_label="events"
        )


def _restore_content_type(apps, schema_editor):
    ContentType = apps.get_model("contenttypes", "ContentType")
    db = schema_editor.connection.alias
    if not ContentType.objects.using(db).filter(app_label="webhooks", model="event").exists():
        ContentType.objects.using(db).filter(app_label="events", model="event").update(
            app_label="webhooks"
        )


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("contenttypes", "0002_remove_content_type_name"),
        ("webhooks", "0003_lz4"),  # the table is created (and compressed) there
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="Event",
                    fields=[
                        ("id", models.BigAutoField(primary_key=True, serialize=False)),
                        ("workspace_id", models.CharField(max_length=32)),
                        ("inbox_id", models.CharField(blank=True, default="", max_length=32)),
                        ("type", models.CharField(max_length=40)),
                        ("prev_id", models.BigIntegerField(blank=True, null=True)),
                        ("data", models.JSONField(default=dict)),
                        ("created_at", models.DateTimeField(auto_now_add=True, db_index=True)),
                    ],
                    options={
                        "db_table": "webhooks_event",
                        "indexes": [
                            models.Index(fields=["inbox_id", "id"], name="event_inbox_seq"),
                            models.Index(fields=["workspace_id", "-id"], name="event_ws_recent"),
                        ],
                    },
                ),
            ],
            database_operations=[],
        ),
        migrations.RunPython(_move_content_type, _restore_content_type),
    ]
