"""The bytes of a forwarded copy (``outbox.mime.forwarded``): the sender's own headers replaced
by ours, everything else byte for byte, whatever the line ends, folding or names."""

from __future__ import annotations

import email
from email import policy

import pytest

from outbox import mime

INBOX = "fwd@pigeonhole.test"


def parsed(raw: bytes) -> email.message.EmailMessage:
    return email.message_from_bytes(raw, policy=policy.default)  # type: ignore[return-value]


@pytest.mark.parametrize("eol", [b"\r\n", b"\n"])
def test_sender_headers_replaced_and_the_rest_kept(eol: bytes) -> None:
    body = eol.join([b"Line one", b"", b"-- ", b"Line three", b""])
    head = eol.join(
        [
            b"Received: from mx.bank.example",
            b"From: Your Bank <security@bank.example>",
            b"Sender: bulk@bank.example",
            b"DKIM-Signature: v=1; a=rsa-sha256;",
            b"\tb=Zm9vYmFy",
            b"To: " + INBOX.encode(),
            b"Subject: Account",
            b" locked",
            b"Reply-To: pay@elsewhere.example",
            b"Return-Path: <bounce@bank.example>",
            b"",
        ]
    )
    raw = head + eol + body
    copy, display = mime.forwarded(
        raw, inbox_address=INBOX, sender_address="security@bank.example", sender_name="Your Bank"
    )
    assert display == "Your Bank <security@bank.example> via Pigeonhole"
    assert copy.endswith(eol + body)  # the body, byte for byte
    assert b"\r\n" not in copy if eol == b"\n" else b"\n" not in copy.replace(b"\r\n", b"")
    msg = parsed(copy)
    assert msg["From"].addresses[0].addr_spec == INBOX
    assert msg["From"].addresses[0].display_name == display
    assert msg["Reply-To"].addresses[0].addr_spec == "security@bank.example"
    assert msg[mime.LOOP_HEADER] == INBOX
    for gone in ("Sender", "DKIM-Signature", "Return-Path"):
        assert msg[gone] is None, gone
    assert b"b=Zm9vYmFy" not in copy  # the continuation went with its field
    assert msg["Subject"] == "Account locked" and msg["Received"] == "from mx.bank.example"
    assert len(msg.get_all("From")) == 1 and len(msg.get_all("Reply-To")) == 1


def test_hostile_names_stay_in_the_display_name() -> None:
    copy, display = mime.forwarded(
        b"Subject: hi\r\n\r\nbody\r\n",
        inbox_address=INBOX,
        sender_address="a@b.example",
        sender_name='Jürgen "Boss", CEO\r\nBcc: everyone@example.com',
    )
    assert "\r" not in display and "\n" not in display
    msg = parsed(copy)
    assert msg["Bcc"] is None
    (sender,) = msg["From"].addresses
    assert sender.addr_spec == INBOX and sender.display_name.startswith('Jürgen "Boss", CEO Bcc:')
    assert msg["Reply-To"].addresses[0].addr_spec == "a@b.example"


def test_no_sender_and_no_body() -> None:
    copy, display = mime.forwarded(
        b"Subject: only headers", inbox_address=INBOX, sender_address="", sender_name=""
    )
    assert display == "unknown sender via Pigeonhole"
    msg = parsed(copy)
    assert msg["From"].addresses[0].addr_spec == INBOX and msg["Reply-To"] is None
    assert msg["Subject"] == "only headers" and copy.endswith(b"\r\n\r\n")
