"""SQLite only: the body search of the 0005 migration rebuilt. On SQLite, adding a column that is
not null with a default (0007's ``envelope_recipients``) makes Django copy ``mail_email`` into a
new table, which drops the table's triggers: mail received after it never reached the FTS5
index, and ``q`` stopped finding words in bodies (embedded mode's tests/mail/test_query_language.py
found it). The index, its row map and its triggers are made anew from the emails as they are.
PostgreSQL's generated column is not affected: nothing to do there."""

import importlib

from django.db import migrations

body_search = importlib.import_module("mail.migrations.0005_body_search_index")


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor != "sqlite":
        return
    for sql in [*body_search.SQLITE_BACKWARDS, *body_search.SQLITE_FORWARDS]:
        schema_editor.execute(sql, params=None)


class Migration(migrations.Migration):
    dependencies = [
        ("mail", "0008_email_authentication"),
    ]

    operations = [migrations.RunPython(forwards, migrations.RunPython.noop)]
