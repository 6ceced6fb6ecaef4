"""``pigeonhole_client.verify_webhook`` accepts what the server signs (``webhooks.secrets.sign``,
the function deliveries use) and refuses a changed body, another secret, a stale or future
timestamp and a malformed header. No process, no database."""

from __future__ import annotations

import time

import pytest
from pigeonhole_client import InvalidSignature, verify_webhook

from webhooks import secrets

BODY = b'{"id":"dlv_1","type":"email.received","data":{}}'
SECRET = "whsec_test-secret"


def test_a_signature_of_the_server_verifies() -> None:
    header = secrets.sign(SECRET, int(time.time()), BODY)
    verify_webhook(BODY, header, SECRET)
    verify_webhook(BODY.decode(), header, SECRET)  # the body as text works too


@pytest.mark.parametrize(
    ("body", "header", "secret", "code"),
    [
        (BODY + b" ", None, SECRET, "invalid_signature"),  # header built below
        (BODY, None, "whsec_other", "invalid_signature"),
        (BODY, "t=abc,v1=00", SECRET, "invalid_signature"),
        (BODY, "", SECRET, "invalid_signature"),
    ],
)
def test_a_wrong_signature_is_refused(
    body: bytes, header: str | None, secret: str, code: str
) -> None:
    signed = header if header is not None else secrets.sign(SECRET, int(time.time()), BODY)
    with pytest.raises(InvalidSignature) as refused:
        verify_webhook(body, signed, secret)
    assert refused.value.code == code


@pytest.mark.parametrize("offset", [-300, 300, -3600])
def test_a_timestamp_300_s_or_more_away_is_refused(offset: int) -> None:
    now = time.time()
    header = secrets.sign(SECRET, int(now) + offset, BODY)
    with pytest.raises(InvalidSignature) as refused:
        verify_webhook(BODY, header, SECRET, now=int(now))
    assert refused.value.code == "stale_signature"
    verify_webhook(BODY, header, SECRET, tolerance=abs(offset) + 1, now=int(now))
