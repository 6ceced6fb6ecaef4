"""Trigram index for ``q`` on PostgreSQL (LIKE '%term%' on the lower-cased search_text).

On SQLite (embedded mode) this is a no-op: a scan is fine at embedded sizes.
"""

from django.db import migrations


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
    schema_editor.execute(
        "CREATE INDEX IF NOT EXISTS email_search_trgm ON mail_email "
        "USING gin (search_text gin_trgm_ops)"
    )


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute("DROP INDEX IF EXISTS email_search_trgm")


class Migration(migrations.Migration):
    dependencies = [("mail", "0001_initial")]
    operations = [migrations.RunPython(forwards, backwards)]
