"""The tenant guard: a queryset of a workspace-owned model that refuses to run unscoped.

Every model a workspace owns declares how its rows reach their workspace::

    objects = TenantManager()
    tenancy = Tenancy("workspace", parents=("inbox",))          # Email
    tenancy = Tenancy("email__workspace", parents=("email",))   # Attachment

A queryset counts as *scoped* once it is filtered (with ``filter``/``get``, ANDed) on one of
those workspace paths (``workspace=ws``, ``workspace_id=...``, ``email__workspace=ws``), or on a
parent given as a model instance (``inbox=inbox``, ``email__in=[...]``, a related manager such as
``email.attachments``, prefetches): the parent was itself looked up through a guarded queryset,
so the scope is inherited. A bare id is never a scope (``Email.objects.filter(pk=some_id)`` is
exactly the BOLA bug the guard exists for).

The few legitimate cross-tenant readers say so explicitly with ``.unscoped()`` (the SMTP
receiver's address lookup, the authentication lookup by key prefix, sweepers and workers that
take a row id from their own queue, the event hub); code running under Django's admin (the
operator's cross-tenant console) is exempt as a whole.

With ``settings.TENANT_GUARD`` on (the test suite turns it on, also for the processes it
starts, through the ``TENANT_GUARD`` environment variable) evaluating an unscoped queryset from
application code raises :class:`UnscopedTenantQuery`. Test code itself may inspect the database
freely: the caller is the innermost frame of this project, and frames under ``tests/`` are
allowed. With the guard off (production) nothing is checked: the cost is one attribute read per
query.

Django has no public hook for "a queryset is evaluated" or "a condition is added": the guard
builds on :mod:`config.django_adapter`'s queryset and query, which reach Django's internals.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import models
from django.db.models import Q, sql

from config import django_adapter
from config.django_adapter import HookedQuery, HookedQuerySet

ROOT = Path(__file__).resolve().parent.parent
_ROOT = str(ROOT) + "/"
_ALLOWED_CALLERS = (str(ROOT / "tests") + "/",)
_LIBRARY_MARKERS = ("/site-packages/", "/dist-packages/", "/.venv/", "/lib/python")
_ADMIN = "/django/contrib/admin/"
_OWN_FILES = (__file__, django_adapter.__file__)  # never the caller
_LOOKUPS = {"exact", "in", "iexact"}


class UnscopedTenantQuery(RuntimeError):
    """A workspace-owned model was queried without a workspace filter (tenant guard)."""


def _normalise(lookup: str) -> str:
    """``email__workspace_id__in`` → ``email__workspace``: the relation path a lookup names."""
    parts = lookup.split("__")
    if len(parts) > 1 and parts[-1] in _LOOKUPS:
        parts = parts[:-1]
    if len(parts) > 1 and parts[-1] in ("pk", "id"):
        parts = parts[:-1]
    if parts[-1].endswith("_id"):
        parts[-1] = parts[-1][:-3]
    return "__".join(parts)


def _is_instances(value: Any) -> bool:
    """A model instance, a collection of them (empty matches nothing), or a scoped tenant
    queryset."""
    if isinstance(value, models.Model):
        return True
    if isinstance(value, TenantQuerySet):
        return value.query.tenant_scope is not None
    if isinstance(value, list | tuple | set | frozenset):
        return all(isinstance(item, models.Model) for item in value)
    return False


@dataclass(frozen=True)
class Tenancy:
    """How a model's rows reach their workspace: relation paths to it (several for a row that
    reaches it two ways), and the parent relations whose instances scope a query."""

    paths: tuple[str, ...]
    parents: tuple[str, ...] = ()

    def __init__(self, *paths: str, parents: Iterable[str] = ()) -> None:
        object.__setattr__(self, "paths", tuple(paths))
        object.__setattr__(self, "parents", tuple(parents))

    def scopes(self, lookup: str, value: Any) -> bool:
        """Whether one ``lookup=value`` condition confines a query to one workspace."""
        path = _normalise(lookup)
        if path in self.paths:
            return value is not None
        return path in self.parents and _is_instances(value)

    def q_scopes(self, q: Q) -> bool:
        """Whether a condition, as ANDed conditions, contains one that scopes."""
        if q.negated or q.connector != Q.AND:
            return False
        return any(
            self.q_scopes(child) if isinstance(child, Q) else self.scopes(*child)
            for child in q.children
        )


class TenantQuery(HookedQuery):
    """The SQL query of a tenant queryset; it remembers whether a condition scoped it.

    Every condition arrives here (``filter``, ``get``, related managers and the prefetches
    Django builds itself), before model instances are reduced to ids, and the flag travels with
    every clone of the query.
    """

    tenant_scope: str | None = None

    def on_condition(self, q: Q) -> None:
        if self.tenant_scope is None and self.model.tenancy.q_scopes(q):
            self.tenant_scope = "scoped"


class TenantQuerySet(HookedQuerySet):
    """A queryset that knows whether it was scoped to a workspace (see the module docstring)."""

    def __init__(
        self,
        model: type[models.Model] | None = None,
        query: sql.Query | None = None,
        using: str | None = None,
        hints: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(model, query if query is not None else TenantQuery(model), using, hints)

    def unscoped(self) -> TenantQuerySet:
        """An explicitly cross-tenant queryset, for the few readers that are cross-tenant by
        design (SMTP recipient lookup, authentication, sweepers, workers, the event hub)."""
        clone = self.copy()
        clone.query.tenant_scope = "unscoped"
        return clone

    # -- the check, at every evaluation --------------------------------------------------------

    def _check(self) -> None:
        if not getattr(settings, "TENANT_GUARD", False):
            return
        if getattr(self.query, "tenant_scope", None) is not None:
            return
        caller = _application_caller()
        if caller is not None:
            tenancy: Tenancy = self.model.tenancy
            raise UnscopedTenantQuery(
                f"{self.model.__name__} queried without a workspace filter at {caller}: filter on "
                f"{' or '.join(tenancy.paths + tenancy.parents)}, or say .unscoped()."
            )

    def _before_evaluation(self) -> None:
        self._check()

    def iterator(self, chunk_size: int | None = None) -> Any:
        self._check()
        return super().iterator(chunk_size=chunk_size)

    def count(self) -> int:
        if not self.evaluated:
            self._check()
        return super().count()

    def exists(self) -> bool:
        if not self.evaluated:
            self._check()
        return super().exists()

    def aggregate(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        self._check()
        return super().aggregate(*args, **kwargs)

    # Called with the fields an update() wrote, when it wrote rows (a model whose writes others
    # must hear of: apikeys' credentials epoch). Here, so that the guard's caller stays the code
    # that called update().
    on_update: Any = None

    def update(self, **kwargs: Any) -> int:
        self._check()
        rows = super().update(**kwargs)
        if rows and self.on_update is not None:
            self.on_update(kwargs)
        return rows

    def delete(self) -> tuple[int, dict[str, int]]:
        self._check()
        return super().delete()

    def in_bulk(self, *args: Any, **kwargs: Any) -> dict[Any, Any]:
        self._check()
        return super().in_bulk(*args, **kwargs)


def _application_caller() -> str | None:
    """``file:line`` of the application code that evaluates a query, or None when the caller
    may read across tenants: the Django admin, test code, or no code of this project at all."""
    frame = sys._getframe(2)
    caller: str | None = None
    while frame is not None:
        filename = frame.f_code.co_filename
        if _ADMIN in filename:
            return None
        if (
            caller is None
            and filename.startswith(_ROOT)
            and filename not in _OWN_FILES
            and not any(marker in filename[len(_ROOT) - 1 :] for marker in _LIBRARY_MARKERS)
        ):
            if filename.startswith(_ALLOWED_CALLERS):
                return None
            caller = f"{filename[len(_ROOT) :]}:{frame.f_lineno}"
        frame = frame.f_back
    return caller


class TenantManager(models.Manager.from_queryset(TenantQuerySet)):  # type: ignore[misc]
    """The default manager of a workspace-owned model (its ``tenancy`` says how rows reach their
    workspace). Related managers (``email.attachments``) derive from it and stay guarded."""
