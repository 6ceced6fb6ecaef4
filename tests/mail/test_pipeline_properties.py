"""Property: whatever bytes arrive, the pipeline stores them (raw kept byte for byte), never raises."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apikeys.models import Workspace
from inboxes import services as inbox_services
from inboxes.models import Inbox
from mail import pipeline
from mail.models import RawMessage
from tests.sizes import examples

pytestmark = pytest.mark.django_db

FIXTURES = sorted((Path(__file__).parent.parent / "fixtures" / "mime").glob("*.eml"))
SEEDS = [path.read_bytes() for path in FIXTURES] or [b"Subject: x\r\n\r\nbody\r\n"]


def _mutate(data: bytes, rnd: random.Random, steps: int) -> bytes:
    buf = bytearray(data)
    for _ in range(steps):
        op = rnd.randrange(5)
        pos = rnd.randrange(len(buf) + 1)
        if op == 0 and buf:  # flip a byte
            buf[min(pos, len(buf) - 1)] = rnd.randrange(256)
        elif op == 1:  # insert noise, often MIME-ish
            noise = rnd.choice(
                [b"\r\n", b"--", b"=?utf-8?B?", b"\x00", b"boundary=", b"\n\n", b";"]
            )
            buf[pos:pos] = noise
        elif op == 2 and buf:  # delete a slice
            buf[pos : pos + rnd.randrange(1, 64)] = b""
        elif op == 3 and buf:  # duplicate a slice
            end = min(len(buf), pos + rnd.randrange(1, 256))
            buf[pos:pos] = buf[pos:end]
        else:  # truncate
            del buf[pos:]
    return bytes(buf)


@pytest.fixture
def inbox(workspace: Workspace) -> Inbox:
    return inbox_services.inbox_create(workspace=workspace, local_part="fuzz")


def _check(inbox: Inbox, raw: bytes) -> None:
    delivery = pipeline.receive_one(raw, to=inbox.address, mail_from="fuzz@example.org")
    assert delivery.email_id is not None, delivery
    assert bytes(RawMessage.objects.get(email_id=delivery.email_id).content) == raw


@settings(
    max_examples=examples(150),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(raw=st.binary(max_size=4096))
def test_arbitrary_bytes(inbox: Inbox, raw: bytes) -> None:
    _check(inbox, raw)


@settings(
    max_examples=examples(250),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    seed=st.sampled_from(range(len(SEEDS))),
    rnd=st.randoms(use_true_random=False),
    steps=st.integers(1, 12),
)
def test_mutated_real_messages(inbox: Inbox, seed: int, rnd: random.Random, steps: int) -> None:
    _check(inbox, _mutate(SEEDS[seed], rnd, steps))


def test_fixture_corpus_is_present() -> None:
    assert len(FIXTURES) >= 15
