"""Bytes to text for the MIME parser: charsets, transfer encodings and RFC 2047 encoded words.

Each decoder notes what it could not decode cleanly in the message's :class:`Context` (the
per-message budgets and defect list) instead of raising; :mod:`mail.message.parsing` walks the
structure and calls these. ``decode_part`` is public: downloads decode an attachment's bytes
from the raw message with the same code the parser used.

Pure: no Django imports (see :mod:`mail.message`).
"""

from __future__ import annotations

import base64
import binascii
import codecs
import encodings
import encodings.aliases
import functools
import pkgutil
import re

MAX_DEFECTS = 100  # notes kept in ParsedMessage.defects

# --- parse context --------------------------------------------------------------------------


class Context:
    """Per-message budgets and the defect list."""

    __slots__ = ("_seen", "defects", "header_fields", "parts")

    def __init__(self) -> None:
        self.defects: list[str] = []
        self._seen: set[str] = set()
        self.parts = 0
        self.header_fields = 0

    def defect(self, note: str) -> None:
        if note in self._seen:
            return
        self._seen.add(note)
        if len(self.defects) < MAX_DEFECTS:
            self.defects.append(note)
        elif len(self.defects) == MAX_DEFECTS:
            self.defects.append("further defects omitted")


# --- charsets -------------------------------------------------------------------------------

# Labels seen in real mail that Python's codec registry does not know.
_CHARSET_ALIASES: dict[str, str] = {
    "x-gbk": "gbk",
    "x-sjis": "shift_jis",
    "x-euc-jp": "euc_jp",
    "windows-874": "cp874",
    "iso-8859-8-i": "iso8859-8",
    "x-mac-roman": "mac-roman",
    "x-mac-ce": "mac-latin2",
    "x-mac-cyrillic": "mac-cyrillic",
    "unicode-1-1-utf-7": "utf-7",
}
# Vendor supersets tried when text does not decode in the declared charset: mail labelled
# Shift_JIS, EUC-KR, GB2312 or Big5 often uses the Windows/HKSCS extensions.
_SUPERSET_CODECS: dict[str, str] = {
    "shift_jis": "cp932",
    "euc_kr": "cp949",
    "gb2312": "gb18030",
    "gbk": "gb18030",
    "big5": "big5hkscs",
}
# Labels meaning "some unknown 8-bit charset": fall back without calling it a defect.
_UNKNOWN_8BIT = frozenset({"unknown-8bit", "x-unknown-8bit", "unknown", "8bit", "x-user-defined"})
# Python-only codecs that are not mail charsets (slow or surprising on hostile input).
_FORBIDDEN_CODECS = frozenset(
    {"idna", "punycode", "unicode-escape", "raw-unicode-escape", "undefined", "mbcs", "oem"}
)
_CHARSET_NAME_RE = re.compile(r"[a-z0-9_.:()+-]{1,64}")


def _known_codec_names() -> frozenset[str]:
    # Only names the stdlib ``encodings`` package can resolve are looked up, so hostile labels
    # never reach (and grow) the codec registry's negative-lookup cache.
    names: set[str] = set(encodings.aliases.aliases)
    names.update(encodings.aliases.aliases.values())
    names.update(module.name for module in pkgutil.iter_modules(encodings.__path__))
    return frozenset(names)


_KNOWN_CODECS = _known_codec_names()


@functools.lru_cache(maxsize=256)
def _codec_for(label: str) -> str | None:
    """Python codec name for a (lower-cased) charset label, or None if unusable."""
    label = _CHARSET_ALIASES.get(label, label)
    if not _CHARSET_NAME_RE.fullmatch(label):
        return None
    normalized = encodings.normalize_encoding(label)
    if normalized not in _KNOWN_CODECS and normalized.replace(".", "_") not in _KNOWN_CODECS:
        return None
    try:
        info = codecs.lookup(label)
    except (LookupError, ValueError, TypeError):
        return None
    if not getattr(info, "_is_text_encoding", True) or info.name in _FORBIDDEN_CODECS:
        return None
    return info.name


@functools.lru_cache(maxsize=256)
def _clean_charset(charset: str) -> str:
    label = charset.strip().strip("\"'").strip().lower()
    return label.split("*", 1)[0]  # RFC 2231 language suffix: "utf-8*en"


SURROGATE_RE = re.compile("[\ud800-\udfff]")


def decode_bytes(data: bytes, charset: str, ctx: Context, where: str) -> str:
    """Decode ``data``: declared charset, then UTF-8, then lossy; defects noted on the way."""
    label = _clean_charset(charset) if charset else ""
    codec = _codec_for(label) if label else None
    if label and codec is None and label not in _UNKNOWN_8BIT:
        ctx.defect(f"unknown charset {label!r} in {where}")
    if codec is not None:
        for candidate in (codec, _SUPERSET_CODECS.get(codec)):
            if candidate is None:
                continue
            try:
                text = data.decode(candidate)
            except Exception:
                continue
            if candidate == "utf-7" and not text.isascii():  # can yield lone surrogates
                text = SURROGATE_RE.sub("\ufffd", text)
            return text
    if codec != "utf-8":
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            pass
    if codec is not None and codec != "ascii":
        ctx.defect(f"undecodable {label} bytes in {where} replaced")
        try:
            return SURROGATE_RE.sub("\ufffd", data.decode(codec, "replace"))
        except Exception:
            pass
    ctx.defect(f"undecodable bytes in {where} decoded as latin-1")
    return data.decode("latin-1", "replace")


def header_bytes_to_str(value: bytes, ctx: Context, name: str) -> str:
    """Raw header bytes to str: ASCII, UTF-8 (RFC 6532), else latin-1.  NUL bytes are dropped."""
    if b"\x00" in value:
        ctx.defect(f"NUL bytes removed from {name} header")
        value = value.replace(b"\x00", b"")
    if value.isascii():
        return value.decode("ascii")
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        ctx.defect(f"non-UTF-8 bytes in {name} header decoded as latin-1")
        return value.decode("latin-1")


# --- transfer encodings ---------------------------------------------------------------------

_B64_STRIP = b" \t\r\n\x0b\x0c"
_B64_NON_ALPHABET = bytes(
    b for b in range(256) if not (chr(b).isascii() and (chr(b).isalnum() or chr(b) in "+/="))
)
_B64_PAD_RE = re.compile(rb"=+")
_MAX_B64_SEGMENTS = 10_000


_UUENCODE_NAMES = frozenset({"x-uuencode", "uuencode", "uue", "x-uue"})


def _b64_segment(segment: bytes) -> bytes:
    extra = len(segment) % 4
    if extra == 1:  # a lone trailing sextet carries no whole byte
        segment = segment[:-1]
    elif extra:
        segment += b"=" * (4 - extra)
    return base64.b64decode(segment) if segment else b""


def _decode_base64(payload: bytes, ctx: Context, where: str) -> bytes:
    first_pad = payload.find(b"=")
    if first_pad < 0 or not payload[first_pad:].translate(None, b"= \t\r\n"):
        try:  # fast path: padding (if any) only at the end; line breaks are skipped
            decoded = binascii.a2b_base64(payload)
        except (binascii.Error, ValueError):
            pass
        else:
            if decoded or not payload.strip():
                return decoded
    # Lenient path: drop junk characters, decode each run between padding separately (some
    # encoders pad every line), and make do with truncated final quanta.
    ctx.defect(f"invalid base64 in {where}")
    cleaned = payload.translate(None, _B64_NON_ALPHABET)
    segments = _B64_PAD_RE.split(cleaned, _MAX_B64_SEGMENTS)
    if len(segments) > _MAX_B64_SEGMENTS:  # bounded work: decode the tail as one run
        segments[-1] = segments[-1].replace(b"=", b"")
    try:
        decoded = b"".join(_b64_segment(seg) for seg in segments if seg)
    except (binascii.Error, ValueError):
        decoded = b""
    if not decoded and payload.strip():
        ctx.defect(f"undecodable base64 in {where}; raw payload kept")
        return payload
    return decoded


def _decode_uuencode(payload: bytes, ctx: Context, where: str) -> bytes:
    out: list[bytes] = []
    started = False
    for line in payload.splitlines():
        if not started:
            started = line.startswith(b"begin")
            continue
        stripped = line.strip()
        if stripped == b"end":
            break
        if not stripped:
            continue
        try:
            out.append(binascii.a2b_uu(line))
        except binascii.Error:
            # Some encoders emit garbage padding; decode only the bytes the count promises.
            nbytes = (((line[0] - 32) & 63) * 4 + 5) // 3
            try:
                out.append(binascii.a2b_uu(line[:nbytes]))
            except binascii.Error:
                ctx.defect(f"invalid uuencode line in {where}")
    if not started:
        ctx.defect(f"uuencode without begin line in {where}; raw payload kept")
        return payload
    return b"".join(out)


# The transfer encodings parsing undoes (any other leaves the bytes as they are).
TRANSFER_ENCODINGS = frozenset(
    {"", "7bit", "8bit", "binary", "base64", "quoted-printable"} | _UUENCODE_NAMES
)


def decode_part(payload: bytes, transfer_encoding: str) -> bytes:
    """The bytes of a part's encoded body with its transfer encoding undone, as parsing does
    (see ``ParsedAttachment.span``)."""
    return decode_transfer(payload, transfer_encoding, Context(), "part")


def decode_transfer(payload: bytes, cte: str, ctx: Context, where: str) -> bytes:
    if not cte or cte in ("7bit", "8bit", "binary"):
        return payload
    if cte == "base64":
        return _decode_base64(payload, ctx, where)
    if cte == "quoted-printable":
        return binascii.a2b_qp(payload)
    if cte in _UUENCODE_NAMES:
        return _decode_uuencode(payload, ctx, where)
    ctx.defect(f"unknown transfer encoding {cte!r} in {where}")
    return payload


# --- encoded words (RFC 2047) ---------------------------------------------------------------

# Lenient: whitespace inside the encoded text is accepted, '?' is not (so matching is linear).
_EW_RE = re.compile(r"=\?([^?\s]+)\?([bBqQ])\?([^?]*)\?=")


def _ew_payload(encoding: str, text: str, ctx: Context) -> bytes:
    raw = text.encode("utf-8")
    if encoding not in "bB":
        return binascii.a2b_qp(raw, header=True)
    compact = raw.translate(None, _B64_STRIP)
    missing = -len(compact) % 4
    if missing < 3:  # tolerate missing padding
        try:
            return base64.b64decode(compact + b"=" * missing, validate=True)
        except (binascii.Error, ValueError):
            pass
    ctx.defect("invalid base64 in encoded word")
    segments = _B64_PAD_RE.split(compact.translate(None, _B64_NON_ALPHABET))
    try:
        return b"".join(_b64_segment(segment) for segment in segments if segment)
    except (binascii.Error, ValueError):
        return raw


def decode_words(value: str, ctx: Context) -> str:
    """Decode the RFC 2047 encoded words in ``value`` (linear in its length).

    Whitespace between adjacent encoded words is dropped, and the bytes of adjacent words in
    the same charset are joined before decoding, so multi-byte characters split across words
    survive.
    """
    if "=?" not in value:
        return value
    out: list[str] = []
    pending: list[bytes] = []
    pending_charset = ""
    pos = 0
    for match in _EW_RE.finditer(value):
        gap = value[pos : match.start()]
        if not pending or (gap and not gap.isspace()):
            if pending:
                out.append(decode_bytes(b"".join(pending), pending_charset, ctx, "header"))
                pending = []
            out.append(gap)
        charset = _clean_charset(match.group(1))
        try:
            data = _ew_payload(match.group(2), match.group(3), ctx)
        except Exception:
            data = match.group(0).encode("utf-8", "replace")
        if pending and charset != pending_charset:
            out.append(decode_bytes(b"".join(pending), pending_charset, ctx, "header"))
            pending = []
        pending_charset = charset
        pending.append(data)
        pos = match.end()
    if pending:
        out.append(decode_bytes(b"".join(pending), pending_charset, ctx, "header"))
    out.append(value[pos:])
    return "".join(out)


def one_line(value: str) -> str:
    """Single-line form of a header value: no CR/LF, no NUL, stripped."""
    if "\r" in value or "\n" in value:
        value = value.replace("\r\n", " ").replace("\r", " ").replace("\n", " ")
    if "\x00" in value:
        value = value.replace("\x00", "")
    return value.strip()
