"""Shared fixtures: workspaces, keys with given scopes, and API clients that use them."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator

import pytest
from django.conf import settings as django_settings
from rest_framework.test import APIClient

from apikeys import services as key_services
from apikeys.audit import Actor
from apikeys.models import Workspace
from tests import flush
from tests.dns_server import DnsServer
from tests.factories import WorkspaceFactory

# A runner that started the suite with SIGINT ignored (a shell's `&`, some CI runners) passes that
# on to every process a test starts, and a server that ignores Ctrl-C cannot be stopped with it:
# the tests' processes get the usual disposition back.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# The database is emptied after a test that commits by DELETE, not TRUNCATE (tests/flush.py).
flush.install()

TEST_ACTOR = Actor.system("tests")

ALL = ("read", "write", "send", "admin")

# The tenant guard (config.tenancy) is on for the whole suite and for every process it starts
# (tests.live.child_env copies the environment): application code that queries a
# workspace-owned model without a workspace filter raises instead of answering.
os.environ["TENANT_GUARD"] = "true"
django_settings.TENANT_GUARD = True

# Passwords hashed fast in the suite and in the processes it starts (PBKDF2's 0.23 s per hash
# was about a second of every browser test); PBKDF2 stays known, for hashes made elsewhere.
FAST_HASHERS = [
    "django.contrib.auth.hashers.MD5PasswordHasher",
    "django.contrib.auth.hashers.PBKDF2PasswordHasher",
]
os.environ["PASSWORD_HASHERS"] = ",".join(FAST_HASHERS)
django_settings.PASSWORD_HASHERS = FAST_HASHERS

# Django's test client builds its handler, and with it every middleware, once per client, and
# the suite makes a client or more per test: WhiteNoise's middleware indexed every static file
# of every app (the admin's, DRF's, ours) at each of those starts, 41 ms each, about a fifth of
# the fast tier. With autorefresh it looks a file up when one is asked for, as it answers the
# same. The processes the live tests start keep the production setting (an index at start).
django_settings.WHITENOISE_AUTOREFRESH = True


class Api(APIClient):
    """An API client bound to one plain key (or none), speaking JSON under /api/v1."""

    def __init__(self, plain: str | None = None, **kwargs: object) -> None:
        super().__init__(**kwargs)
        self.plain = plain
        if plain:
            self.credentials(HTTP_AUTHORIZATION=f"Bearer {plain}")

    def url(self, path: str) -> str:
        return (
            path
            if path.startswith("/") and not path.startswith("/v1")
            else f"/api/v1/{path.lstrip('/')}"
        )

    def call(self, method: str, path: str, data: object = None, **extra: object):  # type: ignore[no-untyped-def]
        fn = getattr(self, method.lower())
        if method.upper() in {"GET", "DELETE", "HEAD"}:
            return fn(self.url(path), data, **extra)
        return fn(self.url(path), data, format="json", **extra)


@pytest.fixture
def workspace(db: None) -> Workspace:
    return WorkspaceFactory()


@pytest.fixture
def other_workspace(db: None) -> Workspace:
    return WorkspaceFactory(name="Bob's workspace")


@pytest.fixture
def make_key(db: None) -> Callable[..., str]:
    def make(workspace: Workspace, scopes: tuple[str, ...] = ALL, **kwargs: object) -> str:
        return key_services.api_key_create(
            workspace=workspace, name="test key", scopes=scopes, **{"by": TEST_ACTOR, **kwargs}
        ).plain

    return make


@pytest.fixture
def api(workspace: Workspace, make_key: Callable[..., str]) -> Api:
    """An admin-scoped client of ``workspace``."""
    return Api(make_key(workspace))


@pytest.fixture
def other_api(other_workspace: Workspace, make_key: Callable[..., str]) -> Api:
    """An admin-scoped client of another workspace (Charlie has no access to Alice's stuff)."""
    return Api(make_key(other_workspace))


@pytest.fixture
def anon() -> Api:
    return Api()


def error_of(response) -> tuple[int, str]:  # type: ignore[no-untyped-def]
    """(status, envelope code) of an error response, asserting the envelope's shape."""
    body = response.json()
    assert set(body) == {"error"}, body
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    return response.status_code, body["error"]["code"]


class SmtpServer:
    """Our real SMTP front door on 127.0.0.1, served by an event loop in a background thread."""

    def __init__(self) -> None:
        import asyncio
        import threading

        from mail.smtpd.server import start_server

        self.loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._start_server = start_server
        self._thread.start()
        assert self._ready.wait(10), "SMTP server did not start"

    def _run(self) -> None:
        import asyncio

        asyncio.set_event_loop(self.loop)
        self.server = self.loop.run_until_complete(self._start_server("127.0.0.1", 0))
        self.port = self.server.sockets[0].getsockname()[1]
        self._ready.set()
        self.loop.run_forever()

    def client(self):  # type: ignore[no-untyped-def]
        import smtplib

        return smtplib.SMTP("127.0.0.1", self.port, timeout=30)

    def send(self, raw: bytes, *, to: list[str], mail_from: str = "sender@example.org") -> dict:
        """Sends ``raw`` in one transaction; returns smtplib's refused-recipients dict."""
        with self.client() as smtp:
            return smtp.sendmail(mail_from, to, raw)

    def stop(self) -> None:
        async def close() -> None:
            self.server.close()
            await self.server.wait_closed()

        import asyncio

        asyncio.run_coroutine_threadsafe(close(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)


@pytest.fixture
def smtp_server(transactional_db: None):  # type: ignore[no-untyped-def]
    server = SmtpServer()
    yield server
    server.stop()
    from django.db import connections

    connections.close_all()


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup: None) -> Iterator[None]:
    """pytest-django's, and before it drops the test database, the connections that the API
    threads of in-process handlers keep between requests go back to the pool
    (``config.api.handler``), as every other thread's did after its request."""
    yield
    from config.api.handler import release_all_connections

    release_all_connections()


@pytest.fixture(scope="session", autouse=True)
def dns_server() -> Iterator[DnsServer]:
    """The run's nameserver on 127.0.0.1 (tests/dns_server.py): ``DNS_RESOLVER`` points at it
    here and in every process the suite starts, so no DNS query ever leaves the machine."""
    from tests import dns_server as module

    server = module.RUNNING = DnsServer()
    previous = os.environ.get("DNS_RESOLVER")
    os.environ["DNS_RESOLVER"] = django_settings.DNS_RESOLVER = server.address
    yield server
    if previous is None:
        os.environ.pop("DNS_RESOLVER", None)
    else:
        os.environ["DNS_RESOLVER"] = previous
    module.RUNNING = None
    server.stop()


@pytest.fixture(autouse=True)
def _tasks_run_in_process() -> None:
    """Celery tasks run where they are queued (the worker path has its own tests)."""
    from config.celery import app

    app.conf.task_always_eager = True


# --- figures of the security matrices (tests/security) ---------------------------------------

_FIGURES: list[str] = []


@pytest.fixture
def figure() -> Callable[[str], None]:
    """Records one line of figures (a matrix's size and mismatches) for the end of the run."""
    return _FIGURES.append


# --- the two configurations (docs/testing.md) ----------------------------------------------------

_NOT_EMBEDDED: list[str] = []


# What makes a test "live" (left out of make test-fast): committed data for another process or
# thread to read (transactional_db), a browser, or a module that starts processes of its own.
_LIVE_FIXTURES = frozenset({"transactional_db", "_playwright", "smtp_server", "process_writer"})
_LIVE_MODULE_NAMES = frozenset({"subprocess", "Stack", "Process", "SmtpServer", "live"})


def _is_live(item: pytest.Item) -> bool:
    if _LIVE_FIXTURES & set(getattr(item, "fixturenames", ())):
        return True
    module = getattr(item, "module", None)
    return bool(module and _LIVE_MODULE_NAMES & set(vars(module)))


def _without_subject_here(item: pytest.Item, embedded: bool, sqlite: bool) -> bool:
    """Marked ``topology_production`` in the embedded configuration, or ``postgresql`` on
    SQLite: deselected rather than run as a pass that checked nothing."""
    if embedded and item.get_closest_marker("topology_production"):
        return True
    return sqlite and item.get_closest_marker("postgresql") is not None


def pytest_collection_modifyitems(config, items) -> None:  # type: ignore[no-untyped-def]
    """In the embedded configuration (SQLite, no Redis) the tests marked ``topology_production``
    are deselected: their subject (Celery workers, a Redis broker, several web processes) does
    not exist there; on SQLite so are those marked ``postgresql`` (TOAST compression, binary
    COPY). Every other test runs in both configurations."""
    from django.conf import settings

    from tests.live import embedded

    for item in items:  # the browser tests, by the fixture they all use
        if "_playwright" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.browser)
        if _is_live(item):
            item.add_marker(pytest.mark.live)
    _longest_first(items)
    sqlite = settings.DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3"
    if not (embedded() or sqlite):
        return
    keep, drop = [], []
    for item in items:
        (drop if _without_subject_here(item, embedded(), sqlite) else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
        _NOT_EMBEDDED.extend(item.nodeid for item in drop)


# The modules whose tests take longest in make test (seconds of one pass, .ci/run's durations),
# longest first. pytest-xdist's worksteal scheduler hands each worker a contiguous half of the
# collection and an idle worker steals from the end of another's queue, so a test that takes
# minutes and comes late in the order (the schema fuzzer: 280 s, under tests/security/) was the
# pass's last few minutes on one worker while the other had nothing left. Whole modules move, so
# their module-scoped live stacks still start once; the order within them is kept. A module
# missing from this list is only scheduled later, never left out.
LONGEST_FIRST = (
    "tests/security/test_schema_fuzz.py",  # 280 s
    "tests/security/browser/test_hostile_html.py",  # 100 s
    "tests/security/test_tenancy.py",  # 70 s, 45 of them the foreign-events matrix
    "tests/security/test_hostile_mail.py",  # 40 s
    "tests/chaos/test_smtp_crash.py",  # 34 s
    "tests/security/test_mass_assignment.py",  # 37 s
    "tests/security/test_smtp_limits.py",  # 20 s
    "tests/chaos/test_approval_gate.py",  # 18 s
    "tests/chaos/test_webhook_kills.py",  # 18 s
    "tests/mail/test_parsing_differential.py",  # 18 s
)


def _longest_first(items: list[pytest.Item]) -> None:
    """Moves the tests of ``LONGEST_FIRST``'s modules to the front, in that order (stable)."""
    rank = {path: n for n, path in enumerate(LONGEST_FIRST)}
    last = len(LONGEST_FIRST)
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], last))


# Under pytest-xdist (make test, make test-fast) the workers collect, deselect and record figures;
# each hands its lists to the controller when it stops, which prints them once.


def pytest_sessionfinish(session) -> None:  # type: ignore[no-untyped-def]
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # an xdist worker
        workeroutput["not_embedded"] = list(_NOT_EMBEDDED)
        workeroutput["figures"] = list(_FIGURES)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:  # type: ignore[no-untyped-def]
    output = getattr(node, "workeroutput", {})
    _NOT_EMBEDDED.extend(n for n in output.get("not_embedded", ()) if n not in _NOT_EMBEDDED)
    _FIGURES.extend(output.get("figures", ()))


def pytest_terminal_summary(terminalreporter) -> None:  # type: ignore[no-untyped-def]
    if _NOT_EMBEDDED:
        terminalreporter.section("embedded configuration")
        terminalreporter.write_line(
            f"{len(_NOT_EMBEDDED)} tests of the production topology or of PostgreSQL "
            "deselected (docs/testing.md):"
        )
        for nodeid in _NOT_EMBEDDED:
            terminalreporter.write_line(f"  {nodeid}")
    if _FIGURES:
        terminalreporter.section("figures")
        for line in _FIGURES:
            terminalreporter.write_line(line)


@pytest.fixture
def process_writer(transactional_db: None, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """A ``mail.smtpd.writer.ProcessWriter`` whose child uses this test's database (it is spawned
    with the environment of a live test process: ``tests.live.child_env``)."""
    import asyncio

    from django.db import connection

    from mail.smtpd.writer import ProcessWriter
    from tests.live import child_env

    env = child_env(connection.settings_dict["NAME"])
    for name in ("DATABASE_URL", "REDIS_URL", "CONN_MAX_AGE", "CELERY_TASK_ALWAYS_EAGER"):
        if name in env:
            monkeypatch.setenv(name, env[name])
        else:
            monkeypatch.delenv(name, raising=False)
    writer = ProcessWriter()
    yield writer
    asyncio.run(writer.close())
