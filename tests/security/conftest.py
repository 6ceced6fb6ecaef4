"""The live processes the security matrices share (``live_stack``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.webhooks.receiver import receiver  # noqa: F401  (a fixture: a real HTTP receiver)


@pytest.fixture(scope="package")
def live_stack(django_db_setup: None, django_db_blocker) -> Iterator[object]:  # type: ignore[no-untyped-def]
    """smtpd, daphne and a Celery worker against the test database (in embedded mode the one
    ``manage.py serve``), shared by the security matrices (tests/security/tenancy_live.py); tests
    using it need ``transactional_db``. Package-scoped: an embedded ``serve`` runs the periodic
    jobs, which must not outlive these tests and act on the data of later ones."""
    from django.db import connection

    from tests.security.tenancy_live import LiveStack

    stack = LiveStack(connection.settings_dict["NAME"]).start()
    yield stack
    stack.stop()
