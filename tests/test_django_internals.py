"""The internals of Django that ``config.django_adapter`` reaches for the modules that call it:

- the tenant guard (``config.tenancy``): where a queryset is evaluated (``QuerySet._fetch_all``,
  ``_result_cache``), how it is copied (``_chain``), and where every condition arrives
  (``sql.Query.add_q``, a query's attributes travelling with its clones);
- whole rows without the SQL compiler (``config.rows``): a column's converters as the compiler
  finds them, the backend's batch size, the DB-API cursor under Django's wrapper (and the model
  options it reads);
- connection hygiene (``config.db``): the health-check flag of a connection;
- the ``_like`` index twins (``config.postgresql.indexes``): the name Django's schema editor
  gives them;

and one more path, in ``outbox.delivery`` (its SMTP backend and prebuilt message): how Django's
SMTP backend hands a message to ``smtplib`` (``EmailBackend._send``), and that ``sendmail``
sends it by ``data``.

Each check fails naming Django's version and what moved, so that an upgrade is read against
the adapter before it ships (the pin in pyproject.toml moves with it)."""

from __future__ import annotations

import inspect
from importlib.metadata import version

import django
from django.db import connection, connections, models
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.base.operations import BaseDatabaseOperations
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.backends.utils import CursorWrapper
from django.db.models import sql
from django.db.models.expressions import Col
from django.db.models.sql.compiler import SQLCompiler

from config.django_adapter import column_converters
from config.tenancy import TenantQuerySet
from mail.models import Email

DJANGO = f"Django {version('django')}"


def _parameters(function: object) -> list[str]:
    return list(inspect.signature(function).parameters)  # type: ignore[arg-type]


def test_django_is_the_version_these_modules_were_written_against() -> None:
    """A new version needs the checks below read again, and the pin in pyproject.toml moved."""
    assert django.VERSION[:2] == (5, 2), f"{DJANGO}: written against Django 5.2"


def test_the_queryset_internals_of_the_tenant_guard() -> None:
    for name in ("__iter__", "__len__", "__bool__", "__getitem__"):
        source = inspect.getsource(getattr(models.QuerySet, name))
        assert "._fetch_all()" in source, f"{DJANGO}: QuerySet.{name} skips _fetch_all"
    assert "if self._result_cache is None:" in inspect.getsource(models.QuerySet._fetch_all), (
        f"{DJANGO}: QuerySet._fetch_all no longer fills _result_cache"
    )
    assert "self._result_cache = None" in inspect.getsource(models.QuerySet.__init__), (
        f"{DJANGO}: QuerySet.__init__ no longer starts with an empty _result_cache"
    )
    init = _parameters(models.QuerySet.__init__)
    assert init == ["self", "model", "query", "using", "hints"], (
        f"{DJANGO}: QuerySet.__init__ takes {init}"
    )
    assert _parameters(models.QuerySet._chain) == ["self"], f"{DJANGO}: QuerySet._chain moved"
    # Every condition reaches the query through add_q (filter, get, related managers).
    assert _parameters(sql.Query.add_q) == ["self", "q_object", "reuse_all"], (
        f"{DJANGO}: sql.Query.add_q takes {_parameters(sql.Query.add_q)}"
    )
    assert "add_q(" in inspect.getsource(models.QuerySet._filter_or_exclude_inplace), (
        f"{DJANGO}: QuerySet filters no longer go through Query.add_q"
    )
    # A query's own attributes (tenant_scope) travel with its clones.
    assert "obj.__dict__ = self.__dict__.copy()" in inspect.getsource(sql.Query.clone), (
        f"{DJANGO}: sql.Query.clone no longer copies the query's attributes"
    )
    scoped = Email.objects.unscoped()
    assert isinstance(scoped, TenantQuerySet) and scoped.query.tenant_scope == "unscoped"
    assert scoped.filter(subject="x").query.tenant_scope == "unscoped"
    assert not scoped.all().evaluated
    # The adapter's own names stay off the managers Django makes from the queryset.
    assert not hasattr(Email.objects, "copy") and not hasattr(Email.objects, "_before_evaluation")


def test_the_column_and_backend_internals_of_config_rows() -> None:
    converters = inspect.getsource(SQLCompiler.get_converters)
    for step in (
        "self.connection.ops.get_db_converters(expression)",
        "expression.get_db_converters(self.connection)",
    ):
        assert step in converters, f"{DJANGO}: SQLCompiler.get_converters no longer calls {step}"
    assert _parameters(models.Field.get_col) == ["self", "alias", "output_field"], (
        f"{DJANGO}: Field.get_col takes {_parameters(models.Field.get_col)}"
    )
    assert _parameters(Col.get_db_converters) == ["self", "connection"], (
        f"{DJANGO}: Col.get_db_converters takes {_parameters(Col.get_db_converters)}"
    )
    for name, parameters in (
        ("get_db_converters", ["self", "expression"]),
        ("bulk_batch_size", ["self", "fields", "objs"]),
    ):
        found = _parameters(getattr(BaseDatabaseOperations, name))
        assert found == parameters, f"{DJANGO}: DatabaseOperations.{name} takes {found}"
    assert "self.cursor = cursor" in inspect.getsource(CursorWrapper.__init__), (
        f"{DJANGO}: CursorWrapper no longer keeps the DB-API cursor as .cursor"
    )
    opts = Email._meta
    for name in ("concrete_fields", "auto_field", "pk", "db_table"):
        assert hasattr(opts, name), f"{DJANGO}: Options.{name} is gone"
    column, _ = column_converters(opts.get_field("subject"), opts.db_table, connection)
    assert isinstance(column, Col) and column.target.column == "subject"


def test_the_cursor_internals_of_prepared_cursor() -> None:
    from django.db.backends.postgresql import base as postgresql

    assert issubclass(postgresql.ServerBindingCursor, postgresql.Database.Cursor), (
        f"{DJANGO}: the PostgreSQL backend's ServerBindingCursor is gone or moved"
    )
    cursor = inspect.getsource(BaseDatabaseWrapper._cursor)
    for step in ("self.close_if_health_check_failed()", "self.ensure_connection()",
                 "self.wrap_database_errors", "self._prepare_cursor(self.create_cursor(name))"):  # fmt: skip
        assert step in cursor, f"{DJANGO}: BaseDatabaseWrapper._cursor no longer does {step}"
    assert _parameters(BaseDatabaseWrapper._prepare_cursor) == ["self", "cursor"], (
        f"{DJANGO}: _prepare_cursor takes {_parameters(BaseDatabaseWrapper._prepare_cursor)}"
    )


def test_the_connection_health_check_flag_of_config_db() -> None:
    source = inspect.getsource(BaseDatabaseWrapper.close_if_health_check_failed)
    assert "or self.health_check_done" in source, (
        f"{DJANGO}: close_if_health_check_failed no longer skips a checked connection"
    )
    assert "self.health_check_done = False" in inspect.getsource(
        BaseDatabaseWrapper.close_if_unusable_or_obsolete
    ), f"{DJANGO}: close_if_unusable_or_obsolete no longer clears health_check_done"
    assert "initialized_only" in _parameters(type(connections).all), (
        f"{DJANGO}: ConnectionHandler.all takes no initialized_only"
    )


def test_the_like_index_name_of_config_postgresql_indexes() -> None:
    found = _parameters(BaseDatabaseSchemaEditor._create_index_name)
    assert found == ["self", "table_name", "column_names", "suffix"], (
        f"{DJANGO}: BaseDatabaseSchemaEditor._create_index_name takes {found}"
    )
    # The twins are made with that name: _create_index_sql names an index through it, and the
    # PostgreSQL editor makes (and drops) the twins with the suffix "_like".
    assert "name = self._create_index_name(*args, **kwargs)" in inspect.getsource(
        BaseDatabaseSchemaEditor._create_index_sql
    ), f"{DJANGO}: _create_index_sql no longer names indexes with _create_index_name"
    from django.db.backends.postgresql.schema import DatabaseSchemaEditor

    like = inspect.getsource(DatabaseSchemaEditor._create_like_index_sql)
    assert like.count('suffix="_like"') == 2, f"{DJANGO}: the _like twins are named otherwise"
    alter = inspect.getsource(DatabaseSchemaEditor._alter_field)
    assert '[old_field.column], suffix="_like"' in alter, (
        f"{DJANGO}: AlterField finds the _like twin to drop by another name"
    )


def test_the_smtp_backend_path_of_outbox_delivery() -> None:
    import smtplib

    from django.core.mail.backends.smtp import EmailBackend

    send = inspect.getsource(EmailBackend._send)
    for step in (
        "message = email_message.message()",
        "self.connection.sendmail(",
        'message.as_bytes(linesep="\\r\\n")',
    ):
        assert step in send, f"{DJANGO}: the SMTP backend's _send no longer does {step}"
    assert "self.data(msg)" in inspect.getsource(smtplib.SMTP.sendmail), (
        "smtplib.SMTP.sendmail no longer sends the message with self.data"
    )
