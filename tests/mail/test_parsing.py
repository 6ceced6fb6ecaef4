"""Tests for mail.message.parsing: fixture messages under tests/fixtures/mime plus focused unit cases."""

from __future__ import annotations

import base64
import hashlib
from datetime import UTC, datetime
from pathlib import Path

import pytest

from mail.message.parsing import (
    MAX_DEPTH,
    MAX_PARTS,
    Address,
    ParsedAttachment,
    ParsedMessage,
    decode_part,
    parse_message,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "mime"

PDF_SHA256 = "da8e5597ec9fe6a2d5c4e7389c48bafbdebf417fc94cb23d9e603f121995c2d3"
PNG_SHA256 = "68c41bb798155f8ad4c0280b6540e49f18457b263986fa6edbf58dc0821f3cb1"
LOGO_SHA256 = "35c9bcf6327020afed28f87b0380795826b66ec6130a1d5a7db0c8b9e7d253a7"
INBOX = Address(address="inbox-7f3a@pigeonhole.test", name="")


def parse_fixture(name: str) -> ParsedMessage:
    return parse_message((FIXTURES / name).read_bytes())


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def crlf(text: str) -> bytes:
    return text.replace("\n", "\r\n").encode("utf-8")


# --- fixtures ---------------------------------------------------------------------------------


def test_plain_ascii() -> None:
    msg = parse_fixture("plain_ascii.eml")

    assert msg.message_id == "20240514092105.4711@mail.example.com"
    assert msg.from_ == Address(address="alice@example.com", name="Alice Example")
    assert msg.to == [INBOX]
    assert msg.cc == []
    assert msg.reply_to == []
    assert msg.subject == "Your verification code"
    assert msg.text == (
        "Hello,\n\nYour verification code is 482913.\n\nIt expires in 10 minutes.\n\n"
        "-- \nExample Corp\n"
    )
    assert msg.html == ""
    assert msg.attachments == []
    assert msg.in_reply_to == ""
    assert msg.references == []
    assert msg.date == datetime(2024, 5, 14, 9, 21, 5, tzinfo=UTC)
    assert msg.defects == []
    assert msg.headers == [
        ("Return-Path", "<alice@example.com>"),
        (
            "Received",
            "from mail.example.com (mail.example.com [192.0.2.10])"
            "\tby mx.pigeonhole.test (Postfix) with ESMTPS id 4F2A31C0042"
            "\tfor <inbox-7f3a@pigeonhole.test>; Tue, 14 May 2024 09:21:07 +0000 (UTC)",
        ),
        ("From", "Alice Example <alice@example.com>"),
        ("To", "inbox-7f3a@pigeonhole.test"),
        ("Subject", "Your verification code"),
        ("Date", "Tue, 14 May 2024 11:21:05 +0200"),
        ("Message-ID", "<20240514092105.4711@mail.example.com>"),
        ("MIME-Version", "1.0"),
        ("Content-Type", "text/plain; charset=us-ascii"),
        ("Content-Transfer-Encoding", "7bit"),
    ]


def test_header_lookup_is_case_insensitive_and_returns_first() -> None:
    msg = parse_fixture("many_recipients.eml")

    assert msg.header("message-id") == "<many@corp.example>"
    assert msg.header("CC") == '"Ops" <ops@corp.example>, Mixed.Case@Corp.EXAMPLE'
    assert msg.header("to") == msg.headers[1][1]
    assert msg.header("X-Missing") == ""


ALTERNATIVE_TEXT = """\
Welcome aboard, Zoë!

Thanks for signing up for Acme Cloud. Please confirm your e-mail address so
we know it’s really you:

https://app.acme.example/confirm?token=8f14e45fceea167a5a36dedd4bea2543

This link expires in 24 hours. If you did not create an account you can
ignore this message.

— The Acme Cloud team

Acme Cloud Ltd · 1 Example Street · London
Unsubscribe: https://acme.example/unsubscribe?u=7f3a
"""


def test_multipart_alternative() -> None:
    msg = parse_fixture("alternative.eml")

    assert msg.message_id == "0100018f7d2c.a1b2c3d4@mailer.acme.example"
    assert msg.from_ == Address(address="hello@acme.example", name="Acme Cloud")
    assert msg.to == [Address(address="inbox-7f3a@pigeonhole.test", name="Zoe Test")]
    assert msg.subject == "Confirm your e-mail address"
    assert msg.date == datetime(2024, 5, 15, 16, 2, 10, tzinfo=UTC)
    assert msg.text == ALTERNATIVE_TEXT
    assert msg.html.startswith('<!DOCTYPE html>\n<html lang="en">\n<head><meta charset="utf-8">')
    assert msg.html.endswith("</table></td></tr></table>\n</body>\n</html>\n")
    assert "<h1>Welcome aboard, Zoë!</h1>" in msg.html
    assert "so we know it’s really you.</p>" in msg.html  # soft line breaks joined
    assert "\r" not in msg.html
    assert msg.attachments == []
    assert msg.defects == []
    assert [name for name, _ in msg.headers].count("Received") == 2
    assert msg.header("List-Unsubscribe") == (
        "<https://acme.example/unsubscribe?u=7f3a>, <mailto:unsubscribe-7f3a@acme.example>"
    )
    assert msg.header("Authentication-Results").startswith(
        "mx.pigeonhole.test;\tdkim=pass header.d=acme.example"
    )


def test_attachments_pdf_and_png() -> None:
    msg = parse_fixture("attachments.eml")

    assert msg.subject == "Invoice 2024-0042"
    assert msg.date == datetime(2024, 5, 16, 12, 0, tzinfo=UTC)
    assert msg.text == "Please find your invoice and the usage chart attached.\n"
    assert msg.html == ""
    assert [(a.filename, a.content_type, a.content_id, a.inline) for a in msg.attachments] == [
        ("invoice-2024-0042.pdf", "application/pdf", "", False),
        ("chart.png", "image/png", "", False),  # declared as image/PNG
    ]
    pdf, png = msg.attachments
    assert pdf.content.startswith(b"%PDF-1.4\n") and len(pdf.content) == 440
    assert sha256(pdf.content) == PDF_SHA256
    assert png.content.startswith(b"\x89PNG\r\n\x1a\n") and len(png.content) == 73
    assert sha256(png.content) == PNG_SHA256
    assert msg.defects == []


def test_related_inline_images() -> None:
    msg = parse_fixture("related_inline_image.eml")

    assert msg.text == "See our spring collection."
    assert msg.html == (
        '<p><img src="cid:logo@brand.example" alt="Brand"> See our spring collection.</p>\n'
        '<p><img src="CID:banner-01"></p>'
    )
    assert [(a.filename, a.content_type, a.content_id, a.inline) for a in msg.attachments] == [
        ("logo.png", "image/png", "logo@brand.example", True),  # in multipart/related
        ("", "image/png", "banner-01", True),  # disposition inline
        ("referenced.png", "image/png", "not-referenced@brand.example", False),
    ]
    assert sha256(msg.attachments[0].content) == LOGO_SHA256
    assert sha256(msg.attachments[1].content) == PNG_SHA256
    assert msg.defects == []


def test_iso_8859_1_quoted_printable_body() -> None:
    msg = parse_fixture("latin1_qp.eml")

    assert msg.from_ == Address(address="juergen@beispiel.example", name="Jürgen Müller")
    assert msg.subject == "Grüße aus München"
    assert msg.text == (
        "Hallo,\n\nviele Grüße aus München! Das Wetter ist schön, die Straßen sind voll und "
        "der Kaffee kostet 3,50 ¤.\n\nJürgen\n"
    )
    assert msg.date == datetime(2024, 5, 18, 5, 15, tzinfo=UTC)
    assert msg.defects == []


def test_base64_utf8_body() -> None:
    msg = parse_fixture("base64_utf8.eml")

    assert msg.subject == "Привет"
    assert msg.text == "Привет, мир! 🌍\nЭто тест кодировки base64.\n"
    assert msg.date == datetime(2024, 5, 19, 9, 0, tzinfo=UTC)
    assert msg.defects == []


def test_8bit_utf8_body_and_headers_without_declared_charset() -> None:
    msg = parse_fixture("8bit_utf8.eml")

    assert msg.from_ == Address(address="renee@exemple.example", name="Renée Dupont")
    assert msg.subject == "Grüße — raw UTF-8 header"
    assert msg.text == "Ünïcödé bödy — sent as 8bit with no charset.\nÇa marche très bien.\n"
    assert msg.header("subject") == "Grüße — raw UTF-8 header"
    assert msg.defects == []


def test_encoded_word_subject_and_names() -> None:
    msg = parse_fixture("encoded_words.eml")

    # UTF-8 B and Q words, a character split across two words, ISO-8859-1 Q words.
    assert msg.subject == "🎉 Party time — café at 8 and à bientôt"
    assert msg.from_ == Address(address="PIRARD@vm1.ulg.ac.be", name="André Pirard")
    assert msg.to == [
        Address(address="taro@example.jp", name="山田太郎"),
        Address(address="zoe@example.org", name="Zoë Saldana"),  # quoted encoded word
    ]
    assert msg.cc == [Address(address="francois@example.fr", name="François Lefèvre")]
    assert msg.header("From") == "André Pirard <PIRARD@VM1.ULG.AC.BE>"
    assert msg.header("Subject") == msg.subject
    assert msg.defects == []


def test_rfc2231_and_encoded_word_filenames_are_decoded_and_sanitised() -> None:
    msg = parse_fixture("rfc2231_filename.eml")

    assert msg.text == "Three attachments with encoded names."
    assert [(a.filename, a.content_type) for a in msg.attachments] == [
        ("€ rates 2024.pdf", "application/pdf"),
        ("Grüße an alle Kollegen.txt", "text/plain"),  # continuations, ISO-8859-1
        (
            "Отчёт.docx",  # RFC 2047 inside a quoted parameter
            "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        ),
        ("job.sh", "application/octet-stream"),  # path, BEL and ESC removed
    ]
    assert sha256(msg.attachments[0].content) == PDF_SHA256
    assert msg.attachments[1].content == b"Hallo!"
    assert msg.attachments[2].content == b"PK\x03\x04\x14\x00\x00\x00\x08\x00"
    assert msg.attachments[3].content == b"#!/bin/sh\n"
    assert msg.defects == []


def test_nested_multipart() -> None:
    msg = parse_fixture("nested_multipart.eml")

    assert msg.text == "Level two plain text."
    assert msg.html == '<p>Level three <b>html</b> <img src="cid:dot@nest"></p>'
    assert [(a.filename, a.content_type, a.content_id, a.inline) for a in msg.attachments] == [
        ("", "image/png", "dot@nest", True),
        ("archive.zip", "application/zip", "", False),
        ("", "text/plain", "", True),  # a second inline text part is kept, not dropped
    ]
    assert sha256(msg.attachments[0].content) == PNG_SHA256
    assert msg.attachments[1].content == b"PK\x05\x06" + bytes(18)
    assert msg.attachments[2].content == b"Second text part (footer)."
    assert msg.defects == []


INNER_MESSAGE = """\
From: Original Sender <orig@example.com>
To: colleague@example.com
Subject: Quarterly numbers
Date: Mon, 13 May 2024 08:00:00 +0000
Message-ID: <orig-1@example.com>
MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="inner-b"

--inner-b
Content-Type: text/plain; charset=utf-8

The numbers are attached.
--inner-b
Content-Type: text/csv; name="q1.csv"
Content-Disposition: attachment; filename="q1.csv"

quarter,revenue
Q1,1000
--inner-b--
"""


def test_message_rfc822_attachment_is_kept_whole() -> None:
    msg = parse_fixture("rfc822_attachment.eml")

    assert msg.subject == "Fwd: Quarterly numbers"
    assert msg.text == "See the forwarded message."
    assert [(a.filename, a.content_type, a.inline) for a in msg.attachments] == [
        ("message.eml", "message/rfc822", True),
        ("second.eml", "message/rfc822", False),
    ]
    assert msg.attachments[0].content == crlf(INNER_MESSAGE)
    assert msg.attachments[1].content == b"From: x@example.com\r\nSubject: tiny\r\n\r\ntiny body"
    # The forwarded message is an attachment: its parts do not leak into ours.
    assert parse_message(msg.attachments[0].content).attachments[0].filename == "q1.csv"
    assert msg.defects == []


def test_reply_threading_headers() -> None:
    msg = parse_fixture("reply.eml")

    assert msg.message_id == "CAB7x=reply-3@mail.example.com"
    assert msg.in_reply_to == "CAB7x=reply-2@mail.example.com"
    assert msg.references == [
        "CAB7x=orig-1@mail.example.com",
        "CAB7x=reply-1@mail.example.com",
        "CAB7x=reply-2@mail.example.com",
    ]
    assert msg.subject == "Re: Re: Lunch on Friday?"
    assert msg.from_ == Address(address="bob@example.com", name="Bob")
    assert msg.to == [Address(address="alice@example.com", name="Alice")]
    assert msg.text == "Friday works.\n\n> Does Friday work?\n"
    assert msg.date == datetime(2024, 5, 25, 19, 34, 56, tzinfo=UTC)
    assert msg.defects == []


def test_several_to_cc_and_reply_to() -> None:
    msg = parse_fixture("many_recipients.eml")

    assert msg.from_ == Address(address="lead@corp.example", name="Team Lead")
    assert msg.to == [
        Address(address="jane.doe@corp.example", name="Doe, Jane"),
        Address(address="john@corp.example", name=""),
        Address(address="pat@corp.example", name=""),  # group members
        Address(address="sam@corp.example", name=""),
        Address(address="extra@corp.example", name=""),  # second To header
    ]
    assert msg.cc == [
        Address(address="ops@corp.example", name="Ops"),
        Address(address="Mixed.Case@corp.example", name=""),  # local part kept as written
        Address(address="finance@corp.example", name="Finance Dept"),  # comment as name
    ]
    assert msg.reply_to == [
        Address(address="noreply@corp.example", name=""),
        Address(address="help@corp.example", name="Helpdesk"),
    ]
    assert msg.text == "Agenda attached (not really).\n"
    assert msg.defects == []


def test_bare_lf_line_endings() -> None:
    raw = (FIXTURES / "bare_lf.eml").read_bytes()
    assert b"\r" not in raw
    msg = parse_message(raw)

    assert msg.subject == "Bare LF line endings"  # folded header unfolded
    assert msg.text == "Line one\nLine two"
    assert msg.html == "<p>Line one<br>Line two</p>"
    assert msg.date == datetime(2024, 5, 27, 0, 0, tzinfo=UTC)
    assert msg.defects == []


def test_unknown_charset_falls_back_to_utf8_with_defect() -> None:
    msg = parse_fixture("unknown_charset.eml")

    assert msg.subject == "café"
    assert msg.text == "Déjà vu in an unknown charset.\n"
    assert msg.defects == [
        "unknown charset 'x-unknown' in header",
        "unknown charset 'x-unknown' in part 1",
    ]


def test_missing_boundary_is_guessed() -> None:
    msg = parse_fixture("missing_boundary.eml")

    assert msg.text == "The boundary parameter was lost."
    assert [(a.filename, a.content_type, a.content) for a in msg.attachments] == [
        ("data.bin", "application/octet-stream", b"\x00\x01\x02\x03\x04"),
    ]
    assert msg.defects == [
        "missing boundary in multipart/mixed (part 1)",
        "guessed boundary 'frontier' in part 1",
    ]


def test_duplicate_and_reused_boundaries() -> None:
    msg = parse_fixture("duplicate_boundary.eml")

    assert msg.text == "Plain alternative."
    assert msg.html == "<p>HTML alternative.</p>"
    assert [(a.filename, a.content_type, a.content) for a in msg.attachments] == [
        ("rows.csv", "text/csv", b"a,b\r\n1,2"),
    ]
    assert msg.defects == [
        "duplicate parameter 'boundary' in Content-Type",
        "boundary reused after its close delimiter in part 1",
        "empty multipart/alternative in part 2",
        "empty part in multipart/mixed",
    ]


def test_nul_bytes_removed_from_text_but_kept_in_attachments() -> None:
    msg = parse_fixture("nul_bytes.eml")

    assert msg.subject == "NUL in subject"
    assert msg.header("Subject") == "NUL in subject"
    assert msg.text == "beforeafterend"
    assert [(a.filename, a.content) for a in msg.attachments] == [
        ("raw.bin", b"\x00\x01\x02\x00\xff"),
    ]
    assert msg.defects == [
        "NUL bytes removed from Subject header",
        "NUL characters removed from text/plain body (part 2)",
    ]


def test_truncated_base64() -> None:
    msg = parse_fixture("truncated_base64.eml")

    assert msg.text == "Hello world"  # missing padding
    (pdf,) = msg.attachments
    assert pdf.filename == "cut.pdf"
    # 101 base64 characters: 25 whole quanta (75 bytes) and a lone sextet that is dropped.
    assert (
        pdf.content
        == b"%PDF-1.4\n1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj\n2 0 obj << /Type "
    )
    assert msg.defects == [
        "missing close delimiter in part 1",
        "invalid base64 in part 2",
        "invalid base64 in part 3",
    ]


def test_no_headers_at_all() -> None:
    msg = parse_fixture("no_headers.eml")

    assert msg.headers == []
    assert msg.from_ is None
    assert msg.subject == ""
    assert msg.text == (
        "This message has no header block at all.\n"
        "It is just text, as some broken scripts send it.\n"
    )
    assert msg.defects == ["message has no headers"]


def test_headers_without_a_body() -> None:
    msg = parse_fixture("headers_only.eml")

    assert msg.subject == "Headers without a body"
    assert msg.message_id == "headers-only@only.example"
    assert msg.from_ == Address(address="headers@only.example", name="")
    assert msg.text == ""
    assert msg.html == ""
    assert msg.attachments == []
    assert msg.defects == []


def test_empty_fixture_and_empty_bytes() -> None:
    assert (FIXTURES / "empty.eml").read_bytes() == b""
    for raw in (parse_fixture("empty.eml"), parse_message(b""), parse_message(b"\r\n \r\n")):
        assert raw == ParsedMessage(defects=["empty message"])


# --- headers ----------------------------------------------------------------------------------


def test_encoded_words_adjacent_whitespace_and_errors() -> None:
    raw = (
        b"Subject: =?utf-8?q?a?= =?utf-8?q?b?=  plain  =?utf-8?b?w6k?= "
        b"=?utf-16?b?//5oAGkA?= =?bogus?q?x?==?utf-8?q?y?=\r\n\r\n"
    )
    msg = parse_message(raw)

    # Whitespace between adjacent words goes, other text stays, missing padding is tolerated,
    # words glued together are still decoded.
    assert msg.subject == "ab  plain  éhixy"
    assert msg.defects == ["unknown charset 'bogus' in header"]


def test_encoded_word_with_rfc2231_language_and_undecodable_bytes() -> None:
    msg = parse_message(b"Subject: =?UTF-8*en?Q?caf=C3=A9?= =?utf-8?q?=FF?=\r\n\r\n")

    assert msg.subject == "café\ufffd"
    assert msg.defects == ["undecodable utf-8 bytes in header replaced"]


def test_non_utf8_8bit_header_decoded_as_latin1() -> None:
    msg = parse_message(b"Subject: Gr\xfc\xdfe\r\n\r\nbody")

    assert msg.subject == "Grüße"
    assert msg.defects == ["non-UTF-8 bytes in Subject header decoded as latin-1"]


def test_dates() -> None:
    def date_of(value: bytes) -> datetime | None:
        return parse_message(b"Date: " + value + b"\r\n\r\nx").date

    assert date_of(b"Mon, 1 Jan 2024 10:00:00 -0000") == datetime(2024, 1, 1, 10, tzinfo=UTC)
    assert date_of(b"1 Jan 2024 10:00:00 +0530") == datetime(2024, 1, 1, 4, 30, tzinfo=UTC)
    assert date_of(b"Mon, 1 Jan 24 10:00:00 EST") == datetime(2024, 1, 1, 15, tzinfo=UTC)
    msg = parse_message(b"Date: yesterday-ish\r\n\r\nx")
    assert msg.date is None
    assert msg.defects == ["unparseable Date header 'yesterday-ish'"]


def test_message_id_forms() -> None:
    msg = parse_message(
        b"Message-ID: bare-id@example.com\r\n"
        b"In-Reply-To: <parent@x> (sent by a comment)\r\n"
        b"References: <a@x>,<b\r\n @x> <c@x>\r\n\r\n"
    )

    assert msg.message_id == "bare-id@example.com"
    assert msg.in_reply_to == "parent@x"
    assert msg.references == ["a@x", "b@x", "c@x"]


def test_unparseable_addresses_keep_what_can_be_read() -> None:
    msg = parse_message(
        b'From: "unterminated <a@b.example>\r\nTo: Undisclosed recipients:;\r\n'
        b"Cc: just a name, <broken\r\n\r\n"
    )

    assert msg.from_ == Address(address="a@b.example", name="")
    assert msg.to == []
    # email.utils.getaddresses reads "just a name" as the addr-spec "just".
    assert msg.cc == [Address(address="", name="just"), Address(address="", name="broken")]
    assert msg.defects == [
        "unparseable address in From header",
        "unparseable address in Cc header",
    ]


def test_mbox_from_line_is_skipped() -> None:
    msg = parse_message(b"From sender@example.com Mon Jan  1 00:00:00 2024\nSubject: hi\n\nbody\n")

    assert msg.subject == "hi"
    assert msg.headers == [("Subject", "hi")]
    assert msg.text == "body\n"
    assert msg.defects == []


def test_missing_blank_line_after_headers() -> None:
    msg = parse_message(b"Subject: hi\r\nthis is already body\r\n")

    assert msg.subject == "hi"
    assert msg.text == "this is already body\n"
    assert msg.defects == ["missing blank line between headers and body"]


# --- bodies and attachments -------------------------------------------------------------------


def test_charset_fallbacks() -> None:
    def text_of(charset: bytes, body: bytes) -> tuple[str, list[str]]:
        msg = parse_message(b"Content-Type: text/plain; charset=" + charset + b"\r\n\r\n" + body)
        return msg.text, msg.defects

    assert text_of(b"windows-1252", b"\x93quoted\x94") == ("\u201cquoted\u201d", [])
    assert text_of(b"us-ascii", "naïve".encode()) == ("naïve", [])  # mislabelled UTF-8
    assert text_of(b"utf-8", b"caf\xe9") == (
        "caf\ufffd",
        ["undecodable utf-8 bytes in part 1 replaced"],
    )
    assert text_of(b"us-ascii", b"caf\xe9") == (
        "café",
        ["undecodable bytes in part 1 decoded as latin-1"],
    )
    assert text_of(b'"ks_c_5601-1987"', "한국어".encode("cp949")) == ("한국어", [])
    assert text_of(b"iso-2022-jp", "日本語".encode("iso-2022-jp")) == ("日本語", [])
    assert text_of(b"rot13", b"uryyb") == ("uryyb", ["unknown charset 'rot13' in part 1"])
    assert text_of(b"unknown-8bit", b"caf\xc3\xa9") == ("café", [])


def test_base64_padded_per_line_and_with_junk() -> None:
    body = b"SGVs\r\nbG8=\r\nIHdv\r\ncmxk\r\nIQ==\r\n"  # each chunk decodable on its own
    msg = parse_message(
        b"Content-Type: application/octet-stream\r\nContent-Transfer-Encoding: base64\r\n\r\n"
        + body.replace(b"IHdv", b"IH*dv")
    )

    assert msg.attachments[0].content == b"Hello world!"
    assert msg.defects == ["invalid base64 in part 1"]


def test_undecodable_base64_keeps_raw_payload() -> None:
    msg = parse_message(
        b"Content-Type: application/pdf\r\nContent-Transfer-Encoding: base64\r\n\r\n*!*"
    )

    assert msg.attachments[0].content == b"*!*"
    assert msg.defects == [
        "invalid base64 in part 1",
        "undecodable base64 in part 1; raw payload kept",
    ]


def test_uuencode_and_unknown_transfer_encoding() -> None:
    msg = parse_message(
        b"Content-Type: multipart/mixed; boundary=b\r\n\r\n"
        b"--b\r\nContent-Type: application/octet-stream\r\nContent-Transfer-Encoding: x-uuencode\r\n"
        b"\r\nbegin 644 hi.txt\r\n#:&D*\r\n`\r\nend\r\n"
        b"--b\r\nContent-Type: application/octet-stream\r\nContent-Transfer-Encoding: x-rot13\r\n"
        b"\r\nraw\r\n--b--\r\n"
    )

    assert [a.content for a in msg.attachments] == [b"hi\n", b"raw"]
    assert msg.defects == ["unknown transfer encoding 'x-rot13' in part 3"]


def test_base64_encoded_multipart_is_decoded_first() -> None:
    inner = b"--in\r\nContent-Type: text/plain\r\n\r\nhidden text\r\n--in--\r\n"
    msg = parse_message(
        b"Content-Type: multipart/mixed; boundary=in\r\nContent-Transfer-Encoding: base64\r\n\r\n"
        + base64.encodebytes(inner)
    )

    assert msg.text == "hidden text"
    assert msg.defects == ["base64 transfer encoding on multipart/mixed in part 1"]


def test_single_part_non_text_message_is_an_attachment() -> None:
    msg = parse_message(
        b"Content-Type: application/pdf; name=doc.pdf\r\nContent-Transfer-Encoding: base64\r\n"
        b"\r\nJVBERi0=\r\n"
    )

    assert msg.text == ""
    assert msg.attachments == [
        ParsedAttachment(
            filename="doc.pdf",
            content_type="application/pdf",
            content=b"%PDF-",
            content_id="",
            inline=False,
            span=(82, 92),
            transfer_encoding="base64",
        )
    ]


def test_text_attachment_is_not_the_body() -> None:
    msg = parse_message(
        b"Content-Type: multipart/mixed; boundary=b\r\n\r\n"
        b"--b\r\nContent-Type: text/plain\r\nContent-Disposition: attachment; filename=a.txt\r\n"
        b"\r\nattached\r\n--b\r\nContent-Type: text/plain\r\n\r\nbody\r\n--b--\r\n"
    )

    assert msg.text == "body"
    assert [(a.filename, a.content) for a in msg.attachments] == [("a.txt", b"attached")]


def test_invalid_content_type_defaults_to_text_plain() -> None:
    msg = parse_message(b"Content-Type: text\r\n\r\nhello")

    assert msg.text == "hello"
    assert msg.defects == ["invalid Content-Type 'text' in part 1; using text/plain"]


def test_digest_parts_default_to_message_rfc822() -> None:
    msg = parse_message(
        b"Content-Type: multipart/digest; boundary=d\r\n\r\n"
        b"--d\r\n\r\nSubject: one\r\n\r\nfirst\r\n--d--\r\n"
    )

    assert [(a.filename, a.content_type, a.content) for a in msg.attachments] == [
        ("message.eml", "message/rfc822", b"Subject: one\r\n\r\nfirst"),
    ]


def test_filename_sanitising() -> None:
    def filename_of(param: bytes) -> str:
        msg = parse_message(
            b"Content-Type: application/octet-stream\r\nContent-Disposition: attachment; "
            + param
            + b"\r\n\r\nx"
        )
        return msg.attachments[0].filename

    assert filename_of(b'filename="C:\\\\Users\\\\me\\\\report.pdf"') == "report.pdf"
    assert filename_of(b'filename="..\\\\..\\\\boot.ini"') == "boot.ini"
    assert filename_of(b'filename="/etc/"') == "etc"
    assert filename_of(b'filename=".."') == ""
    assert filename_of(b'filename="bill\\u202egpj.exe"'.replace(b"\\u202e", "\u202e".encode())) == (
        "billgpj.exe"
    )
    assert filename_of(b"filename*=utf-8''%00a%0Ab%7F.txt") == "ab.txt"
    long_name = filename_of(b'filename="' + b"x" * 400 + b'.pdf"')
    assert len(long_name) == 255 and long_name.endswith("x.pdf")
    assert filename_of(b"filename*=x-bogus''caf%C3%A9.txt") == "café.txt"
    assert filename_of(b'filename="a \\"quoted\\" name.txt"') == 'a "quoted" name.txt'


def test_cid_reference_outside_related_marks_inline() -> None:
    msg = parse_message(
        b"Content-Type: multipart/mixed; boundary=b\r\n\r\n"
        b'--b\r\nContent-Type: text/html\r\n\r\n<img src="cid:pic%40x">\r\n'
        b"--b\r\nContent-Type: image/gif\r\nContent-ID: <pic%40x>\r\n\r\nGIF89a\r\n"
        b"--b\r\nContent-Type: image/gif\r\nContent-ID: <other@x>\r\n\r\nGIF89a\r\n--b--\r\n"
    )

    assert [(a.content_id, a.inline) for a in msg.attachments] == [
        ("pic%40x", True),
        ("other@x", False),
    ]


# --- bounded work -----------------------------------------------------------------------------


def nested(depth: int) -> bytes:
    head = b"".join(
        b"Content-Type: multipart/mixed; boundary=b%d\r\n\r\n--b%d\r\n" % (i, i)
        for i in range(depth)
    )
    return head + b"Content-Type: text/plain\r\n\r\ndeep\r\n"


def test_nesting_depth_is_capped() -> None:
    assert parse_message(nested(MAX_DEPTH)).text == "deep\n"

    msg = parse_message(nested(MAX_DEPTH + 1))
    assert msg.text == ""
    assert f"nesting depth limit ({MAX_DEPTH}) reached; deeper parts skipped" in msg.defects


def test_part_count_is_capped() -> None:
    raw = b"Content-Type: multipart/mixed; boundary=b\r\n\r\n" + b"--b\r\n\r\nx\r\n" * 5000
    msg = parse_message(raw)

    assert len(msg.attachments) < MAX_PARTS
    assert msg.text == "x"
    assert f"part limit ({MAX_PARTS}) reached; remaining parts skipped" in msg.defects


def test_defect_list_is_capped() -> None:
    raw = b"".join(b"Subject: =?x-%d?q?a?=\r\n" % i for i in range(500)) + b"\r\n"
    msg = parse_message(raw)

    assert len(msg.defects) == 101
    assert msg.defects[-1] == "further defects omitted"


@pytest.mark.parametrize(
    "raw",
    [
        # Quadratic in email.message.Message._parseparam (~tens of seconds at this size).
        pytest.param(
            b'Content-Type: multipart/mixed; boundary="' + b";" * 400_000 + b"\r\n\r\nx",
            id="semicolons-in-quoted-param",
        ),
        pytest.param(b"Subject: " + b"=?utf-8?q?a?= " * 50_000 + b"\r\n\r\nx", id="encoded-words"),
        pytest.param(nested(20_000), id="deep-nesting"),
        pytest.param(
            b"Content-Type: multipart/mixed; boundary=b\r\n\r\n" + b"--bx\r\n" * 200_000,
            id="delimiter-near-misses",
        ),
        pytest.param(b"To: " + b"(" * 200_000 + b"\r\n\r\nx", id="nested-comments"),
        pytest.param(b"To: a" + b" " * 200_000 + b"x,(\r\n\r\nx", id="address-whitespace"),
        pytest.param(b"X: y\r\n" * 300_000 + b"\r\nbody", id="many-headers"),
        pytest.param(
            b"Content-Type: application/x\r\nContent-Transfer-Encoding: base64\r\n\r\n"
            + b"QQ==\r\n" * 300_000,
            id="base64-padding-every-line",
        ),
    ],
)
def test_hostile_inputs_are_parsed(raw: bytes) -> None:
    # Each was quadratic or recursive in the stdlib parser; `make bench` times them.
    msg = parse_message(raw)
    assert isinstance(msg, ParsedMessage)
    assert len(msg.attachments) <= 1000 and len(msg.defects) <= 100


def test_accepts_bytearray_and_memoryview() -> None:
    raw = (FIXTURES / "plain_ascii.eml").read_bytes()
    expected = parse_message(raw)

    assert parse_message(bytearray(raw)) == expected
    assert parse_message(memoryview(raw)) == expected  # type: ignore[arg-type]


# --- spans: where an attachment's encoded bytes lie in the raw message ------------------------


# Every fixture's attachments, exactly: (filename, content type, decoded size). A fixture without
# any says so here too, so that parsing one out of its body fails.
FIXTURE_ATTACHMENTS: dict[str, list[tuple[str, str, int]]] = {
    "8bit_utf8.eml": [],
    "alternative.eml": [],
    "attachments.eml": [
        ("invoice-2024-0042.pdf", "application/pdf", 440),
        ("chart.png", "image/png", 73),
    ],
    "bare_lf.eml": [],
    "base64_utf8.eml": [],
    "duplicate_boundary.eml": [("rows.csv", "text/csv", 8)],
    "empty.eml": [],
    "encoded_words.eml": [],
    "headers_only.eml": [],
    "latin1_qp.eml": [],
    "many_recipients.eml": [],
    "missing_boundary.eml": [("data.bin", "application/octet-stream", 5)],
    "nested_multipart.eml": [
        ("", "image/png", 73),
        ("archive.zip", "application/zip", 22),
        ("", "text/plain", 26),
    ],
    "no_headers.eml": [],
    "nul_bytes.eml": [("raw.bin", "application/octet-stream", 5)],
    "plain_ascii.eml": [],
    "related_inline_image.eml": [
        ("logo.png", "image/png", 70),
        ("", "image/png", 73),
        ("referenced.png", "image/png", 73),
    ],
    "reply.eml": [],
    "rfc2231_filename.eml": [
        ("€ rates 2024.pdf", "application/pdf", 440),
        ("Grüße an alle Kollegen.txt", "text/plain", 6),
        (
            "Отчёт.docx",
            "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
            10,
        ),
        ("job.sh", "application/octet-stream", 10),
    ],
    "rfc822_attachment.eml": [
        ("message.eml", "message/rfc822", 466),
        ("second.eml", "message/rfc822", 47),
    ],
    "truncated_base64.eml": [("cut.pdf", "application/pdf", 75)],
    "unknown_charset.eml": [],
}
WITH_ATTACHMENTS = [name for name, expected in FIXTURE_ATTACHMENTS.items() if expected]


def test_the_attachment_table_covers_every_fixture() -> None:
    assert sorted(FIXTURE_ATTACHMENTS) == sorted(p.name for p in FIXTURES.glob("*.eml"))


@pytest.mark.parametrize("name", sorted(FIXTURE_ATTACHMENTS))
def test_every_fixture_has_exactly_its_attachments(name: str) -> None:
    attachments = parse_fixture(name).attachments
    found = [(a.filename, a.content_type, len(a.content)) for a in attachments]
    assert found == FIXTURE_ATTACHMENTS[name]


@pytest.mark.parametrize("name", WITH_ATTACHMENTS)
def test_every_fixture_attachment_span_gives_its_bytes_again(name: str) -> None:
    raw = (FIXTURES / name).read_bytes()
    attachments = parse_message(raw).attachments
    assert len(attachments) == len(FIXTURE_ATTACHMENTS[name])
    for attachment in attachments:
        assert attachment.span is not None
        start, end = attachment.span
        assert decode_part(raw[start:end], attachment.transfer_encoding) == attachment.content


def test_attachment_spans_point_at_their_encoded_bodies() -> None:
    raw = (FIXTURES / "attachments.eml").read_bytes()
    pdf, png = parse_message(raw).attachments

    assert (pdf.transfer_encoding, png.transfer_encoding) == ("base64", "base64")
    assert pdf.span is not None and png.span is not None
    assert pdf.span[1] < png.span[0]  # in message order, and apart
    assert raw[pdf.span[0] : pdf.span[1]].startswith(base64.b64encode(b"%PDF-1.4\n")[:12])
    assert sha256(decode_part(raw[png.span[0] : png.span[1]], "base64")) == PNG_SHA256


def test_no_span_where_the_bytes_are_not_the_raw_messages() -> None:
    # A part inside a base64-encoded multipart, and a message whose bare CRs parsing rewrote:
    # the store keeps their bytes.
    inner = crlf("--in\nContent-Type: text/csv\n\na,b\n--in--\n")
    encoded = crlf(
        "Content-Type: multipart/mixed; boundary=in\nContent-Transfer-Encoding: base64\n\n"
    ) + base64.encodebytes(inner).replace(b"\n", b"\r\n")
    [csv] = parse_message(encoded).attachments
    assert csv.content == b"a,b" and csv.span is None

    junk = b"Content-Type: application/x\r\nContent-Transfer-Encoding: x\x00y\r\n\r\nbytes\r\n"
    [kept] = parse_message(junk).attachments
    assert kept.content == b"bytes\r\n" and kept.span is None  # an encoding parsing does not know

    bare_cr = b"Content-Type: application/x-thing\r\rone\rtwo\r"
    [thing] = parse_message(bare_cr).attachments
    assert thing.content == b"one\ntwo\n" and thing.span is None


@pytest.mark.parametrize(
    ("cte", "encoded", "decoded"),
    [
        ("base64", b"aGVs\r\nbG8=\r\n", b"hello"),
        ("quoted-printable", b"caf=C3=A9=\r\n!", b"caf\xc3\xa9!"),
        ("", b"as it is\r\n", b"as it is\r\n"),
        ("7bit", b"as it is", b"as it is"),
        ("x-unknown", b"kept", b"kept"),
        ("base64", b"!!!", b"!!!"),  # undecodable: kept as it is, as parsing does
    ],
)
def test_decode_part_undoes_the_transfer_encoding(cte: str, encoded: bytes, decoded: bytes) -> None:
    assert decode_part(encoded, cte) == decoded
