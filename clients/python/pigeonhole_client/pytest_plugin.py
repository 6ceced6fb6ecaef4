"""The pytest plugin (entry point ``pytest11: pigeonhole``): fixtures ``pigeonhole`` and ``inbox``.

- ``pigeonhole``: a :class:`~pigeonhole_client.Pigeonhole` for the session, configured by
  ``--pigeonhole-url`` / ``--pigeonhole-key`` or ``PIGEONHOLE_URL`` / ``PIGEONHOLE_API_KEY``;
- ``inbox``: a fresh inbox per test, named and tagged with the test's node id, deleted at
  teardown.

When a test that used ``inbox`` fails, its report gets a section "pigeonhole inbox …" listing
what the inbox received (time, sender, subject, extracted code): the first thing a person
debugging a red CI run wants to see.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Generator, Iterator
from typing import Any

import pytest

from .client import Inbox, Pigeonhole
from .errors import PigeonholeError

SECTION = "pigeonhole inbox"
MAX_LISTED = 20  # emails shown in a failure's section


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("pigeonhole", "Pigeonhole inboxes")
    group.addoption(
        "--pigeonhole-url",
        default=None,
        help="Pigeonhole instance root, e.g. http://127.0.0.1:8000 (default: $PIGEONHOLE_URL)",
    )
    group.addoption(
        "--pigeonhole-key",
        default=None,
        help="API key with read and write scopes (default: $PIGEONHOLE_API_KEY)",
    )


def _tag(nodeid: str) -> str:
    """The node id as an inbox tag (tags are at most 64 characters: a long id is cut and
    suffixed with a hash of the whole, so it still names one test)."""
    if len(nodeid) <= 64:
        return nodeid
    return nodeid[:55] + "~" + hashlib.sha1(nodeid.encode()).hexdigest()[:8]


@pytest.fixture(scope="session")
def pigeonhole(pytestconfig: pytest.Config) -> Iterator[Pigeonhole]:
    """The API client of the run."""
    try:
        client = Pigeonhole(
            pytestconfig.getoption("pigeonhole_url"),
            pytestconfig.getoption("pigeonhole_key"),
        )
    except PigeonholeError as exc:
        pytest.fail(f"pigeonhole: {exc.message}", pytrace=False)
    with client:
        yield client


@pytest.fixture
def inbox(pigeonhole: Pigeonhole, request: pytest.FixtureRequest) -> Iterator[Inbox]:
    """A fresh inbox for this test, deleted when the test ends."""
    nodeid = request.node.nodeid
    created = pigeonhole.inboxes.create(name=nodeid[:200], tags=[_tag(nodeid)])
    yield created
    with contextlib.suppress(PigeonholeError):
        created.delete()


def received_lines(inbox: Inbox) -> list[str]:
    """What the inbox received, one line per email (oldest first): time, sender, subject, code."""
    summaries = []
    for summary in inbox.emails(limit=MAX_LISTED):
        summaries.append(summary)
        if len(summaries) >= MAX_LISTED:
            break
    lines = []
    for summary in reversed(summaries):
        try:
            code = inbox._client.emails.get(summary.id).code
        except PigeonholeError:
            code = None
        lines.append(
            f"{summary.received_at}  from {summary.sender or '-'}  "
            f"subject {summary.subject!r}  code {code or '-'}"
        )
    return lines


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[Any]
) -> Generator[Any, Any, None]:
    outcome = yield
    report = outcome.get_result()
    if report.when != "call" or not report.failed:
        return
    used = getattr(item, "funcargs", {}).get("inbox")
    if not isinstance(used, Inbox):
        return
    try:
        lines = received_lines(used)
        if lines:
            body = "\n".join([f"{used.address} received {len(lines)} email(s):", *lines])
        else:
            body = f"{used.address} received nothing"
    except PigeonholeError as exc:  # the server is gone: say so instead of a second traceback
        body = f"could not list what {used.address} received: {exc}"
    report.sections.append((f"{SECTION} {used.address}", body))
