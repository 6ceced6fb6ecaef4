"""Differential tests: ``mail.message.parsing.parse_message`` against the standard library's parser.

Every message here is parsed twice -- by ``parse_message`` and by
``email.parser.BytesParser(policy=email.policy.default)`` -- and both results are projected onto
the same plain "view" (a dict), which must be equal.  Inputs are

1. every fixture in ``tests/fixtures/mime`` that the standard library parses without a defect
   (see :func:`stdlib_defects`; at least 12 must be compared, the others are each checked not
   to raise), and
2. well-formed messages generated with hypothesis and written by ``email.message.EmailMessage``
   (``as_bytes(policy=email.policy.SMTP)``: CRLF line endings, as they travel).  Examples the
   stdlib writes badly are rejected; see the comment in the test for exactly which.

How the stdlib side of each field is defined, and the normalisations applied (both are the
documented contract of ``mail/message/parsing.py``, not leniency of this test):

* all strings: NUL characters are removed ("decoded strings never contain NUL characters");
* subject: the stdlib's unfolded, RFC 2047-decoded value, ``str.strip()``-ed (ours is "the
  single-line form of the value, stripped" -- note ``str.strip`` also drops non-ASCII
  whitespace such as U+3000 at either end);
* text / html bodies: ``get_content()`` of the part ``get_body(("plain",))`` /
  ``get_body(("html",))`` picks, with exactly one normalisation: universal newlines to LF --
  ``"\r\n"`` first, then any remaining lone ``"\r"``, become ``"\n"`` -- as ours does ("text
  and HTML bodies get LF line endings (from CRLF or stray CR)").  Nothing else: trailing
  newlines, other whitespace and every other character (U+2028, form feed, ...) must match.
  Body choice: both take the first text/plain (text/html) part, depth first, that is not
  ``Content-Disposition: attachment``.  They would differ for a text part after the root of a
  multipart/related (ours may take it, ``get_body`` does not), for a disposition other than
  inline or attachment (ours treats it as attachment) and for a text part inside a multipart
  that is itself marked as an attachment; none occurs in the generated messages or in the
  compared fixtures;
* addresses: ``Address.display_name`` (or, if empty, a comment right after the addr-spec: see
  :func:`_std_addresses`, which also corrects the stdlib bug gh-128110) with runs of whitespace
  collapsed to one space and stripped (ours does so deliberately), and ``username@domain``
  with the domain lower-cased (ours lower-cases the domain and keeps the local part as
  written; generated local parts are dot-atoms, so the stdlib's unquoted ``username`` is the
  local part as written); groups are flattened, and all fields of one name (e.g. two ``To:``
  lines) are concatenated in order;
* message ids (Message-ID, In-Reply-To, References): the stdlib has no public msg-id list
  parser (``In-Reply-To`` and ``References`` are unstructured headers under the default
  policy), so the expectation is its unfolded header value split on whitespace, with one pair
  of angle brackets removed from each token; Message-ID and In-Reply-To take the first token;
* header names: ``msg.keys()`` -- top-level field names, in order, as written;
* date: ``DateHeader.datetime`` in UTC (naive taken as UTC), like ours;
* attachments: see :func:`stdlib_attachments`.  The stdlib has no single notion of "the
  attachments of a message" that matches ours: ``iter_attachments()`` only looks at the direct
  children of one multipart, skips the first text/plain, text/html, multipart/related and
  multipart/alternative child even when it is not the body, and yields whole sub-multiparts.
  Ours is a flat list of *every* MIME leaf that is not the chosen text or HTML body, in
  depth-first order, without descending into attached messages.  So the stdlib expectation is
  built the same way from the stdlib's own tree, body choice (``get_body``), parameter
  decoding (the ``params`` of its header objects), transfer decoding
  (``get_payload(decode=True)``) and Content-ID; on top of that, every leaf
  ``iter_attachments()`` yields for the top-level message must be in our list.

One legitimate difference is kept out of the comparison and pinned by
:func:`test_divergence_encoded_word_lookalikes`: text in which an encoded word is glued to
other characters.  The generator therefore never puts encoded-word-shaped text in headers.
"""

from __future__ import annotations

import email.policy
import html as html_lib
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from email.errors import HeaderParseError
from email.header import decode_header, make_header
from email.headerregistry import Address as StdAddress
from email.message import EmailMessage, Message
from email.parser import BytesParser
from email.utils import format_datetime, getaddresses
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from mail.message.parsing import ParsedAttachment, ParsedMessage, parse_message
from tests.sizes import examples

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "mime"
FIXTURE_PATHS = sorted(FIXTURES.glob("*.eml"))
MIN_COMPARED_FIXTURES = 12

_STD_PARSER = BytesParser(policy=email.policy.default)


def stdlib_parse(raw: bytes) -> EmailMessage:
    return _STD_PARSER.parsebytes(raw)  # type: ignore[return-value]


# --- stdlib defects -------------------------------------------------------------------------


def stdlib_defects(msg: Message) -> list[str]:
    """Every defect the stdlib notes while parsing ``msg`` and decoding its payloads.

    Covers the defects of each part (structure, transfer decoding -- recorded by
    ``get_payload(decode=True)``), of each header field, and of nested messages; a text part
    whose bytes do not decode in its declared charset (``get_content()`` would raise for an
    unknown charset, or replace undecodable bytes) counts as a defect too, and so does a header the
    stdlib's own header parser fails on (it can fold a header it cannot read back).
    """
    found: list[str] = []

    def visit(part: Message, where: str) -> None:
        if not part.is_multipart():
            payload = part.get_payload(decode=True)  # records base64 padding/alphabet defects
            if part.get_content_maintype() == "text" and not part.is_attachment():
                # A possible body.  get_content() raises LookupError for an unknown charset
                # and replaces undecodable bytes silently: count both as defects.
                charset = part.get_content_charset("us-ascii")
                try:
                    payload.decode(charset)
                except (LookupError, UnicodeDecodeError) as exc:
                    found.append(f"{where}: cannot decode {charset!r} text: {exc!r}")
        found.extend(f"{where}: {defect!r}" for defect in part.defects)
        try:
            items = part.items()
        except Exception as exc:  # the stdlib cannot read back a header it folded itself
            found.append(f"{where}: the stdlib's header parser failed: {exc!r}")
            items = []
        for name, value in items:
            found.extend(f"{where} {name}: {defect!r}" for defect in getattr(value, "defects", ()))
        if part.is_multipart():
            for index, sub in enumerate(part.get_payload()):
                visit(sub, f"{where}.{index}")

    visit(msg, "message")
    return found


# --- views ----------------------------------------------------------------------------------


def _no_nul(value: str) -> str:
    return value.replace("\x00", "")


def _lf(value: str) -> str:
    return _no_nul(value.replace("\r\n", "\n").replace("\r", "\n"))


def _ids(value: str) -> list[str]:
    tokens = []
    for token in value.split():
        if token.startswith("<") and token.endswith(">"):
            token = token[1:-1]
        if token:
            tokens.append(token)
    return tokens


def _canonical_message(raw_or_msg: bytes | Message) -> bytes:
    """A message as the stdlib re-serialises it (to compare attached messages)."""
    msg = stdlib_parse(raw_or_msg) if isinstance(raw_or_msg, bytes) else raw_or_msg
    return msg.as_bytes(policy=email.policy.SMTP)


def ours_view(parsed: ParsedMessage) -> dict[str, Any]:
    def addresses(found: list[Any]) -> list[tuple[str, str]]:
        return [(a.address, a.name) for a in found]

    def attachment(att: ParsedAttachment) -> dict[str, Any]:
        content: bytes = att.content
        if att.content_type in ("message/rfc822", "message/global"):
            content = _canonical_message(content)
        return {
            "filename": att.filename,
            "content_type": att.content_type,
            "content": content,
            "content_id": att.content_id,
            "inline": att.inline,
        }

    return {
        "message_id": parsed.message_id,
        "from": (parsed.from_.address, parsed.from_.name) if parsed.from_ else None,
        "to": addresses(parsed.to),
        "cc": addresses(parsed.cc),
        "reply_to": addresses(parsed.reply_to),
        "subject": parsed.subject,
        "text": parsed.text,
        "html": parsed.html,
        "attachments": [attachment(att) for att in parsed.attachments],
        "in_reply_to": parsed.in_reply_to,
        "references": parsed.references,
        "header_names": [name for name, _ in parsed.headers],
        "date": parsed.date,
    }


def _collapse(name: str) -> str:
    return " ".join(_no_nul(name).split())


def rfc2047_names(msg: Message, name: str) -> list[str | None]:
    """The display names of the ``name`` fields as RFC 2047 reads them, by the legacy API.

    ``email.utils.getaddresses`` splits the raw field values, ``email.header.decode_header``
    decodes the encoded words and -- unlike the modern parser in this Python (gh-128110) --
    ignores the whitespace between two adjacent encoded words, as RFC 2047 section 6.2 says.
    None for a name it cannot decode (a broken encoded word).
    """

    def decode(display_name: str) -> str | None:
        try:
            return _collapse(str(make_header(decode_header(display_name))))
        except HeaderParseError:
            return None

    raw_values = [str(value) for key, value in msg.raw_items() if key.lower() == name]
    return [decode(display_name) for display_name, _ in getaddresses(raw_values)]


def _std_addresses(msg: Message, name: str) -> list[tuple[str, str]]:
    raw_values = [str(value) for key, value in msg.raw_items() if key.lower() == name]
    found = []
    for header, raw in zip(msg.get_all(name, []), raw_values, strict=True):
        for address in header.addresses:  # groups flattened
            display_name = address.display_name
            if not display_name and address.domain:
                # RFC 822 practice, kept by email.utils.getaddresses (which ours uses for
                # anything but the simplest lists): "a@b (Name)" names the mailbox after its
                # trailing comment.  The modern header parser drops comments, so read it from
                # the raw field value.
                comment = re.search(
                    re.escape(f"{address.username}@{address.domain}") + r">?[ \t]*\(([^()]*)\)",
                    raw.replace("\r\n", ""),
                )
                display_name = comment.group(1) if comment else ""
            domain = address.domain.lower()
            spec = f"{address.username}@{domain}" if domain else address.username
            found.append((spec, _collapse(display_name)))
    # CPython gh-128110 (fixed upstream later; present in the 3.11.7 used here): the modern
    # parser keeps the folding whitespace between two adjacent encoded words of a display name
    # as a space, although RFC 2047 section 6.2 says it is to be ignored -- and the stdlib's
    # own folder splits a long non-ASCII display name into such words, so it reads its own
    # "ab" back as "a b".  Where its name differs from the RFC 2047 reading only by spaces,
    # the RFC 2047 reading is the expectation.
    legacy = rfc2047_names(msg, name)
    if len(legacy) == len(found):
        for index, ((spec, modern), rfc) in enumerate(zip(found, legacy, strict=True)):
            if (
                rfc is not None
                and modern != rfc
                and modern.replace(" ", "") == rfc.replace(" ", "")
            ):
                found[index] = (spec, rfc)
    return found


def _std_body(msg: EmailMessage, subtype: str) -> EmailMessage | None:
    return msg.get_body(preferencelist=(subtype,))  # type: ignore[return-value]


def _std_text(part: EmailMessage | None) -> str:
    return "" if part is None else _lf(part.get_content())


def _std_content_id(part: Message) -> str:
    value = part.get("content-id")
    if value is None:
        return ""
    value = str(value).strip()
    return value[1:-1].strip() if value.startswith("<") and value.endswith(">") else value


def _std_filename(part: Message) -> str:
    # The modern (policy.default) header objects, not get_filename(): that legacy API unquotes
    # twice, so filename="<x>" comes back as "x" (and filename="<>" as "").
    for header, param in (("content-disposition", "filename"), ("content-type", "name")):
        params = getattr(part.get(header), "params", None) or {}
        if params.get(param):
            return _no_nul(str(params[param]))
    return ""


def _std_attachment(part: Message, parent: str, html_lower: str) -> dict[str, Any]:
    ctype = part.get_content_type()
    filename = _std_filename(part)
    if ctype in ("message/rfc822", "message/global"):
        filename = filename or "message.eml"
        content = _canonical_message(part.get_payload(0))
    else:
        content = part.get_payload(decode=True)
    cid = _std_content_id(part)
    inline = part.get_content_disposition() == "inline" or bool(
        cid and (parent == "multipart/related" or f"cid:{cid.lower()}" in html_lower)
    )
    return {
        "filename": filename,
        "content_type": ctype,
        "content": content,
        "content_id": cid,
        "inline": inline,
    }


def stdlib_attachments(
    msg: EmailMessage, bodies: list[EmailMessage | None], html: str
) -> list[dict[str, Any]]:
    """The stdlib-side expectation of ``ParsedMessage.attachments``.

    Every leaf of the stdlib's MIME tree (multiparts are descended into, ``message/*`` parts
    are leaves), depth first, except the parts ``get_body()`` chose as the text and HTML body:

    * filename: the Content-Disposition ``filename`` or else the Content-Type ``name``
      parameter, as the modern header objects decode them (RFC 2231 charsets and
      continuations); a ``message/rfc822`` (or ``message/global``) part without one is called
      ``message.eml`` by ours;
    * content_type: ``get_content_type()``;
    * content: ``get_payload(decode=True)``; for an attached message (which the stdlib parses
      into a message object) both sides are compared re-serialised by the stdlib;
    * content_id: the Content-ID value without its angle brackets;
    * inline: ``Content-Disposition: inline``; or, for a part with a Content-ID, being a child
      of a multipart/related or being referenced as ``cid:<id>`` (case-insensitively) from the
      HTML body.  The stdlib has no such notion; this is ours, computed from stdlib data.
    """
    chosen = [id(part) for part in bodies if part is not None]
    leaves: list[tuple[Message, str]] = []

    def visit(part: Message, parent: str) -> None:
        if part.get_content_maintype() == "multipart":
            for sub in part.iter_parts():  # type: ignore[attr-defined]
                visit(sub, part.get_content_type())
        elif id(part) not in chosen:
            leaves.append((part, parent))

    visit(msg, "")
    return [_std_attachment(part, parent, html.lower()) for part, parent in leaves]


def stdlib_view(msg: EmailMessage) -> dict[str, Any]:
    def first_id(name: str) -> str:
        value = msg.get(name)
        ids = _ids(str(value)) if value is not None else []
        return ids[0] if ids else ""

    from_ = _std_addresses(msg, "from")
    text_part, html_part = _std_body(msg, "plain"), _std_body(msg, "html")
    html = _std_text(html_part)
    date_header = msg.get("date")
    date: datetime | None = None
    if date_header is not None and date_header.datetime is not None:
        date = date_header.datetime
        date = (date if date.tzinfo else date.replace(tzinfo=UTC)).astimezone(UTC)
    subject = msg.get("subject")
    return {
        "message_id": first_id("message-id"),
        "from": from_[0] if from_ else None,
        "to": _std_addresses(msg, "to"),
        "cc": _std_addresses(msg, "cc"),
        "reply_to": _std_addresses(msg, "reply-to"),
        "subject": _no_nul(str(subject)).strip() if subject is not None else "",
        "text": _std_text(text_part),
        "html": html,
        "attachments": stdlib_attachments(msg, [text_part, html_part], html),
        "in_reply_to": first_id("in-reply-to"),
        "references": [ref for value in msg.get_all("references", []) for ref in _ids(value)],
        "header_names": list(msg.keys()),
        "date": date,
    }


def assert_agrees_with_stdlib(raw: bytes) -> ParsedMessage:
    std = stdlib_parse(raw)
    parsed = parse_message(raw)
    expected = stdlib_view(std)
    assert ours_view(parsed) == expected
    # Everything iter_attachments() yields (leaves only; it also yields sub-multiparts) is one
    # of our attachments, exactly as described by stdlib_attachments().
    ours = ours_view(parsed)["attachments"]
    html_lower = expected["html"].lower()
    for part in std.iter_attachments():
        if part.get_content_maintype() != "multipart":
            wanted = _std_attachment(part, std.get_content_type(), html_lower)
            assert wanted in ours, f"iter_attachments() part {wanted!r} not among ours"
    return parsed


# --- fixtures -------------------------------------------------------------------------------


def _fixture_ids() -> tuple[list[Path], list[Path]]:
    clean, defective = [], []
    for path in FIXTURE_PATHS:
        (defective if stdlib_defects(stdlib_parse(path.read_bytes())) else clean).append(path)
    return clean, defective


CLEAN_FIXTURES, DEFECTIVE_FIXTURES = _fixture_ids()


def test_enough_fixtures_are_compared() -> None:
    assert len(CLEAN_FIXTURES) + len(DEFECTIVE_FIXTURES) == len(FIXTURE_PATHS)
    assert len(CLEAN_FIXTURES) >= MIN_COMPARED_FIXTURES, [p.name for p in CLEAN_FIXTURES]


@pytest.mark.parametrize("path", CLEAN_FIXTURES, ids=lambda path: path.name)
def test_fixture_agrees_with_stdlib(path: Path) -> None:
    assert_agrees_with_stdlib(path.read_bytes())


@pytest.mark.parametrize("path", DEFECTIVE_FIXTURES, ids=lambda path: path.name)
def test_defective_fixture_does_not_raise(path: Path) -> None:
    # The stdlib notes defects here, so "agreeing" is not well defined; ours must still cope.
    assert isinstance(parse_message(path.read_bytes()), ParsedMessage)


# --- generated messages ---------------------------------------------------------------------

EXTRA_CHARS = "éüßøЖ日本語€ñ😀👩‍💻🎉\u00a0"
# Pieces that need quoting, escaping or encoding somewhere in a message.  No whole encoded
# word: see test_divergence_encoded_word_lookalikes.
HEADER_PIECES = [*"\"\\,;:<>@()[].'%*\t", "=?", "?=", "  "]
BODY_PIECES = ["\r\n", "\n", "\r", "--", "From ", ".\n", "=", " \n", "\t\n", "=\n", "=3D"]
BODY_PIECES += ["\x00", "\x0c", "\x85", "\u2028", "\ufeff"]


def _texts(
    alphabet: st.SearchStrategy[str], pieces: list[str], max_size: int
) -> st.SearchStrategy[str]:
    items = st.one_of(alphabet, st.sampled_from(EXTRA_CHARS), st.sampled_from(pieces))
    return st.lists(items, max_size=max_size).map("".join)


# Header text: no surrogates and no C0/C1 controls but TAB (CR and LF cannot be in a header
# value at all -- the stdlib refuses them -- and other controls are not well-formed text).
HEADER_TEXT = _texts(st.characters(blacklist_categories=("Cc", "Cs")), HEADER_PIECES, 30)
# Any text (controls, CR, LF, NUL included); a third of the time Latin-1 only, so that
# iso-8859-1 bodies are common.
BODY_TEXT = st.one_of(
    _texts(st.characters(blacklist_categories=("Cs",)), BODY_PIECES, 200),
    st.text(alphabet=st.characters(max_codepoint=0xFF), max_size=300),
)
# A filename ours keeps as it is: none of the characters it sanitises away on purpose (path
# separators, controls, bidi and BOM marks), not blank, no leading/trailing whitespace.
SANITISED = "/\\\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\ufeff"
FILENAME = (
    _texts(
        st.characters(blacklist_categories=("Cc", "Cs"), blacklist_characters=SANITISED),
        [piece for piece in HEADER_PIECES if piece not in ("\\", "\t")],
        30,
    )
    .filter(lambda name: name.strip() == name and name not in ("", ".", ".."))
    .filter(lambda name: len(name) <= 255)  # longer names are shortened on purpose
)

ATOM = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]{1,8}"
LOCAL_PART = st.from_regex(rf"{ATOM}(\.{ATOM}){{0,2}}", fullmatch=True)
DOMAIN = st.from_regex(
    r"([A-Za-z0-9]([A-Za-z0-9-]{0,6}[A-Za-z0-9])?\.){1,3}[A-Za-z]{2,6}", fullmatch=True
)
MSG_ID = st.builds(lambda left, right: f"<{left}@{right}>", LOCAL_PART, DOMAIN)


@st.composite
def mailbox(draw: st.DrawFn) -> StdAddress:
    return StdAddress(
        display_name=draw(HEADER_TEXT), username=draw(LOCAL_PART), domain=draw(DOMAIN)
    )


@st.composite
def text_content(
    draw: st.DrawFn, subtype: str, cid: str | None = None
) -> tuple[Any, dict[str, Any]]:
    """Arguments for ``set_content``/``add_alternative`` of one text part.

    Usually a ``str``, which the stdlib writes canonically (CRLF line breaks, a final one).  A
    quarter of the time the encoded bytes as they are, base64 or quoted-printable encoded with
    a charset parameter -- so line breaks are whatever the text holds: LF, CRLF or a stray CR,
    none at the end -- as many real mailers do.
    """
    body = draw(BODY_TEXT)
    if subtype == "html":
        image = f'<img src="cid:{cid}" alt="inline">' if cid else ""
        body = f"<html><body><p>{html_lib.escape(body)}</p>{image}</body></html>\n"
    charsets = ["utf-8"]
    try:
        body.encode("iso-8859-1")
        charsets.append("iso-8859-1")
    except UnicodeEncodeError:
        pass
    charset = draw(st.sampled_from(charsets))
    if draw(st.integers(0, 3)) == 0:
        cte = draw(st.sampled_from(["quoted-printable", "base64"]))
        kwargs = {
            "maintype": "text",
            "subtype": subtype,
            "cte": cte,
            "params": {"charset": charset},
        }
        return body.encode(charset), kwargs
    lines = body.encode(charset).splitlines()
    ctes = []
    if max((len(line) for line in lines), default=0) <= 998:  # well-formed: SMTP line limit
        ctes.append("8bit")
        if body.isascii():
            ctes.append("7bit")
    ctes += ["quoted-printable", "base64"]
    return body, {"subtype": subtype, "charset": charset, "cte": draw(st.sampled_from(ctes))}


ATTACHMENT_TYPES = [
    "application/octet-stream",
    "application/pdf",
    "image/png",
    "image/jpeg",
    "text/plain",
    "text/html",
    "text/csv",
    "audio/mpeg",
]


@dataclass
class Generated:
    raw: bytes
    names: dict[str, list[str]]  # display names as given to the stdlib, per address header
    specs: dict[str, list[str]]  # and the addr-specs


def _set_boundaries(msg: EmailMessage) -> None:
    # Fixed boundaries: the stdlib would otherwise draw them from ``random`` (nondeterministic
    # under hypothesis).  "=_" cannot occur in base64 or quoted-printable output, and a line
    # "--=_differential_<n>_=" in a 7bit/8bit body is not something hypothesis will write.
    for index, part in enumerate(msg.walk()):
        if part.is_multipart():
            part.set_boundary(f"=_differential_{index}_=")


@st.composite
def messages(draw: st.DrawFn) -> Generated:
    msg = EmailMessage()
    names: dict[str, list[str]] = {}
    specs: dict[str, list[str]] = {}

    def address_header(name: str, mailboxes: list[StdAddress]) -> None:
        msg[name] = mailboxes
        names[name.lower()] = [mailbox.display_name for mailbox in mailboxes]
        specs[name.lower()] = [mailbox.addr_spec for mailbox in mailboxes]

    address_header("From", [draw(mailbox())])
    address_header("To", draw(st.lists(mailbox(), min_size=1, max_size=4)))
    if draw(st.booleans()):
        address_header("Cc", draw(st.lists(mailbox(), min_size=1, max_size=3)))
    if draw(st.booleans()):
        address_header("Reply-To", draw(st.lists(mailbox(), min_size=1, max_size=2)))
    msg["Subject"] = draw(HEADER_TEXT)
    if draw(st.booleans()):
        when = draw(
            st.datetimes(
                min_value=datetime(1990, 1, 1),
                max_value=datetime(2090, 1, 1),
                timezones=st.just(UTC),
            )
        )
        msg["Date"] = format_datetime(when)
    msg["Message-ID"] = draw(MSG_ID)
    if draw(st.booleans()):
        msg["In-Reply-To"] = draw(MSG_ID)
    if draw(st.booleans()):
        msg["References"] = " ".join(draw(st.lists(MSG_ID, min_size=1, max_size=5)))

    which = draw(st.sampled_from(["text", "html", "both"]))
    cid = draw(LOCAL_PART) + "@" + draw(DOMAIN) if which != "text" and draw(st.booleans()) else None
    text = draw(text_content("plain")) if which != "html" else None
    html = draw(text_content("html", cid)) if which != "text" else None
    if text is not None:
        msg.set_content(text[0], **text[1])
        if html is not None:
            msg.add_alternative(html[0], **html[1])
    elif html is not None:
        msg.set_content(html[0], **html[1])
    if cid is not None:
        html_part = msg.get_payload()[-1] if msg.is_multipart() else msg
        html_part.add_related(draw(st.binary(max_size=200)), "image", "png", cid=f"<{cid}>")
    for _ in range(draw(st.integers(0, 3))):
        maintype, subtype = draw(st.sampled_from(ATTACHMENT_TYPES)).split("/")
        msg.add_attachment(
            draw(st.binary(max_size=300)),
            maintype=maintype,
            subtype=subtype,
            filename=draw(FILENAME),
            cte=draw(st.sampled_from(["base64", "quoted-printable"])),
        )
    _set_boundaries(msg)
    return Generated(msg.as_bytes(policy=email.policy.SMTP), names, specs)


@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messages())
def test_generated_message_agrees_with_stdlib(generated: Generated) -> None:
    raw = generated.raw
    std = stdlib_parse(raw)
    # The stdlib's header folder (3.11.7) does not always write well-formed mail, or what it
    # was given.  Such examples are rejected (hypothesis draws others; about 5% are), and the
    # judge is the stdlib alone -- its reading of its own output -- never ours:
    # * its parser notes a defect, e.g. an encoded word written right before a special
    #   ("=?utf-8?q?=C2=A0?=$ <a@b>": "missing trailing whitespace after encoded-word");
    # * gh-100884: folding an address list, it may put the comma between two addresses (and
    #   sometimes the next angle-addr) inside an encoded word ("=?utf-8?q?=2C?=",
    #   "=?utf-8?q?jSsyw=3E=2C?="): the addr-specs it reads back differ from those given;
    # * splitting a long display name into encoded words, it may break one word in two
    #   ("=?utf-8?b?...8PCXj5g" CRLF " =?utf-8?b?PT89IMODSw==?=": the first is no encoded
    #   word, its "?=" went into the second): the names RFC 2047 reads back differ from those
    #   given by more than whitespace.
    # Not rejected: names in which it used a space or tab *of the name* as the whitespace
    # between two encoded words ("=?utf-8?b?...?=  =?utf-8?b?...?=").  That is well-formed;
    # RFC 2047 section 6.2 just makes that whitespace disappear, and ours must read it so (see
    # _std_addresses).
    assume(not stdlib_defects(std))
    for header, given_specs in generated.specs.items():
        read_back = [a.addr_spec for field in std.get_all(header, []) for a in field.addresses]
        assume(read_back == given_specs)
    for header, given_names in generated.names.items():
        read_back = [name and name.replace(" ", "") for name in rfc2047_names(std, header)]
        assume(read_back == [_collapse(name).replace(" ", "") for name in given_names])
    assert_agrees_with_stdlib(raw)


# --- documented divergence ------------------------------------------------------------------


def test_divergence_encoded_word_lookalikes() -> None:
    """Where ours and the stdlib legitimately disagree: encoded words glued to other text.

    RFC 2047 only recognises an encoded word that is a whole token (and none inside a quoted
    string).  Both parsers are more lenient, differently:

    * ours decodes every ``=?charset?b|q?text?=`` run it finds anywhere in a header value
      (deliberate and tested: "words glued together are still decoded", see
      ``test_parsing.py::test_encoded_words_adjacent_whitespace_and_errors``), and inside MIME
      parameter values (``filename="=?UTF-8?B?...?="`` is common in real mail);
    * the stdlib decodes a glued word in unstructured text only where its scan for one starts
      ("Re:=?utf-8?q?caf=C3=A9?=" becomes "Re:café" for both), but not after a stray "=?"
      ("=?=?utf-8?q?caf=C3=A9?=" stays as it is), and never decodes one inside a quoted
      parameter that also holds other text.

    Both readings of such (rare, arguably ambiguous) text are defensible, so it is not compared
    above; this pins the difference.
    """
    raw = (
        b"Subject: Re:=?utf-8?q?caf=C3=A9?= x =?=?utf-8?q?caf=C3=A9?=\r\n"
        b"Content-Type: application/octet-stream\r\n"
        b'Content-Disposition: attachment; filename="a=?utf-8?q?caf=C3=A9?=.txt"\r\n'
        b"\r\n"
        b"x"
    )
    std = stdlib_parse(raw)
    ours = parse_message(raw)

    assert stdlib_defects(std) == []
    assert str(std["subject"]) == "Re:café x =?=?utf-8?q?caf=C3=A9?="
    assert ours.subject == "Re:café x =?café"
    assert _std_filename(std) == "a=?utf-8?q?caf=C3=A9?=.txt"
    assert [attachment.filename for attachment in ours.attachments] == ["acafé.txt"]
