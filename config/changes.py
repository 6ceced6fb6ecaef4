"""Saving a service's changes to a row that a concurrent request may have deleted meanwhile.

A PATCH reads its object, validates the body, then writes only the changed fields. Between the
read and the write another request can delete the row (two clients, or the schema fuzzer's two
workers: a DELETE between a PATCH's lookup and its save). ``Model.save(update_fields=...)`` then
raises a bare ``DatabaseError`` ("Save with update_fields did not affect any rows"): a 500.
:func:`save_changes` locks the row first and answers the resource's own not-found error
instead, as if the PATCH had come a moment later; a row that is there is saved as before.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db import models, transaction

from config.api.errors import ApiError


def save_changes(instance: models.Model, fields: Iterable[str], *, gone: ApiError) -> None:
    """``instance.save(update_fields=fields)``, or ``gone`` raised when the row no longer exists.

    The row is locked for the save (``SELECT … FOR UPDATE``; SQLite's IMMEDIATE transactions
    already hold the database's write lock), so it cannot vanish between the check and the write.
    """
    with transaction.atomic():
        row = type(instance)._base_manager.filter(pk=instance.pk).select_for_update()
        if not row.exists():
            raise gone
        instance.save(update_fields=list(dict.fromkeys(fields)))
