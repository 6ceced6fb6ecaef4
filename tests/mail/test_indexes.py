"""The indexes of the tables the receive path writes for every message, and of the inboxes
table, which every ``POST /inboxes`` writes (issue 32).

Every insert updates every index of its table, so these tables carry no index that another one
already serves (a non-unique, non-partial index whose columns begin another index's, such as a
foreign key's own index beside a composite one that leads with it, or PostgreSQL's
``varchar_pattern_ops`` twin of an id), while every foreign key still leads some index: lookups
and cascades by it never scan the table. Read through Django's introspection, on either backend.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection, models

from events.models import Event
from inboxes.models import Inbox
from labels.models import EmailLabel
from mail.models import Attachment, Email, RawMessage

HOT_TABLES = [Email, RawMessage, Attachment, EmailLabel, Event, Inbox]
WITH_FOREIGN_KEYS = [
    Email,
    RawMessage,
    Attachment,
    EmailLabel,
    Inbox,
]  # the log's ids are plain columns


def _indexes(model: type[models.Model]) -> dict[str, dict[str, Any]]:
    """Name -> introspected index: the primary key, unique constraints and the btree indexes (the
    trigram GIN index serves another purpose)."""
    partial = {index.name for index in model._meta.indexes if index.condition is not None}
    with connection.cursor() as cursor:
        found = connection.introspection.get_constraints(cursor, model._meta.db_table)
    return {
        name: {**info, "partial": name in partial}
        for name, info in found.items()
        if info["primary_key"]
        or info["unique"]
        or (info["index"] and info.get("type") in ("btree", "idx"))
    }


def _redundant(indexes: dict[str, dict[str, Any]]) -> list[tuple[str, str]]:
    """(index, the index that already serves it) pairs."""
    pairs = []
    for name, index in indexes.items():
        if index["unique"] or index["primary_key"] or index["partial"]:
            continue
        columns = index["columns"]
        for other_name, other in indexes.items():
            if other_name == name or other["partial"]:
                continue
            if other["columns"][: len(columns)] == columns:
                pairs.append((name, other_name))
                break
    return pairs


@pytest.mark.parametrize("model", HOT_TABLES, ids=lambda m: m._meta.db_table)
def test_no_index_of_a_hot_table_is_served_by_another(db: None, model: type[models.Model]) -> None:
    indexes = _indexes(model)
    assert indexes  # the primary key at least
    assert _redundant(indexes) == []


@pytest.mark.parametrize("model", WITH_FOREIGN_KEYS, ids=lambda m: m._meta.db_table)
def test_every_foreign_key_of_a_hot_table_leads_an_index(
    db: None, model: type[models.Model]
) -> None:
    leading = {index["columns"][0] for index in _indexes(model).values() if not index["partial"]}
    foreign_keys = [f.column for f in model._meta.concrete_fields if f.is_relation]
    assert foreign_keys
    assert [column for column in foreign_keys if column not in leading] == []


def test_the_redundancy_check_sees_a_foreign_keys_own_index_and_an_id_twin(
    transactional_db: None,
) -> None:
    """The check above can fail: an index on ``inbox_id`` beside ``email_inbox_list`` and a
    second index on the primary key are both reported."""
    with connection.cursor() as cursor:
        cursor.execute("CREATE INDEX test_email_inbox ON mail_email (inbox_id)")
        cursor.execute("CREATE INDEX test_email_id_twin ON mail_email (id)")
    try:
        indexes = _indexes(Email)
        found = dict(_redundant(indexes))
        assert set(found) == {"test_email_inbox", "test_email_id_twin"}
        assert found["test_email_inbox"] in {"email_inbox_list", "email_inbox_received"}
        assert indexes[found["test_email_id_twin"]]["primary_key"]
    finally:
        with connection.cursor() as cursor:
            cursor.execute("DROP INDEX test_email_inbox")
            cursor.execute("DROP INDEX test_email_id_twin")


def test_the_index_migrations_can_be_written_out_again() -> None:
    """``squashmigrations`` writes every operation out: the ``_like`` drops serialize to the
    same operation, reversible, naming the same columns."""
    from django.db.migrations.writer import OperationWriter

    from config.postgresql.indexes import CREATE, DROP, drop_like_indexes

    operation = drop_like_indexes(("mail_email", "id"), ("mail_attachment", "email_id"))
    text, imports = OperationWriter(operation).serialize()
    assert "config.postgresql.indexes._execute" in text and "import functools" in imports
    assert operation.reversible
    assert operation.code.keywords == {
        "columns": (("mail_email", "id"), ("mail_attachment", "email_id")),
        "sql": DROP,
    }
    assert operation.reverse_code.keywords["sql"] == CREATE
