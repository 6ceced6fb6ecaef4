"""MIME parsing of a received message into plain data.

``parse_message(raw)`` turns the bytes of one RFC 5322 message into a :class:`ParsedMessage`:
decoded addresses, subject, the text and HTML bodies, every top-level header, the attachments
(with their transfer encoding undone, and where their encoded bytes lie in the message, so that
``decode_part`` can give them again from the raw message) and a list of *defects* --
human-readable notes about anything that could not be parsed cleanly.  It never raises for any
input: every step is guarded, and a message that cannot be fully parsed still yields whatever
could be read.

This is the hot path of SMTP ingest, so the MIME *structure* is split here rather than by
``email.parser``:

* the stdlib feed parser walks every line in Python (with ``policy.default`` far slower again
  than with ``compat32``), parses every nested part up front (a few hundred nested multiparts
  end in ``RecursionError``), checks each line against every open boundary, and its
  Content-Type parameter parser (``Message._parseparam``) is quadratic -- a 160 KB
  ``Content-Type`` header takes tens of seconds;
* here a header block is read line by line, but bodies are only ever searched with
  ``bytes.find`` for their boundary, the nesting depth, the number of parts and the number of
  header lines are capped (a defect is recorded when a cap is hit), and every header-field
  parser is linear.

Field-level parsing still leans on the stdlib where it is sound: ``email.utils.getaddresses``
for address lists, ``email.utils.parsedate_to_datetime`` for dates, ``binascii``/``base64`` for
transfer encodings and the ``codecs`` registry for charsets.  Encoded words (RFC 2047) and
MIME parameters (RFC 2045 and RFC 2231 continuations and charsets) are decoded by small linear
parsers: MIME parameters here, charsets, transfer encodings and encoded words in
:mod:`mail.message.decoding`.

Text decoding: the declared charset is tried first (then its vendor superset, e.g. cp932 for
Shift_JIS), then UTF-8; if all fail, the declared charset is used with ``errors="replace"`` (or
latin-1 when no usable charset was declared) and a defect is recorded.  Text and HTML bodies get
LF line endings (from CRLF or stray CR).  Decoded strings never contain NUL characters or lone
surrogates, so they can be stored as they are.

Pure: no Django imports.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import getaddresses, parsedate_to_datetime
from urllib.parse import unquote_to_bytes

from .decoding import (
    SURROGATE_RE,
    TRANSFER_ENCODINGS,
    Context,
    decode_bytes,
    decode_part,
    decode_transfer,
    decode_words,
    header_bytes_to_str,
    one_line,
)

__all__ = [
    "Address",
    "ParsedAttachment",
    "ParsedMessage",
    "decode_part",
    "parse_message",
]

# --- limits ---------------------------------------------------------------------------------

MAX_PARTS = 1000  # MIME parts (multipart containers and leaves) walked per message
MAX_DEPTH = 50  # nesting depth of multiparts
MAX_HEADER_FIELDS = 10_000  # header fields read per message (all parts together)
MAX_ADDRESS_HEADER_CHARS = 1024 * 1024  # address-list text read per field
MAX_COMPLEX_ADDRESS_CHARS = 32 * 1024  # of which handed to email.utils.getaddresses
MAX_ADDRESSES = 5000  # addresses kept per field
MAX_REFERENCES = 1000  # message ids kept from References
MAX_FILENAME_CHARS = 255
_MAX_BOUNDARY_GUESS_SCAN = 64 * 1024

# --- data -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Address:
    """One mailbox of an address header."""

    address: str  # lower-cased domain part, local part as written; "" if unparseable
    name: str  # decoded display name, "" if none


@dataclass(slots=True)
class ParsedAttachment:
    """A MIME leaf that is not the chosen text or HTML body."""

    filename: str  # decoded and sanitised; "" if none
    content_type: str  # lower-case maintype/subtype
    content: bytes  # transfer encoding undone; raw payload if decoding fails
    content_id: str  # without angle brackets, "" if none
    inline: bool  # disposition inline, or has a Content-ID and is referenced / in a related
    # Where the encoded body lies in the message's bytes, if it lies there as it is (not inside
    # a part that was itself transfer-encoded) under an encoding parsing knows (an unknown one
    # may be any junk, a NUL included): decode_part(raw[start:end], transfer_encoding) gives
    # ``content`` again, so a store may keep the span instead of the bytes.
    span: tuple[int, int] | None = None
    transfer_encoding: str = ""


@dataclass(slots=True)
class ParsedMessage:
    """Plain data read from one message.  See :func:`parse_message`."""

    message_id: str = ""
    from_: Address | None = None
    to: list[Address] = field(default_factory=list)
    cc: list[Address] = field(default_factory=list)
    reply_to: list[Address] = field(default_factory=list)
    subject: str = ""
    text: str = ""
    html: str = ""
    headers: list[tuple[str, str]] = field(default_factory=list)
    attachments: list[ParsedAttachment] = field(default_factory=list)
    in_reply_to: str = ""
    references: list[str] = field(default_factory=list)
    date: datetime | None = None
    defects: list[str] = field(default_factory=list)

    def header(self, name: str) -> str:
        """Return the first top-level header value called ``name`` (any case), or ""."""
        wanted = name.lower()
        for key, value in self.headers:
            if key.lower() == wanted:
                return value
        return ""


# --- header blocks --------------------------------------------------------------------------

# One header field with its continuation lines; "\r" before "\n" stays in the value.
_HEADER_FIELD_RE = re.compile(rb"([!-9;-~]++)[ \t]*+:([^\n]*+(?:\n[ \t][^\n]*+)*+)(?:\n|\Z)")
_BLANK_LINE_RE = re.compile(rb"\n\r?\n")


def _parse_header_block(
    data: bytes, start: int, end: int, ctx: Context, top: bool
) -> tuple[list[tuple[str, bytes]], int]:
    """Read the header block at ``data[start:end]``.

    Returns ``(headers, body_start)`` where each header is ``(name, unfolded raw value)``.
    """
    headers: list[tuple[str, bytes]] = []
    match_field = _HEADER_FIELD_RE.match
    pos = start
    while pos < end:
        field_match = match_field(data, pos, end)
        if field_match is not None:
            if ctx.header_fields >= MAX_HEADER_FIELDS:
                ctx.defect(f"header limit ({MAX_HEADER_FIELDS}) reached; headers skipped")
                blank = _BLANK_LINE_RE.search(data, pos - 1 if pos > start else pos, end)
                return headers, (blank.end() if blank else end)
            ctx.header_fields += 1
            value = field_match.group(2)
            if b"\n" in value:
                value = value.replace(b"\r\n", b"").replace(b"\n", b"")
            headers.append((field_match.group(1).decode("ascii"), value.strip(b" \t\r")))
            pos = field_match.end()
            continue
        newline = data.find(b"\n", pos, end)
        next_pos = end if newline < 0 else newline + 1
        lead = data[pos]
        if lead == 10 or (lead == 13 and pos + 1 < end and data[pos + 1] == 10):
            if pos == start and top:
                ctx.defect("message has no headers")
            return headers, next_pos  # blank line: end of the header block
        if lead == 32 or lead == 9:
            ctx.defect("header continuation line without a header")
        elif not (pos == start and top and data.startswith(b"From ", pos)):  # mbox envelope
            if pos == start:
                if top:
                    ctx.defect("message has no headers")
            else:
                ctx.defect("missing blank line between headers and body")
            return headers, pos
        pos = next_pos
    return headers, end


# --- MIME parameters (RFC 2045, RFC 2231) ---------------------------------------------------

_PARAM_SKIP_RE = re.compile(r"[\s;]*")
_PARAM_NAME_RE = re.compile(r"([^\s=;\"]+)\s*")
_SPACES_RE = re.compile(r"\s*")
_QUOTED_STRING_RE = re.compile(r'"([^"\\]*(?:\\.[^"\\]*)*)"', re.DOTALL)
_MAIN_VALUE_RE = re.compile(r"\s*([^\s;(]*)")
_CONTINUATION_RE = re.compile(r"(\d{1,4})(\*?)")
_MAX_PARAMS = 1000


def _split_params(value: str, ctx: Context, header: str) -> tuple[str, list[tuple[str, str]]]:
    """Split ``type/subtype; a=b; c="d"`` into a lower-cased main value and raw parameters."""
    semi = value.find(";")
    head = value if semi < 0 else value[:semi]
    main_match = _MAIN_VALUE_RE.match(head)
    main = main_match.group(1).lower() if main_match else ""
    params: list[tuple[str, str]] = []
    if semi < 0:
        return main, params
    n = len(value)
    pos = semi
    while pos < n:
        pos = _PARAM_SKIP_RE.match(value, pos).end()  # type: ignore[union-attr]
        if pos >= n:
            break
        name_match = _PARAM_NAME_RE.match(value, pos)
        if name_match is None or len(params) >= _MAX_PARAMS:
            if len(params) >= _MAX_PARAMS:
                ctx.defect(f"too many parameters in {header}")
                break
            next_semi = value.find(";", pos + 1)  # stray quote or '=': skip this parameter
            pos = n if next_semi < 0 else next_semi
            continue
        pos = name_match.end()
        if pos >= n or value[pos] != "=":
            next_semi = value.find(";", pos)
            pos = n if next_semi < 0 else next_semi
            continue
        pos = _SPACES_RE.match(value, pos + 1).end()  # type: ignore[union-attr]
        if pos < n and value[pos] == '"':
            quoted = _QUOTED_STRING_RE.match(value, pos)
            if quoted is None:
                ctx.defect(f"unterminated quoted string in {header}")
                raw, pos = value[pos + 1 :], n
            else:
                raw = quoted.group(1)
                next_semi = value.find(";", quoted.end())
                pos = n if next_semi < 0 else next_semi
            if "\\" in raw:  # quoted pairs: only \" and \\ (keeps C:\path\names intact)
                raw = "\\".join(piece.replace('\\"', '"') for piece in raw.split("\\\\"))
        else:
            next_semi = value.find(";", pos)
            stop = n if next_semi < 0 else next_semi
            raw = value[pos:stop].strip()
            pos = stop
        params.append((name_match.group(1).lower(), raw))
    return main, params


def _decode_2231(charset: str, chunks: list[tuple[str, bool]], ctx: Context, where: str) -> str:
    data = b"".join(
        unquote_to_bytes(text) if extended else text.encode("utf-8") for text, extended in chunks
    )
    return decode_bytes(data, charset or "utf-8", ctx, where)


def _parse_params(value: str, ctx: Context, header: str) -> tuple[str, dict[str, str]]:
    """Parse a Content-Type / Content-Disposition value into ``(main, decoded params)``.

    RFC 2231 extended values and continuations win over plain values of the same name;
    encoded words in values (a common non-standard practice for filenames) are decoded.
    """
    main, raw_params = _split_params(value, ctx, header)
    plain: dict[str, str] = {}
    extended: dict[str, str] = {}
    continued: dict[str, dict[int, tuple[str, bool]]] = {}
    for name, raw in raw_params:
        base, star, rest = name.partition("*")
        if not star:
            if base in plain:
                ctx.defect(f"duplicate parameter {base!r} in {header}")
            else:
                plain[base] = raw
        elif not rest:
            extended.setdefault(base, raw)
        else:
            match = _CONTINUATION_RE.fullmatch(rest)
            if match is None:
                continue
            continued.setdefault(base, {}).setdefault(int(match.group(1)), (raw, bool(match[2])))
    params: dict[str, str] = {}
    for base, raw in plain.items():
        params[base] = decode_words(raw, ctx) if "=?" in raw else raw
    for base, raw in extended.items():
        charset, sep1, rest = raw.partition("'")
        _lang, sep2, text = rest.partition("'")
        if not (sep1 and sep2):
            charset, text = "", raw
        params[base] = _decode_2231(charset, [(text, True)], ctx, f"{header} parameter")
    for base, segments in continued.items():
        if base in extended:
            continue
        chunks = [segments[index] for index in sorted(segments)]
        charset = ""
        first_text, first_extended = chunks[0]
        if first_extended:
            charset, sep1, rest = first_text.partition("'")
            _lang, sep2, text = rest.partition("'")
            if sep1 and sep2:
                chunks[0] = (text, True)
            else:
                charset = ""
        params[base] = _decode_2231(charset, chunks, ctx, f"{header} parameter")
    return main, params


# --- small field parsers --------------------------------------------------------------------

_CONTENT_TYPE_RE = re.compile(r"[a-z0-9!#$%&'*+.^_`{|}~-]+/[a-z0-9!#$%&'*+.^_`{|}~-]+")
_MSGID_RE = re.compile(r"<([^<>]*)>")
_ID_SPLIT_RE = re.compile(r"[\s,]+")
_FILENAME_BAD_RE = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069\ufeff]")
_WHITESPACE_RE = re.compile(r"\s+")
_ADDR_CLASS = r"[^\s<>,;:\"()\[\]\\@\x00-\x1f]"  # characters of one side of an addr-spec
_ADDR_SPEC = rf"{_ADDR_CLASS}++@{_ADDR_CLASS}++"
# "Name" <a@b>, Name <a@b>, <a@b> or a@b -- anything else goes to email.utils.getaddresses.
# Possessive quantifiers: no backtracking, so matching stays linear on hostile input.
_SIMPLE_ADDRESS_RE = re.compile(
    rf"\s*+(?:(?:\"([^\"\\\r\n]*+)\"\s*+|([^\"<>,;:@()\[\]\\\r\n]*+))<({_ADDR_SPEC})>"
    rf"|({_ADDR_SPEC}))\s*+"
)
# An addr-spec in free text; the lookbehind gives each run of characters a single try.
_ADDR_SPEC_RE = re.compile(rf"(?<!{_ADDR_CLASS}){_ADDR_SPEC}")


def _message_ids(value: str) -> list[str]:
    """Message ids in ``value`` without angle brackets (ids cannot contain whitespace)."""
    compact = "".join(value.split())
    if "<" in compact:
        return [found for found in _MSGID_RE.findall(compact) if found]
    return [token for token in _ID_SPLIT_RE.split(value.strip()) if token]


def _strip_angles(value: str) -> str:
    value = value.strip()
    ids = _MSGID_RE.findall(value)
    if ids:
        return ids[0].strip()
    return value.strip("<> \t")


def _sanitise_filename(name: str) -> str:
    if not name:
        return ""
    name = _FILENAME_BAD_RE.sub("", SURROGATE_RE.sub("\ufffd", name))
    segments = [seg for seg in name.replace("\\", "/").split("/") if seg.strip()]
    name = segments[-1].strip() if segments else ""
    if name in (".", ".."):
        return ""
    if len(name) > MAX_FILENAME_CHARS:
        stem, dot, ext = name.rpartition(".")
        if dot and stem and 0 < len(ext) <= 16:
            name = stem[: MAX_FILENAME_CHARS - len(ext) - 1].rstrip() + "." + ext
        else:
            name = name[:MAX_FILENAME_CHARS]
    return name


def _clean_text(text: str, ctx: Context, where: str) -> str:
    """Body text as stored: LF line endings only, no NUL characters."""
    if "\x00" in text:
        ctx.defect(f"NUL characters removed from {where}")
        text = text.replace("\x00", "")
    if "\r" in text:  # universal newlines: CRLF and stray CRs become LF
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text


def _simple_mailboxes(text: str) -> list[tuple[str, str]] | None:
    """Fast path for the common address lists (no groups, comments or escapes)."""
    pairs: list[tuple[str, str]] = []
    items = text.split(",", MAX_ADDRESSES) if '"' not in text else [text]
    for item in items[:MAX_ADDRESSES]:
        match = _SIMPLE_ADDRESS_RE.fullmatch(item)
        if match is None:
            if item.strip():
                return None
            continue
        pairs.append((match.group(1) or match.group(2) or "", match.group(3) or match.group(4)))
    return pairs


def _addresses(values: list[str], ctx: Context, header: str) -> list[Address]:
    joined = ", ".join(values)
    if len(joined) > MAX_ADDRESS_HEADER_CHARS:
        ctx.defect(f"{header} header too long; truncated")
        joined = joined[:MAX_ADDRESS_HEADER_CHARS]
    pairs = _simple_mailboxes(joined)
    if pairs is None:
        if len(joined) > MAX_COMPLEX_ADDRESS_CHARS:
            ctx.defect(f"{header} header too long; truncated")
            joined = joined[:MAX_COMPLEX_ADDRESS_CHARS]
        try:
            pairs = getaddresses([joined])
        except Exception:
            ctx.defect(f"unparseable {header} header")
            pairs = [("", found) for found in _ADDR_SPEC_RE.findall(joined)]
    if len(pairs) > MAX_ADDRESSES:
        ctx.defect(f"more than {MAX_ADDRESSES} addresses in {header}; rest ignored")
        pairs = pairs[:MAX_ADDRESSES]
    result: list[Address] = []
    for raw_name, raw_address in pairs:
        name = one_line(decode_words(raw_name, ctx)) if raw_name else ""
        if name:
            name = _WHITESPACE_RE.sub(" ", name)
        address = one_line(raw_address).strip("<>")
        if address and (_WHITESPACE_RE.search(address) or _FILENAME_BAD_RE.search(address)):
            ctx.defect(f"unparseable address in {header} header")
            rescued = _ADDR_SPEC_RE.search(address)
            address = rescued.group(0) if rescued else ""
        local, at, domain = address.rpartition("@")
        if at and local and domain:
            address = f"{local}@{domain.lower()}"
        elif address:  # no addr-spec: keep the text as a name rather than lose it
            ctx.defect(f"unparseable address in {header} header")
            name, address = name or address, ""
        if address or name:
            result.append(Address(address=address, name=name))
    return result


def _parse_date(value: str, ctx: Context) -> datetime | None:
    value = value.strip()[:256]
    if not value:
        return None
    try:
        parsed = parsedate_to_datetime(value)
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=UTC)
        return parsed.astimezone(UTC)
    except Exception:
        ctx.defect(f"unparseable Date header {value[:64]!r}")
        return None


# --- MIME structure -------------------------------------------------------------------------

_WS_TAIL_RE = re.compile(rb"[ \t\r]*+")
_NON_SPACE_RE = re.compile(rb"\S")
_BOUNDARY_GUESS_RE = re.compile(rb"^--([!-~]{1,200}?)(?:--)?[ \t\r]*+$", re.MULTILINE)


_MAX_DELIMITER_REJECTS = 1000
_MAX_BOUNDARY = 998  # RFC 2046 allows 70; a line may hold 998


def _delimiter_pattern(delimiter: bytes) -> re.Pattern[bytes]:
    # Starts with a literal so the regex engine can use its fast substring search.
    return re.compile(b"\n(" + re.escape(delimiter) + rb")(--)?[ \t\r]*+$", re.MULTILINE)


def _split_multipart(
    data: bytes, start: int, end: int, boundary: bytes, limit: int, ctx: Context, where: str
) -> tuple[list[tuple[int, int]], bool]:
    """Split ``data[start:end]`` at ``--boundary`` lines.  Returns ``(parts, found)``.

    The line break before a delimiter belongs to the delimiter.  A missing close delimiter
    ends the last part at ``end``; a delimiter after the close delimiter (a nested multipart
    that reused its parent's boundary) resumes splitting.
    """
    delimiter = b"--" + boundary
    size = len(delimiter)
    parts: list[tuple[int, int]] = []
    part_start = -1
    closed = False
    found = False
    pos = start
    rejected = 0
    pattern: re.Pattern[bytes] | None = None
    while True:
        if pattern is None:
            hit = data.find(delimiter, pos, end)
            if hit < 0:
                break
            pos = hit + 1
            if hit != start and data[hit - 1] != 10:
                rejected += 1
                if rejected > _MAX_DELIMITER_REJECTS:
                    pattern = _delimiter_pattern(delimiter)
                continue
            after = hit + size
            is_close = data.startswith(b"--", after, end)
            rest = after + 2 if is_close else after
            newline = data.find(b"\n", rest, end)
            line_end = end if newline < 0 else newline
            if _WS_TAIL_RE.match(data, rest, line_end).end() != line_end:  # type: ignore[union-attr]
                rejected += 1
                if rejected > _MAX_DELIMITER_REJECTS:
                    pattern = _delimiter_pattern(delimiter)
                continue
        else:
            # Many near-misses (hostile input): let the regex engine skip them in C.
            line = pattern.search(data, pos - 1, end)  # pos > start: data[pos - 1] is ours
            if line is None:
                break
            hit, is_close = line.start(1), line.group(2) is not None
            newline = line.end() if line.end() < end else -1
        found = True
        next_start = end if newline < 0 else newline + 1
        if part_start >= 0:
            content_end = hit
            if content_end > part_start and data[content_end - 1] == 10:
                content_end -= 1
                if content_end > part_start and data[content_end - 1] == 13:
                    content_end -= 1
            parts.append((part_start, content_end))
            part_start = -1
            if len(parts) >= limit:
                ctx.defect(f"part limit ({MAX_PARTS}) reached; remaining parts skipped")
                return parts, found
        if is_close:
            closed = True
        else:
            if closed:
                ctx.defect(f"boundary reused after its close delimiter in {where}")
                closed = False
            part_start = next_start
        pos = next_start
    if part_start >= 0:
        parts.append((part_start, end))
    if found and not closed:
        ctx.defect(f"missing close delimiter in {where}")
    return parts, found


class _Part:
    """Headers of one MIME part, indexed for the few fields parsing needs."""

    __slots__ = ("content_id", "cte", "ctype", "ctype_params", "disp_params", "disposition")

    def __init__(
        self, headers: list[tuple[str, bytes]], default_type: str, ctx: Context, where: str
    ) -> None:
        first: dict[str, bytes] = {}
        for name, value in headers:
            key = name.lower()
            if key not in first:
                first[key] = value
        self.ctype = default_type
        self.ctype_params: dict[str, str] = {}
        raw_type = first.get("content-type")
        if raw_type is not None:
            text = header_bytes_to_str(raw_type, ctx, "Content-Type")
            main, self.ctype_params = _parse_params(text, ctx, "Content-Type")
            if _CONTENT_TYPE_RE.fullmatch(main):
                self.ctype = main
            else:
                ctx.defect(f"invalid Content-Type {main[:64]!r} in {where}; using text/plain")
                self.ctype = "text/plain"
        self.disposition = ""
        self.disp_params: dict[str, str] = {}
        raw_disp = first.get("content-disposition")
        if raw_disp is not None:
            text = header_bytes_to_str(raw_disp, ctx, "Content-Disposition")
            self.disposition, self.disp_params = _parse_params(text, ctx, "Content-Disposition")
        raw_cte = first.get("content-transfer-encoding", b"")
        cte = raw_cte.decode("latin-1").strip().strip('"').lower()
        self.cte = cte.split(None, 1)[0].split("(", 1)[0] if cte else ""
        raw_cid = first.get("content-id", b"")
        self.content_id = (
            _strip_angles(header_bytes_to_str(raw_cid, ctx, "Content-ID")) if raw_cid else ""
        )

    @property
    def filename(self) -> str:
        return self.disp_params.get("filename") or self.ctype_params.get("name") or ""


def _guess_boundary(data: bytes, start: int, end: int) -> bytes | None:
    match = _BOUNDARY_GUESS_RE.search(data, start, min(end, start + _MAX_BOUNDARY_GUESS_SCAN))
    return match.group(1) if match else None


def _walk(
    data: bytes,
    body_start: int,
    headers: list[tuple[str, bytes]],
    ctx: Context,
    *,
    spans: bool = True,
) -> tuple[str, str, list[ParsedAttachment]]:
    """Walk the MIME tree depth-first.  Returns ``(text, html, attachments)``; with ``spans``
    (``data`` is the message's bytes as received), each attachment found in ``data`` itself
    carries the span of its encoded body."""
    text: str | None = None
    html: str | None = None
    leaves: list[tuple[ParsedAttachment, bool]] = []  # (attachment, in multipart/related)
    # Stack entries: (buffer, start, end, headers or None, default type, depth, parent type)
    stack: list[tuple[bytes, int, int, list[tuple[str, bytes]] | None, str, int, str]] = [
        (data, body_start, len(data), headers, "text/plain", 0, "")
    ]
    while stack:
        buf, start, end, part_headers, default_type, depth, parent = stack.pop()
        if part_headers is None and _NON_SPACE_RE.search(buf, start, end) is None:
            ctx.defect(f"empty part in {parent}")  # e.g. two delimiter lines in a row
            continue
        if ctx.parts >= MAX_PARTS:
            ctx.defect(f"part limit ({MAX_PARTS}) reached; remaining parts skipped")
            break
        ctx.parts += 1
        where = f"part {ctx.parts}"
        try:
            if part_headers is None:
                part_headers, start = _parse_header_block(buf, start, end, ctx, top=False)
            part = _Part(part_headers, default_type, ctx, where)
            maintype, _, subtype = part.ctype.partition("/")
            if maintype == "multipart":
                if depth >= MAX_DEPTH:
                    ctx.defect(f"nesting depth limit ({MAX_DEPTH}) reached; deeper parts skipped")
                    continue
                if part.cte in ("base64", "quoted-printable"):
                    ctx.defect(f"{part.cte} transfer encoding on {part.ctype} in {where}")
                    buf = decode_transfer(buf[start:end], part.cte, ctx, where)
                    start, end = 0, len(buf)
                if _NON_SPACE_RE.search(buf, start, end) is None:
                    ctx.defect(f"empty {part.ctype} in {where}")
                    continue
                limit = MAX_PARTS - ctx.parts
                boundary_text = part.ctype_params.get("boundary", "")
                boundary = boundary_text.encode("utf-8", "replace") if boundary_text else b""
                if len(boundary) > _MAX_BOUNDARY:
                    ctx.defect(f"boundary longer than {_MAX_BOUNDARY} bytes ignored in {where}")
                    boundary, boundary_text = b"", ""
                children: list[tuple[int, int]] = []
                found = False
                if boundary:
                    children, found = _split_multipart(
                        buf, start, end, boundary, max(limit, 1), ctx, where
                    )
                    if not found:
                        ctx.defect(f"boundary {boundary_text[:70]!r} not found in {where}")
                else:
                    ctx.defect(f"missing boundary in {part.ctype} ({where})")
                if not found:
                    guess = _guess_boundary(buf, start, end)
                    if guess is not None and guess != boundary:
                        children, found = _split_multipart(
                            buf, start, end, guess, max(limit, 1), ctx, where
                        )
                        if found:
                            ctx.defect(f"guessed boundary {guess.decode('latin-1')!r} in {where}")
                if not found:
                    # Nothing to split on: keep the body readable as text.
                    stack.append((buf, start, end, [], "text/plain", depth + 1, part.ctype))
                    continue
                if not children:
                    ctx.defect(f"{part.ctype} without parts in {where}")
                child_default = "message/rfc822" if subtype == "digest" else "text/plain"
                for child_start, child_end in reversed(children):
                    stack.append(
                        (buf, child_start, child_end, None, child_default, depth + 1, part.ctype)
                    )
                continue
            content = decode_transfer(buf[start:end], part.cte, ctx, where)
            is_attachment = part.disposition not in ("", "inline")
            if maintype == "text" and not is_attachment:
                if subtype == "plain" and text is None:
                    text = _clean_text(
                        decode_bytes(content, part.ctype_params.get("charset", ""), ctx, where),
                        ctx,
                        f"text/plain body ({where})",
                    )
                    continue
                if subtype == "html" and html is None:
                    html = _clean_text(
                        decode_bytes(content, part.ctype_params.get("charset", ""), ctx, where),
                        ctx,
                        f"text/html body ({where})",
                    )
                    continue
            filename = part.filename
            if not filename and part.ctype in ("message/rfc822", "message/global"):
                filename = "message.eml"
            attachment = ParsedAttachment(
                filename=_sanitise_filename(filename),
                content_type=part.ctype,
                content=content,
                content_id=part.content_id,
                inline=part.disposition == "inline",
                span=(
                    (start, end)
                    if spans and buf is data and part.cte in TRANSFER_ENCODINGS
                    else None
                ),
                transfer_encoding=part.cte,
            )
            leaves.append((attachment, parent == "multipart/related"))
        except Exception as exc:
            ctx.defect(f"could not parse {where}: {type(exc).__name__}")
    html_lower: str | None = None  # lower-cased only if some Content-ID needs looking up
    attachments: list[ParsedAttachment] = []
    for attachment, in_related in leaves:
        if not attachment.inline and attachment.content_id:
            if in_related:
                attachment.inline = True
            elif html:
                if html_lower is None:
                    html_lower = html.lower()
                attachment.inline = f"cid:{attachment.content_id.lower()}" in html_lower
        attachments.append(attachment)
    return text or "", html or "", attachments


# --- entry point ----------------------------------------------------------------------------


def _as_bytes(raw: object, ctx: Context) -> bytes:
    if isinstance(raw, bytes):
        return raw
    if isinstance(raw, bytearray | memoryview):
        return bytes(raw)
    if isinstance(raw, str):
        ctx.defect("message given as str; encoded as UTF-8")
        return raw.encode("utf-8", "surrogateescape")
    ctx.defect(f"not a message: {type(raw).__name__}")
    return b""


def parse_message(raw: bytes) -> ParsedMessage:
    """Parse the bytes of one message.  Never raises; problems are listed in ``defects``."""
    result = ParsedMessage()
    ctx = Context()
    try:
        _parse_into(_as_bytes(raw, ctx), result, ctx)
    except Exception as exc:  # last resort; each step below guards itself
        ctx.defect(f"could not parse message: {type(exc).__name__}")
    result.defects = ctx.defects
    return result


def _parse_into(data: bytes, result: ParsedMessage, ctx: Context) -> None:
    if not data.strip():
        ctx.defect("empty message")
        return
    received = data
    if b"\n" not in data and b"\r" in data:
        ctx.defect("bare CR line endings")
        data = data.replace(b"\r", b"\n")

    try:
        raw_headers, body_start = _parse_header_block(data, 0, len(data), ctx, top=True)
    except Exception as exc:  # keep the body readable even if the header block is not
        ctx.defect(f"could not parse header block: {type(exc).__name__}")
        raw_headers, body_start = [], 0

    values: dict[str, list[str]] = {}  # raw (not RFC 2047-decoded) values by lower-case name
    headers: list[tuple[str, str]] = []
    subject: str | None = None
    for name, raw_value in raw_headers:
        try:
            value = header_bytes_to_str(raw_value, ctx, name)
            key = name.lower()
            values.setdefault(key, []).append(value)
            decoded = one_line(decode_words(value, ctx))
            headers.append((name, decoded))
            if subject is None and key == "subject":
                subject = decoded
        except Exception as exc:
            ctx.defect(f"could not decode {name} header: {type(exc).__name__}")
    result.headers = headers
    result.subject = subject or ""

    def first(key: str) -> str:
        found = values.get(key)
        return found[0] if found else ""

    def references() -> list[str]:
        found = [ref for value in values.get("references", []) for ref in _message_ids(value)]
        if len(found) > MAX_REFERENCES:  # keep the thread root and the most recent ones
            ctx.defect(f"more than {MAX_REFERENCES} References; middle ones dropped")
            found = found[:1] + found[1 - MAX_REFERENCES :]
        return found

    fields: tuple[tuple[str, str, Callable[[], object]], ...] = (
        ("message_id", "Message-ID", lambda: _first_id(first("message-id"))),
        ("from_", "From", lambda: _first_address(values.get("from", [])[:1], ctx)),
        ("to", "To", lambda: _addresses(values.get("to", []), ctx, "To")),
        ("cc", "Cc", lambda: _addresses(values.get("cc", []), ctx, "Cc")),
        ("reply_to", "Reply-To", lambda: _addresses(values.get("reply-to", []), ctx, "Reply-To")),
        ("in_reply_to", "In-Reply-To", lambda: _first_id(first("in-reply-to"))),
        ("references", "References", references),
        ("date", "Date", lambda: _parse_date(first("date"), ctx)),
    )
    for attribute, label, read in fields:
        try:
            setattr(result, attribute, read())
        except Exception as exc:
            ctx.defect(f"could not parse {label} header: {type(exc).__name__}")

    try:
        result.text, result.html, result.attachments = _walk(
            data, body_start, raw_headers, ctx, spans=data is received
        )
    except Exception as exc:
        ctx.defect(f"could not parse body: {type(exc).__name__}")


def _first_id(value: str) -> str:
    ids = _message_ids(value)
    return ids[0] if ids else ""


def _first_address(values: list[str], ctx: Context) -> Address | None:
    found = _addresses(values, ctx, "From") if values else []
    return found[0] if found else None
