"""The full-text index over the text body that ``q``'s words and phrases search
(:mod:`mail.query`, :class:`mail.selectors.BodyMatches`).

- PostgreSQL: a generated (stored) column ``body_tsv = to_tsvector('simple', left(text,
  100000))``, compressed with LZ4, and a GIN index over it. The receive path writes nothing
  more: PostgreSQL computes the column and the index in the insert (``COPY``) itself. The column
  is not a model field (Django never selects or writes it); :class:`mail.selectors.BodyMatches`
  names it. Stored rather than an index over the expression because the planner, for a word in
  1 % of the mail, walks the newest emails and tests each row: against a stored tsvector that
  is a few microseconds, against the expression it parsed each body again (130 ms for a page at
  100,000 emails, measured in the commit that made this change). ``simple`` lower-cases and
  neither stems nor drops stop words; the first 100,000 characters of a body are indexed, which
  keeps any body's tsvector far below PostgreSQL's 1 MB limit (a larger one would fail the
  insert, and lose the mail). GIN over words rather than a trigram index over the body: in the
  commit's measurement trigram made inserts of 2.4 KB bodies 2.2x slower and its index 2.3x
  larger. Adding the column rewrites the table once.
- SQLite (embedded mode): an FTS5 table ``mail_email_fts`` (the email id, unindexed, and the
  first 100,000 characters of the body) with a row table mapping each email to its FTS row,
  kept by triggers on ``mail_email`` (insert, delete, update of ``text``); existing mail is
  indexed here.
"""

from django.db import migrations

from config.postgresql.compression import use_lz4

BODY_CHARS = 100_000

PG_FORWARDS = [
    "ALTER TABLE mail_email ADD COLUMN body_tsv tsvector GENERATED ALWAYS AS "
    f"(to_tsvector('simple'::regconfig, left(text, {BODY_CHARS}))) STORED",
    "CREATE INDEX email_body_fts ON mail_email USING gin (body_tsv)",
]
PG_BACKWARDS = ["DROP INDEX IF EXISTS email_body_fts", "ALTER TABLE mail_email DROP COLUMN body_tsv"]

SQLITE_FORWARDS = [
    "CREATE VIRTUAL TABLE mail_email_fts USING fts5(email_id UNINDEXED, body)",
    "CREATE TABLE mail_email_fts_row (email_id TEXT PRIMARY KEY, fts_rowid INTEGER NOT NULL) "
    "WITHOUT ROWID",
    f"""CREATE TRIGGER mail_email_fts_insert AFTER INSERT ON mail_email BEGIN
        INSERT INTO mail_email_fts (email_id, body) VALUES (new.id, substr(new.text, 1, {BODY_CHARS}));
        INSERT INTO mail_email_fts_row (email_id, fts_rowid) VALUES (new.id, last_insert_rowid());
    END""",
    """CREATE TRIGGER mail_email_fts_delete AFTER DELETE ON mail_email BEGIN
        DELETE FROM mail_email_fts
            WHERE rowid = (SELECT fts_rowid FROM mail_email_fts_row WHERE email_id = old.id);
        DELETE FROM mail_email_fts_row WHERE email_id = old.id;
    END""",
    f"""CREATE TRIGGER mail_email_fts_update AFTER UPDATE OF text ON mail_email BEGIN
        UPDATE mail_email_fts SET body = substr(new.text, 1, {BODY_CHARS})
            WHERE rowid = (SELECT fts_rowid FROM mail_email_fts_row WHERE email_id = new.id);
    END""",
    f"INSERT INTO mail_email_fts (rowid, email_id, body) "
    f"SELECT rowid, id, substr(text, 1, {BODY_CHARS}) FROM mail_email",
    "INSERT INTO mail_email_fts_row (email_id, fts_rowid) SELECT id, rowid FROM mail_email",
]
SQLITE_BACKWARDS = [
    "DROP TRIGGER IF EXISTS mail_email_fts_update",
    "DROP TRIGGER IF EXISTS mail_email_fts_delete",
    "DROP TRIGGER IF EXISTS mail_email_fts_insert",
    "DROP TABLE IF EXISTS mail_email_fts_row",
    "DROP TABLE IF EXISTS mail_email_fts",
]


def _run(schema_editor, statements: dict) -> None:
    for sql in statements.get(schema_editor.connection.vendor, []):
        schema_editor.execute(sql, params=None)


def forwards(apps, schema_editor):
    _run(schema_editor, {"postgresql": PG_FORWARDS, "sqlite": SQLITE_FORWARDS})


def backwards(apps, schema_editor):
    _run(schema_editor, {"postgresql": PG_BACKWARDS, "sqlite": SQLITE_BACKWARDS})


class Migration(migrations.Migration):

    dependencies = [
        ('mail', '0004_lazy_attachments_lz4'),
    ]

    operations = [
        migrations.RunPython(forwards, backwards),
        use_lz4(("mail_email", "body_tsv")),
    ]
