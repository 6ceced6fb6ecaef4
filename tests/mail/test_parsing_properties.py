"""Property tests for mail.message.parsing: parse_message never raises, its output stays well formed."""

from __future__ import annotations

import base64
import quopri
from datetime import UTC, datetime
from email.header import Header
from pathlib import Path

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from mail.message.parsing import (
    Address,
    ParsedAttachment,
    ParsedMessage,
    decode_part,
    parse_message,
)
from tests.sizes import examples

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "mime"
FIXTURE_BYTES = [path.read_bytes() for path in sorted(FIXTURES.glob("*.eml"))]

FAST = settings(
    max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
ROUND_TRIP = settings(max_examples=examples(150), deadline=None)

FORBIDDEN_IN_NAMES = set("/\\") | {chr(c) for c in range(0x20)} | {"\x7f"}


def assert_well_formed(msg: ParsedMessage, raw: bytes) -> None:
    """The invariants downstream code (storage, rendering) relies on; among them, that an
    attachment's span of ``raw`` gives its bytes again (the store keeps only the span)."""
    assert isinstance(msg, ParsedMessage)
    strings = [msg.message_id, msg.subject, msg.text, msg.html, msg.in_reply_to]
    strings += [value for pair in msg.headers for value in pair]
    strings += msg.references + msg.defects
    addresses = msg.to + msg.cc + msg.reply_to + ([msg.from_] if msg.from_ else [])
    for address in addresses:
        assert isinstance(address, Address)
        strings += [address.address, address.name]
    for attachment in msg.attachments:
        assert isinstance(attachment, ParsedAttachment)
        assert isinstance(attachment.content, bytes)
        assert isinstance(attachment.inline, bool)
        assert len(attachment.filename) <= 255
        assert not FORBIDDEN_IN_NAMES & set(attachment.filename)
        maintype, slash, subtype = attachment.content_type.partition("/")
        assert slash and maintype and subtype
        assert attachment.content_type == attachment.content_type.lower()
        strings += [attachment.filename, attachment.content_id]
        if attachment.span is not None:
            start, end = attachment.span
            assert 0 <= start <= end <= len(raw)
            assert decode_part(raw[start:end], attachment.transfer_encoding) == attachment.content
    for value in strings:
        assert isinstance(value, str)
        value.encode("utf-8")  # no lone surrogates
        assert "\x00" not in value or value in msg.defects
    for value in [msg.subject, *(value for _, value in msg.headers)]:
        assert "\r" not in value and "\n" not in value
    assert "\r\n" not in msg.text and "\r\n" not in msg.html
    if msg.date is not None:
        assert isinstance(msg.date, datetime) and msg.date.utcoffset() is not None
        assert msg.date.tzinfo == UTC
    assert len(msg.defects) <= 101


# --- never raises -----------------------------------------------------------------------------


@FAST
@given(st.binary(max_size=4096))
def test_arbitrary_bytes(raw: bytes) -> None:
    assert_well_formed(parse_message(raw), raw)


FRAGMENTS = [
    b"\r\n",
    b"\n",
    b"\r",
    b"\r\n\r\n",
    b" ",
    b"\t",
    b"\x00",
    b"\xff\xfe",
    b"From: ",
    b"To: ",
    b"Cc: ",
    b"Subject: ",
    b"Date: ",
    b"Message-ID: ",
    b"References: ",
    b"Content-Type: ",
    b"Content-Disposition: ",
    b"Content-Transfer-Encoding: ",
    b"Content-ID: ",
    b"multipart/mixed",
    b"multipart/alternative",
    b"multipart/related",
    b"multipart/digest",
    b"message/rfc822",
    b"text/plain",
    b"text/html",
    b"image/png",
    b"; boundary=b",
    b'; boundary="b"',
    b"; charset=utf-8",
    b"; charset=x-unknown",
    b"; charset=utf-16",
    b"; name=a.pdf",
    b"; filename*=utf-8''%E2%82%AC.pdf",
    b"; filename*0*=iso-8859-1''a%FC; filename*1=b",
    b"attachment",
    b"inline",
    b"base64",
    b"quoted-printable",
    b"x-uuencode",
    b"--b",
    b"--b--",
    b"=?utf-8?b?w6k=?=",
    b"=?iso-8859-1?q?caf=E9?=",
    b"=?x?q?",
    b"?=",
    b"=",
    b"=3D",
    b"<id@x>",
    b'"Name, Q" <a@b.example>',
    b"(comment",
    b"SGVsbG8gd29ybGQ=",
    b"Mon, 1 Jan 2024 10:00:00 +0000",
    b"begin 644 x\n",
]

MIME_ISH = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.binary(max_size=12)), max_size=60).map(
    b"".join
)


@FAST
@given(MIME_ISH)
def test_mime_shaped_noise(raw: bytes) -> None:
    assert_well_formed(parse_message(raw), raw)


@st.composite
def mutated_fixture(draw: st.DrawFn) -> bytes:
    data = bytearray(draw(st.sampled_from(FIXTURE_BYTES)))
    for _ in range(draw(st.integers(min_value=1, max_value=8))):
        op = draw(st.sampled_from(["flip", "insert", "delete", "duplicate"]))
        size = len(data)
        at = draw(st.integers(min_value=0, max_value=size))
        if op == "flip" and at < size:
            data[at] ^= draw(st.integers(min_value=1, max_value=255))
        elif op == "insert":
            data[at:at] = draw(
                st.one_of(st.binary(min_size=1, max_size=16), st.sampled_from(FRAGMENTS))
            )
        elif op == "delete":
            del data[at : at + draw(st.integers(min_value=1, max_value=64))]
        elif op == "duplicate":
            chunk = data[at : at + draw(st.integers(min_value=1, max_value=256))]
            where = draw(st.integers(min_value=0, max_value=size))
            data[where:where] = chunk
    return bytes(data)


@FAST
@given(mutated_fixture())
def test_mutated_fixtures(raw: bytes) -> None:
    assert_well_formed(parse_message(raw), raw)


@FAST
@given(st.sampled_from(FIXTURE_BYTES), st.integers(min_value=0, max_value=4096))
def test_truncated_fixtures(raw: bytes, keep: int) -> None:
    assert_well_formed(parse_message(raw[:keep]), raw[:keep])


# --- round trips ------------------------------------------------------------------------------

# Printable text: no control characters (parse_message folds CR/LF and drops NUL) or surrogates.
PRINTABLE = st.text(
    alphabet=st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp")), min_size=1, max_size=80
)


@ROUND_TRIP
@given(PRINTABLE, st.sampled_from(["utf-8", "iso-8859-1", "koi8-r"]))
def test_encoded_word_subjects_round_trip(subject: str, charset: str) -> None:
    try:
        subject.encode(charset)
    except UnicodeEncodeError:
        charset = "utf-8"
    encoded = Header(subject, charset, maxlinelen=60).encode(linesep="\r\n")
    msg = parse_message(b"Subject: " + encoded.encode("ascii") + b"\r\n\r\nbody")

    assert msg.subject == subject.strip()
    assert msg.defects == []


BODY_TEXT = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\x00"),
    max_size=300,
)


@ROUND_TRIP
@given(
    BODY_TEXT,
    st.sampled_from(["utf-8", "iso-8859-1", "koi8-r", "shift_jis", "utf-16"]),
    st.sampled_from(["base64", "quoted-printable", "8bit"]),
    st.booleans(),
)
def test_text_bodies_round_trip(text: str, charset: str, cte: str, multipart: bool) -> None:
    try:
        payload = text.encode(charset)
    except UnicodeEncodeError:
        charset, payload = "utf-8", text.encode("utf-8")
    if payload.decode(charset, "replace") != text:  # not a round trip in the codec itself
        charset, payload = "utf-8", text.encode("utf-8")  # (shift_jis encodes ¥ as a backslash)
    if cte == "base64":
        body = base64.encodebytes(payload)
    elif cte == "quoted-printable":
        body = quopri.encodestring(payload)
    else:
        cte = "binary"  # 8bit with arbitrary line content
        body = payload
    part = (
        f"Content-Type: text/plain; charset={charset}\r\nContent-Transfer-Encoding: {cte}\r\n\r\n"
    ).encode() + body
    if multipart:
        boundary = b"=_b0undary_=.7f3a"  # cannot occur in base64/qp output or in our alphabet
        assume(not (cte == "binary" and boundary in body))  # not a valid multipart, drawn again
        raw = (
            b'Content-Type: multipart/mixed; boundary="'
            + boundary
            + b'"\r\n\r\n--'
            + boundary
            + b"\r\n"
            + part
            + b"\r\n--"
            + boundary
            + b"--\r\n"
        )
    else:
        raw = part
    msg = parse_message(raw)

    assert msg.text == text
    assert msg.defects == []


FILENAME = st.text(
    alphabet=st.sampled_from("abcXYZ019 -_.()éüßøЖ日本語€"), min_size=1, max_size=60
).filter(lambda name: name.strip() == name and name not in (".", ".."))


@ROUND_TRIP
@given(FILENAME, st.sampled_from(["rfc2231", "continuations", "encoded-word", "plain"]))
def test_filenames_round_trip(filename: str, style: str) -> None:
    utf8 = filename.encode("utf-8")
    quoted = "".join(f"%{byte:02X}" for byte in utf8)
    if style == "rfc2231":
        param = f"filename*=UTF-8''{quoted}"
    elif style == "continuations":
        pieces = [quoted[i : i + 12] for i in range(0, len(quoted), 12)]
        param = "; ".join(
            f"filename*{index}*=" + ("UTF-8''" if index == 0 else "") + piece
            for index, piece in enumerate(pieces)
        )
    elif style == "encoded-word":
        param = f'filename="=?UTF-8?B?{base64.b64encode(utf8).decode()}?="'
    else:
        param = 'filename="' + filename.replace("\\", "\\\\").replace('"', '\\"') + '"'
    raw = (
        f"Content-Type: application/octet-stream\r\nContent-Disposition: attachment; {param}\r\n"
        "\r\ncontent"
    ).encode()
    msg = parse_message(raw)

    assert [attachment.filename for attachment in msg.attachments] == [filename]
    assert msg.defects == []
