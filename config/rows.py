"""Whole model rows in and out of the receive path without Django's SQL compiler.

Every batch of received mail reads its inboxes (locked), their workspaces, the enabled labels
and the webhook endpoints, and inserts emails, raw bytes, attachments, labels and events. The
ORM compiles each of those statements anew on every call (select lists, joins, placeholders, a
``get_db_prep_save`` call per field and row, the ``RETURNING`` clause): for a batch of mail that
cost more CPU than PostgreSQL took to do the work. Here the statement text is built once per
shape and cached:

- :func:`select_rows` reads whole rows of one model with a fixed ``WHERE``, each column still
  converted as the ORM converts it (JSON, for one), into instances as the ORM makes them
  (``Model.from_db``);
- :func:`insert` stores one new instance as ``save()`` would, by a plain ``INSERT``;
- :func:`insert_pair` stores two in one statement under a condition (PostgreSQL: a new inbox
  and its first event, committed in one round trip);
- :func:`bulk_insert` stores new instances exactly as ``bulk_create`` stores them (each value
  through the field's ``pre_save`` and ``get_db_prep_save``). On PostgreSQL, rows whose primary
  key the caller set (emails, raw bytes, attachments) go in by ``COPY``, which psycopg formats in
  C; rows that need their key back use ``INSERT … RETURNING``. A ``COPY`` is not a query
  Django's debug cursor records, so ``CaptureQueriesContext`` does not count it. The ``COPY``
  is binary when every column has a type in :data:`BINARY_COPY_TYPES` (all the receive path's
  tables do): bytes go as they are, where the text format spells each byte of a raw message as
  two hex digits that PostgreSQL then parses back: for large messages that formatting and
  parsing was most of the CPU either side spent on the ``COPY`` (measured in the commit that
  made it binary).

A value goes in as ``save()`` would send it: through the field's ``pre_save`` and
``get_db_prep_save``, except where Django's own steps for the field's class would give it back
unchanged (text, booleans, None: :func:`_as_is`), which is taken as it is. :func:`new` makes a
new instance from its values in field order rather than by ``Model.__init__``'s keyword path
(a request's new inbox and its event).

Both run on PostgreSQL and on SQLite; ``tests/test_rows.py`` compares them with the ORM row by
row. Only what the receive path needs: plain concrete fields, no conflict handling, no
multi-table inheritance, no signals (``bulk_create`` sends none either).

A column's converters, the backend's batch size and the driver's cursor under Django's wrapper
are Django's internals: :mod:`config.django_adapter` reaches them.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from typing import Any, TypeVar

from django.db import connections, models
from django.db.models import signals

from config.django_adapter import (
    bulk_batch_size,
    column_converters,
    driver_cursor,
    prepared_cursor,
)

M = TypeVar("M", bound=models.Model)


def _quote(name: str) -> str:
    return f'"{name}"'  # PostgreSQL's and SQLite's quoting of identifiers


@functools.lru_cache(maxsize=512)
def _statement(table: str, columns: tuple[str, ...], rows: int, returning: str | None) -> str:
    quote = _quote
    row = "(" + ", ".join(["%s"] * len(columns)) + ")"
    sql = (
        f"INSERT INTO {quote(table)} ({', '.join(quote(c) for c in columns)}) VALUES "
        + ", ".join([row] * rows)
    )
    return f"{sql} RETURNING {quote(returning)}" if returning else sql


@functools.cache
def _reader(model: type[models.Model], using: str) -> tuple[str, list[str], list[tuple]]:
    """The select list, attribute names and column converters of ``model``'s whole rows."""
    connection = connections[using]
    fields = model._meta.concrete_fields
    table = model._meta.db_table
    converters = []
    for index, field in enumerate(fields):
        col, found = column_converters(field, table, connection)
        if found:
            converters.append((index, col, found))
    select = ", ".join(f"{_quote(table)}.{_quote(f.column)}" for f in fields)
    return select, [f.attname for f in fields], converters


def select_rows(
    model: type[M],
    where: str,
    params: Sequence[Any],
    *,
    lock: bool = False,
    related: str | None = None,
    using: str = "default",
) -> list[M]:
    """``SELECT`` of whole rows of ``model`` ``WHERE where`` (``%s`` placeholders; an
    ``ORDER BY`` may follow the condition), as instances; ``lock`` adds ``FOR UPDATE`` where
    the database has it (SQLite serialises writers anyway). ``related`` names a foreign key
    whose row comes in the same statement (a join, as ``select_related`` reads it; only
    ``model``'s rows are locked): ``where`` then names its columns with their table."""
    connection = connections[using]
    select, names, converters = _reader(model, using)
    table = _quote(model._meta.db_table)
    source = table
    other: type[models.Model] | None = None
    if related is not None:
        field = model._meta.get_field(related)
        other = field.related_model
        other_select, other_names, other_converters = _reader(other, using)
        other_table = _quote(other._meta.db_table)
        select = f"{select}, {other_select}"
        source = (
            f"{table} JOIN {other_table} ON {other_table}.{_quote(field.target_field.column)} "
            f"= {table}.{_quote(field.column)}"
        )
    sql = f"SELECT {select} FROM {source} WHERE {where}"
    if lock and connection.features.has_select_for_update:
        sql += f" FOR UPDATE OF {table}" if related is not None else " FOR UPDATE"
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    found = []
    width = len(names)
    for row in rows:
        obj = _instance(model, names, converters, row[:width], connection, using)
        if other is not None:
            setattr(
                obj,
                related,  # type: ignore[arg-type]
                _instance(other, other_names, other_converters, row[width:], connection, using),
            )
        found.append(obj)
    return found


def _instance(
    model: type[M],
    names: list[str],
    converters: list[tuple],
    row: Sequence[Any],
    connection: Any,
    using: str,
) -> M:
    values = list(row)
    for index, col, functions in converters:
        for convert in functions:
            values[index] = convert(values[index], col, connection)
    return model.from_db(using, names, values)


@functools.cache
def _constructor(
    model: type[models.Model],
) -> tuple[tuple[str, models.ForeignKey | None, Any], ...]:
    """Per concrete field of ``model``, in order: its attribute, the foreign key that may be
    given as an object by its name instead, and its ``get_default``."""
    if model.__init__ is not models.Model.__init__:
        raise TypeError(f"{model.__name__} has an __init__ of its own: new() would skip it.")
    found = []
    for field in model._meta.concrete_fields:
        if getattr(field, "generated", False):
            raise TypeError(f"{model.__name__}.{field.name} is generated: new() cannot make it.")
        key = field if isinstance(field, models.ForeignKey) else None
        found.append((field.attname, key, field.get_default))
    return tuple(found)


def new(model: type[M], /, **values: Any) -> M:
    """A new row's instance as ``model(**values)`` makes it for a plain model (no generated
    fields, no ``__init__`` of its own), without the keyword path of ``Model.__init__``: made
    from its values in field order, each missing one from the field's ``get_default()`` as
    ``__init__`` takes it, a foreign key given as an object by its name stored by its key and
    the object cached (``pre_init`` and ``post_init`` are sent as ever, the latter before that
    cache is set). Unlike the keyword path it does not check the related object's type or
    routing, and leaves ``_state.db`` unset until the row is saved (as :func:`insert` sets
    it). Only concrete fields, by attribute or by a foreign key's name, each at most once:
    anything else is a ``TypeError``.

    For a new inbox the keyword path took about 52 µs (a ``KeyError`` caught per field left out,
    the descriptor's routing for the workspace), this about 35 (most of the rest is the
    defaults, the new id among them)."""
    args = []
    related = []
    for attname, key, default in _constructor(model):
        if attname in values:
            args.append(values.pop(attname))
        elif key is not None and key.name in values:
            obj = values.pop(key.name)
            args.append(None if obj is None else getattr(obj, key.target_field.attname))
            related.append((key, obj))
        else:
            args.append(default())
    if values:
        raise TypeError(f"{model.__name__}() got unexpected keyword arguments: {sorted(values)}")
    instance = model(*args)
    for key, obj in related:
        key.set_cached_value(instance, obj)
    return instance


def placeholders(count: int) -> str:
    """``%s, %s, …`` for an ``IN (…)`` of ``count`` values."""
    return ", ".join(["%s"] * count)


MAX_PARAMETERS = 65_535  # PostgreSQL's limit of bound parameters per statement


def _fields(model: type[models.Model]) -> tuple[models.Field | None, list[models.Field]]:
    """The auto-incremented primary key (None if the key is set by the caller), and the
    fields an insert writes."""
    opts = model._meta
    auto = opts.auto_field if opts.auto_field is not None and opts.pk is opts.auto_field else None
    return auto, [f for f in opts.concrete_fields if f is not auto]


def rows_per_statement(model: type[models.Model], rows: int, using: str = "default") -> int:
    """How many of ``rows`` rows go in one statement: the database's limit (SQLite's on
    variables; PostgreSQL's on bound parameters, should server-side binding be on)."""
    _, fields = _fields(model)
    limit = bulk_batch_size(connections[using], fields, rows)
    return max(1, min(limit, MAX_PARAMETERS // max(1, len(fields))))


def bulk_insert(model: type[M], objs: Iterable[M], using: str = "default") -> list[M]:
    """Inserts new instances of ``model`` as ``bulk_create`` would (defaults, ``pre_save``,
    ``get_db_prep_save``, the auto-incremented primary key set from ``RETURNING``), in as few
    statements as the database's parameter limit allows; returns them."""
    objs = list(objs)
    if not objs:
        return objs
    connection = connections[using]
    opts = model._meta
    auto, fields = _fields(model)
    columns = tuple(f.column for f in fields)
    returning = auto.column if auto is not None else None
    size = rows_per_statement(model, len(objs), using)
    with connection.cursor() as cursor:
        if auto is None and connection.vendor == "postgresql":
            _copy(cursor, model, objs, connection)
            objs = _saved(objs, using)
            return objs
        for start in range(0, len(objs), size):
            chunk = objs[start : start + size]
            params = [value for obj in chunk for value in _insert_values(obj, connection)]
            sql = _statement(opts.db_table, columns, len(chunk), returning)
            cursor.execute(sql, params)
            if auto is not None:
                for obj, (pk,) in zip(chunk, cursor.fetchall(), strict=True):
                    setattr(obj, auto.attname, pk)
    return _saved(objs, using)


def plain_insert(model: type[models.Model]) -> bool:
    """Whether a new ``model`` row may go in by a plain ``INSERT``: no ``save`` override and no
    ``pre_save``/``post_save`` receivers that the statement would skip."""
    return not (
        model.save is not models.Model.save
        or signals.pre_save.has_listeners(model)
        or signals.post_save.has_listeners(model)
    )


# Field classes whose ``get_db_prep_save`` gives back a value of these types unchanged: text and
# booleans (``get_prep_value`` is ``to_python``, which returns such a value as it is, and no
# backend adaptation follows), and None for integers and times (each step passes None through;
# other integers are wrapped by PostgreSQL's backend in psycopg's sized types, and times are
# adapted per backend).
_AS_IS: tuple[tuple[type[models.Field], frozenset[type]], ...] = (
    (models.CharField, frozenset({str, type(None)})),
    (models.TextField, frozenset({str, type(None)})),
    (models.BooleanField, frozenset({bool, type(None)})),
    (models.IntegerField, frozenset({type(None)})),
    (models.DateTimeField, frozenset({type(None)})),
)


def _as_is(field: models.Field) -> frozenset[type]:
    """The value types that ``field``'s ``get_db_prep_save`` returns unchanged, where each step
    of it is Django's own code for the field's class (a subclass overriding one gets none), after
    a ``pre_save`` that only reads the attribute. A foreign key: its target field's and None
    (which it stores as NULL itself), but not ``""`` (NULL on some databases), checked at the
    call. Where ``str`` is one, so is any subclass (a ``TextChoices`` member): ``to_python``
    returns those as they are too."""
    kind = type(field)
    reads = kind.pre_save is models.Field.pre_save or (
        kind.pre_save in (models.DateField.pre_save, models.DateTimeField.pre_save)
        and not (field.auto_now or field.auto_now_add)
    )
    if not reads:
        return frozenset()
    if isinstance(field, models.ForeignKey):
        if kind.get_db_prep_save is not models.ForeignKey.get_db_prep_save:
            return frozenset()
        return _as_is(field.target_field) | {type(None)}
    for base, types in _AS_IS:
        if (
            isinstance(field, base)
            and kind.get_db_prep_save is models.Field.get_db_prep_save
            and kind.get_db_prep_value is base.get_db_prep_value
            and kind.get_prep_value is base.get_prep_value
            and kind.to_python is base.to_python
        ):
            return types
    return frozenset()


@functools.cache
def _preparers(model: type[models.Model]) -> tuple[tuple[models.Field, str, frozenset[type]], ...]:
    """Per inserted field of ``model``: the field, its attribute, the types it stores as is."""
    _, fields = _fields(model)
    return tuple((field, field.attname, _as_is(field)) for field in fields)


def _insert_values(obj: models.Model, connection: Any) -> list[Any]:
    """``obj``'s values as ``save()`` inserts them (``pre_save`` runs: ``auto_now_add`` sets
    the instance's attribute, as it does in ``save()``). A value that Django's own steps would
    give back unchanged (a string for a text column, a bool, None for an integer or a time, not
    another integer: :func:`_as_is`) is taken as it is, without those steps' calls: most of a
    row's values; the rest go through ``get_db_prep_save``. ``tests/test_rows.py`` compares
    every value with what those steps give."""
    values = []
    append = values.append
    state = obj.__dict__
    for field, attname, as_is in _preparers(type(obj)):
        value = state.get(attname, field)  # not loaded (deferred): the field, never as is
        if (type(value) in as_is or (str in as_is and isinstance(value, str))) and not (
            value == "" and field.is_relation
        ):
            append(value)
        else:
            append(field.get_db_prep_save(field.pre_save(obj, True), connection))
    return values


def _unbounded(db_type: str) -> str:
    """A column type without its length (``varchar(320)`` -> ``varchar``, ``char(2)`` ->
    ``bpchar``): an explicit cast to a bounded type cuts a longer value short without a word,
    where the column's own assignment refuses it (``value too long``), as a plain ``INSERT``
    does."""
    db_type = re.sub(r"^(varchar|character varying)\(\d+\)", r"\1", db_type)
    return re.sub(r"^(char|character)\(\d+\)", "bpchar", db_type)


@functools.lru_cache(maxsize=64)
def _pair_statement(first: type[models.Model], second: type[models.Model], where: str) -> str:
    """``WITH a AS (INSERT … SELECT … WHERE <where> RETURNING …), b AS (INSERT … SELECT … FROM
    a RETURNING …) SELECT …``: each value cast to its column's type less any length (a
    ``SELECT`` list gives PostgreSQL no column to infer a parameter's type from, as ``VALUES``
    in an ``INSERT`` does; the column checks the length on assignment)."""
    connection = connections["default"]
    parts = []
    for name, model, source in (("a", first, f"WHERE {where}"), ("b", second, 'FROM "a"')):
        auto, fields = _fields(model)
        columns = ", ".join(_quote(f.column) for f in fields)
        values = ", ".join(f"%s::{_unbounded(f.cast_db_type(connection))}" for f in fields)
        returning = _quote(auto.column) if auto is not None else "1"
        parts.append(
            f"{_quote(name)} AS (INSERT INTO {_quote(model._meta.db_table)} ({columns}) "
            f"SELECT {values} {source} RETURNING {returning})"
        )
    return f'WITH {", ".join(parts)} SELECT "a".*, "b".* FROM "a", "b"'


def insert_pair(
    first: models.Model,
    second: models.Model,
    *,
    where: str = "TRUE",
    params: Sequence[Any] = (),
) -> bool:
    """Inserts two new instances in one statement — both or neither — provided the SQL condition
    ``where`` (``%s`` placeholders: ``params``) holds when it runs; whether it did (False:
    nothing was written).

    One statement is atomic on its own: in autocommit mode this is a write that commits in one
    round trip (no ``BEGIN``/``COMMIT``), its condition read in the statement's snapshot. Each
    row as :func:`insert` stores it (``pre_save``, auto-incremented keys set from
    ``RETURNING``); ``second`` may refer to ``first`` by a key the caller set, never by an
    auto-incremented one. PostgreSQL only (SQLite has no ``INSERT`` in ``WITH``); both models
    must pass :func:`plain_insert`. A unique violation is Django's ``IntegrityError``; the
    statement is prepared (:func:`prepared_cursor`).
    """
    connection = connections["default"]
    if connection.vendor != "postgresql":
        raise NotImplementedError("insert_pair needs PostgreSQL (INSERT in WITH).")
    for obj in (first, second):
        if not plain_insert(type(obj)):
            raise ValueError(f"{type(obj).__name__} needs save(): insert_pair would skip it.")
    values = [*_insert_values(first, connection), *params, *_insert_values(second, connection)]
    with prepared_cursor(connection) as cursor:
        cursor.execute(_pair_statement(type(first), type(second), where), values)
        row = cursor.fetchone()
    if row is None:
        return False
    for obj, key in zip((first, second), row, strict=True):
        auto, _ = _fields(type(obj))
        if auto is not None:
            setattr(obj, auto.attname, key)
    _saved([first, second], "default")
    return True


def insert(obj: M, using: str = "default") -> M:
    """Inserts one new instance as ``save()`` inserts it (defaults, ``pre_save`` such as
    ``auto_now``, ``get_db_prep_save``; an auto-incremented key set from ``RETURNING``) in one
    ``INSERT`` whose text is built once per model, through Django's cursor: recorded as any
    query, a unique violation raised as Django's ``IntegrityError``. No signals are sent: for
    models without ``save`` overrides or receivers (a request's single row, e.g. a new inbox,
    where the ORM's compiler cost more CPU than PostgreSQL spent on the row). A model that has
    them gets ``save()`` itself, so a receiver added later is never skipped."""
    if not plain_insert(type(obj)):
        obj.save(force_insert=True, using=using)
        return obj
    connection = connections[using]
    auto, fields = _fields(type(obj))
    params = _insert_values(obj, connection)
    sql = _statement(
        obj._meta.db_table,
        tuple(f.column for f in fields),
        1,
        auto.column if auto is not None else None,
    )
    with prepared_cursor(connection) as cursor:
        cursor.execute(sql, params)
        if auto is not None:
            setattr(obj, auto.attname, cursor.fetchone()[0])
    return _saved([obj], using)[0]


def _saved(objs: list[M], using: str) -> list[M]:
    for obj in objs:
        obj._state.adding = False
        obj._state.db = using
    return objs


# Column types (as Django names them, length dropped) -> the type psycopg dumps in binary, for
# the values ``get_db_prep_save`` gives: str, bytes, int, bool, aware datetimes, dates, floats,
# UUIDs and Django's ``Jsonb`` wrapper. A column of any other type makes the COPY textual.
BINARY_COPY_TYPES = {
    "varchar": "varchar",
    "text": "text",
    "bytea": "bytea",
    "jsonb": "jsonb",
    "timestamp with time zone": "timestamptz",
    "date": "date",
    "integer": "int4",
    "bigint": "int8",
    "smallint": "int2",
    "boolean": "bool",
    "double precision": "float8",
    "uuid": "uuid",
}


def _binary_types(fields: list[models.Field], connection: Any) -> list[str] | None:
    """The binary COPY types of ``fields``' columns, or None if one has no entry."""
    types = []
    for field in fields:
        db_type = (field.db_type(connection) or "").split("(", 1)[0].strip().lower()
        if db_type not in BINARY_COPY_TYPES:
            return None
        types.append(BINARY_COPY_TYPES[db_type])
    return types


@functools.cache
def _copy_shape(model: type[models.Model], using: str) -> tuple[str, list[str] | None]:
    """The ``COPY`` statement of ``model``'s inserted columns and, if binary, their types."""
    connection = connections[using]
    _, fields = _fields(model)
    types = _binary_types(fields, connection)
    columns = ", ".join(_quote(f.column) for f in fields)
    statement = f"COPY {_quote(model._meta.db_table)} ({columns}) FROM STDIN"
    return (statement + " (FORMAT BINARY)" if types else statement), types


def _copy(
    cursor: Any,
    model: type[models.Model],
    objs: list[Any],
    connection: Any,
) -> None:
    """PostgreSQL, rows whose keys the caller set: ``COPY … FROM STDIN``. psycopg formats the
    rows in C; the statement is a few bytes, where an INSERT of a batch of mail is megabytes of
    quoted text that psycopg builds in Python and PostgreSQL parses again."""
    statement, types = _copy_shape(model, connection.alias)
    with driver_cursor(cursor).copy(statement) as copy:
        if types is not None:
            copy.set_types(types)
        for obj in objs:
            copy.write_row(_insert_values(obj, connection))
