"""Hostile mail (issue 11, matrix 5): the hand-made corpus and the message generators.

``CORPUS`` holds at least 30 named messages built to hurt a MIME parser: deep nesting, 100,000
empty parts, a megabyte of encoded words in one header, parameter runs, bare LF, NUL bytes,
unknown charsets, missing or duplicated boundaries, and the reproducers of known crashes of
CPython's ``email`` package (each names its issue). Each entry says whether the parser must
note a defect for it; every message is at most ``MAX_MESSAGE_BYTES`` (25 MB) by default.

``messages()`` is the Hypothesis strategy of generated MIME messages (random trees of parts,
header soup, encoded words, charsets, transfer encodings, line endings), each optionally
byte-mutated.
"""

from __future__ import annotations

import base64
import random
from collections.abc import Callable
from dataclasses import dataclass

from hypothesis import strategies as st

MB = 1024 * 1024


@dataclass(frozen=True)
class Hostile:
    name: str
    build: Callable[[], bytes]
    defect: bool  # the parser must note at least one defect


def _msg(headers: str, body: bytes = b"body\r\n") -> bytes:
    head = "From: a@example.org\r\nTo: fuzz@pigeonhole.test\r\n" + headers
    return head.encode("utf-8", "surrogateescape") + b"\r\n" + body


def _nested(depth: int) -> bytes:
    head = b"From: a@example.org\r\nSubject: nested\r\n"
    parts = [head]
    for level in range(depth):
        parts.append(
            b'Content-Type: multipart/mixed; boundary="b%d"\r\n\r\n--b%d\r\n' % (level, level)
        )
    parts.append(b"Content-Type: text/plain\r\n\r\ninnermost\r\n")
    for level in reversed(range(depth)):
        parts.append(b"--b%d--\r\n" % level)
    return b"".join(parts)


def _empty_parts(count: int) -> bytes:
    body = b"--e\r\n\r\n" * count + b"--e--\r\n"
    return _msg('Content-Type: multipart/mixed; boundary="e"\r\n', body)


def _encoded_words(size: int) -> bytes:
    word = "=?utf-8?B?" + base64.b64encode("héllo wörld ".encode()).decode() + "?= "
    words = (word * (size // len(word) + 1))[:size]
    # folded so no line is longer than about 1,000 bytes
    folded = "\r\n ".join(words[i : i + 900] for i in range(0, len(words), 900))
    return _msg(f"Subject: {folded}\r\n")


def _encoded_words_one_line(size: int) -> bytes:
    word = "=?iso-8859-1?Q?caf=E9?="
    return _msg("Subject: " + word * (size // len(word)) + "\r\n")


def _address_words(size: int) -> bytes:
    word = "=?utf-8?Q?N=C3=A4me?= <x@example.org>, "
    value = "\r\n ".join([word] * (size // len(word)))
    return _msg(f"Cc: {value}\r\n")


def _param_run(count: int) -> bytes:
    params = "".join(f";\r\n p{i}=v{i}" for i in range(count))
    return _msg(f"Content-Type: text/plain; charset=utf-8{params}\r\n")


def _semicolons(size: int) -> bytes:  # CPython's Message._parseparam is quadratic in these
    return _msg("Content-Type: text/plain" + ";" * size + "\r\n")


def _quoted_semicolons(size: int) -> bytes:
    return _msg('Content-Type: text/plain; name="' + ';"' * size + "\r\n")


def _rfc2231_run(count: int) -> bytes:
    params = "".join(f";\r\n filename*{i}*=utf-8''part{i}" for i in range(count))
    return _msg(f"Content-Type: application/octet-stream{params}\r\n", b"xx\r\n")


def _folded_lines(count: int) -> bytes:
    return _msg("Subject: start" + "\r\n more" * count + "\r\n")


def _many_headers(count: int) -> bytes:
    return _msg("".join(f"X-H{i}: {i}\r\n" for i in range(count)))


def _many_addresses(count: int) -> bytes:
    return _msg("To: " + ",\r\n ".join(f"u{i}@example.org" for i in range(count)) + "\r\n")


def _nested_comments(depth: int) -> bytes:
    return _msg("Reply-To: " + "(" * depth + "x@example.org" + ")" * depth + "\r\n")


def _rfc822_nesting(depth: int) -> bytes:
    inner = b"Subject: inner\r\n\r\nbody\r\n"
    for _ in range(depth):
        inner = b"Content-Type: message/rfc822\r\n\r\n" + inner
    return b"From: a@example.org\r\n" + inner


def _html(markup: str) -> bytes:
    return _msg("Content-Type: text/html; charset=utf-8\r\n", markup.encode())


def _text(text: str) -> bytes:
    return _msg("Content-Type: text/plain; charset=utf-8\r\n", text.encode())


def _mixed(parts: list[bytes], boundary: str = "m") -> bytes:
    body = b"".join(b"--" + boundary.encode() + b"\r\n" + p + b"\r\n" for p in parts)
    return _msg(
        f'Content-Type: multipart/mixed; boundary="{boundary}"\r\n',
        body + b"--" + boundary.encode() + b"--\r\n",
    )


CORPUS: list[Hostile] = [
    # structure
    Hostile("10,000 nested multiparts", lambda: _nested(10_000), True),
    Hostile("100,000 empty parts", lambda: _empty_parts(100_000), True),
    Hostile("1,000 nested message/rfc822", lambda: _rfc822_nesting(1_000), False),
    Hostile(
        "multipart without a boundary parameter",
        lambda: _msg("Content-Type: multipart/mixed\r\n", b"--x\r\n\r\npart\r\n--x--\r\n"),
        True,
    ),
    Hostile(
        "boundary declared, never used",
        lambda: _msg('Content-Type: multipart/mixed; boundary="nope"\r\n', b"just text\r\n"),
        True,
    ),
    Hostile(
        "two boundary parameters",
        lambda: _msg(
            'Content-Type: multipart/mixed; boundary="a"; boundary="b"\r\n',
            b"--a\r\n\r\none\r\n--b\r\n\r\ntwo\r\n--a--\r\n--b--\r\n",
        ),
        True,
    ),
    Hostile(
        "child reuses its parent's boundary",
        lambda: _mixed(
            [b'Content-Type: multipart/alternative; boundary="m"\r\n\r\n--m\r\n\r\ninner\r\n--m--']
        ),
        True,
    ),
    Hostile(
        "no closing boundary",
        lambda: _msg('Content-Type: multipart/mixed; boundary="c"\r\n', b"--c\r\n\r\nopen\r\n"),
        True,
    ),
    Hostile(
        "empty boundary",
        lambda: _msg('Content-Type: multipart/mixed; boundary=""\r\n', b"--\r\n\r\nx\r\n----\r\n"),
        True,
    ),
    Hostile(
        "boundary of 100,000 characters",
        lambda: _mixed([b"\r\nx"], boundary="B" * 100_000),
        True,
    ),
    # headers
    Hostile("1 MB of encoded words in Subject", lambda: _encoded_words(MB), False),
    Hostile("1 MB of encoded words on one line", lambda: _encoded_words_one_line(MB), False),
    Hostile("1 MB of encoded-word names in Cc", lambda: _address_words(MB), True),
    Hostile("100,000 Content-Type parameters", lambda: _param_run(100_000), True),
    Hostile("1,000,000 semicolons in Content-Type", lambda: _semicolons(1_000_000), False),
    Hostile("500,000 quoted semicolons", lambda: _quoted_semicolons(500_000), False),
    Hostile("100,000 RFC 2231 continuations", lambda: _rfc2231_run(100_000), True),
    Hostile("100,000 folded lines in one header", lambda: _folded_lines(100_000), False),
    Hostile("100,000 header fields", lambda: _many_headers(100_000), True),
    Hostile("100,000 addresses in To", lambda: _many_addresses(100_000), True),
    Hostile("100,000 nested comments in Reply-To", lambda: _nested_comments(100_000), True),
    Hostile(
        "header line of 5 MB without a colon",
        lambda: b"From: a@example.org\r\n" + b"X" * (5 * MB) + b"\r\n\r\nbody\r\n",
        True,
    ),
    Hostile(
        "unterminated encoded words",
        lambda: _msg("Subject: " + "=?utf-8?Q?abc " * 50_000 + "\r\n"),
        False,
    ),
    # line endings and bytes
    Hostile(
        "bare LF everywhere",
        lambda: _mixed([b"Content-Type: text/plain\r\n\r\nhi"]).replace(b"\r\n", b"\n"),
        False,
    ),
    Hostile(
        "bare CR everywhere",
        lambda: _mixed([b"Content-Type: text/plain\r\n\r\nhi"]).replace(b"\r\n", b"\r"),
        True,
    ),
    Hostile(
        "NUL bytes in headers and body",
        lambda: b"From: a\x00b@example.org\r\nSubject: x\x00y\r\nX-\x00: \x00\r\n\r\nbo\x00dy\r\n",
        True,
    ),
    Hostile("8-bit junk, no headers", lambda: bytes(range(256)) * 4096, True),
    Hostile("empty message", lambda: b"", True),
    Hostile("only CRLF", lambda: b"\r\n" * 100_000, True),
    # charsets and encodings
    Hostile(
        "unknown charset in the body",
        lambda: _msg("Content-Type: text/plain; charset=x-klingon-9\r\n", b"Qapla\xff\r\n"),
        True,
    ),
    Hostile(
        "unknown charset in an encoded word",
        lambda: _msg("Subject: =?x-klingon?B?UWFwbGEh?= =?utf-8?X?zz?=\r\n"),
        True,
    ),
    Hostile(
        "codec names that are not charsets",
        lambda: _mixed(
            [
                b"Content-Type: text/plain; charset=idna\r\n\r\nxn--\xff",
                b"Content-Type: text/plain; charset=unicode-escape\r\n\r\n\\N{SNOWMAN}\\U99999999",
                b"Content-Type: text/plain; charset=rot13\r\n\r\nuryyb",
                b"Content-Type: text/plain; charset=utf-16\r\n\r\n\xff\xfe\x00",
            ]
        ),
        True,
    ),
    Hostile(
        "broken base64 and quoted-printable",
        lambda: _mixed(
            [
                b"Content-Transfer-Encoding: base64\r\n\r\n!!!!====A===\x00",
                b"Content-Transfer-Encoding: quoted-printable\r\n\r\n=ZZ=\r=0=E9" * 1000,
                b"Content-Transfer-Encoding: x-uuencode\r\n\r\nbegin 644 f\r\nM" + b"\xff" * 100,
                b"Content-Transfer-Encoding: 9bit-bogus\r\n\r\nx",
            ]
        ),
        True,
    ),
    Hostile(
        "attachment names: traversal, NUL, unknown charset",
        lambda: _mixed(
            [
                b'Content-Disposition: attachment; filename="../../etc/passwd"\r\n\r\nx',
                b'Content-Disposition: attachment; filename="a\x00b.exe"\r\n\r\nx',
                b"Content-Disposition: attachment; filename*=x-klingon''%FF%FE\r\n\r\nx",
                b"Content-Disposition: attachment; filename*0*=utf-8''%E2%82; filename*1*=%AC\r\n\r\nx",
            ]
        ),
        True,
    ),
    # CPython email crash reproducers
    Hostile(
        "gh-148518: address header ending in a quote",
        lambda: b'From: a@example.org\r\nTo: "\r\n\r\nbody\r\n',
        False,
    ),
    Hostile(
        "gh-151857: parameter name ending in '*'",
        lambda: _msg("Content-Type: text/plain; name*\r\n"),
        False,
    ),
    Hostile(
        "gh-151857: display name that is only a comment",
        lambda: _msg("Cc: (c):\r\nBcc: (x): a@b.com;\r\n"),
        False,
    ),
    Hostile(
        "gh-105802: Message-ID in brackets",
        lambda: _msg(
            "Message-ID: <[83c48dddbea7492e873224a5ae1c04be-JFBVALKQOJXWILKNK4YVA7CB=@microsoft.com]>\r\n"
            "In-Reply-To: <[x@y]>\r\nReferences: <<<>>> <[a]> <\r\n"
        ),
        False,
    ),
    Hostile(
        "bpo-33476: group without its ';'",
        lambda: _msg("Cc: undisclosed-recipients:\r\nReply-To: g: a@b.c, d@e.f\r\n"),
        False,
    ),
    Hostile(
        "bpo-32178/32179: empty addresses",
        lambda: _msg("Cc: <>\r\nReply-To: ,,, <> , :;\r\nSender: \r\n"),
        False,
    ),
    Hostile(
        "bpo-45001: dates that crashed parsedate",
        lambda: _msg(
            "Date: 0\r\nResent-Date: Tue, 06 Jun 2017 27:39:33 +0600\r\n"
            "X-Date: Sat, 1 Jan 10000 00:00:00 +9999\r\n"
        ).replace(b"Date: 0", b"Date: 17 June , 2021"),
        True,
    ),
    Hostile(
        "gh-134759 / bpo-36180: content types get_payload choked on",
        lambda: _mixed(
            [
                b'Content-Type: text/plain; charset="\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n=E9',
                b"Content-Type: /\r\n\r\nx",
                b"Content-Type: text\r\n\r\nx",
                b"Content-Type: ;;;;\r\n\r\nx",
            ]
        ),
        True,
    ),
    Hostile(
        "bpo-36910: malformed Content-Type in a message/rfc822",
        lambda: _msg(
            "Content-Type: message/rfc822\r\n",
            b"Content-Type: multipart/mixed; boundary\r\n\r\n--\r\n\r\n",
        ),
        False,
    ),
    # bodies for the extractor and the HTML converter
    Hostile("10 MB on one line", lambda: _text("a" * (10 * MB)), False),
    Hostile("1 MB of digits", lambda: _text("code " + "1234567890" * (MB // 10)), False),
    Hostile(
        "1 MB of code-like tokens",
        lambda: _text("Your code is 123456. " * (MB // 21)),
        False,
    ),
    Hostile(
        "1 MB of URL fragments",
        lambda: _text("https://a.example/" + "x/https://" * (MB // 10)),
        False,
    ),
    Hostile(
        "1 MB of '@' and dots",
        lambda: _text("a@" * (MB // 4) + "." * (MB // 2)),
        False,
    ),
    Hostile("'www.:' 200,000 times", lambda: _text("www.:" * 200_000), False),
    Hostile(
        "a URL ending in 500,000 ')'",
        lambda: _text(
            "see https://a.example/x" + ")" * 500_000 + " and (https://b.example/" + "]" * 500_000
        ),
        False,
    ),
    Hostile(
        "100,000 links",
        lambda: _html(
            "".join(f'<a href="https://e.example/{i}">verify {i}</a>' for i in range(100_000))
        ),
        False,
    ),
    Hostile("200,000 nested divs", lambda: _html("<div>" * 200_000 + "x"), False),
    Hostile("unclosed comment and script", lambda: _html("<!--" + "<script>" * 200_000), False),
    Hostile(
        "1 MB inside one attribute",
        lambda: _html('<a href="' + "javascript:" * (MB // 11) + '">x'),
        False,
    ),
    Hostile("200,000 unclosed tags", lambda: _html("<a " * 200_000), False),
    Hostile("entities", lambda: _html("&#" * 300_000 + "&amp;" * 100_000), False),
    Hostile(
        "mixed whitespace and tags",
        lambda: _html(("<p> \t\r\n</p><br>" * 100_000) + "<pre>" + " \n" * 100_000),
        False,
    ),
]


# --- generated messages ---------------------------------------------------------------------

_CHARSETS = [
    "utf-8",
    "iso-8859-1",
    "windows-1252",
    "shift_jis",
    "utf-16",
    "x-unknown",
    "",
    "koi8-r",
]
_CTES = ["7bit", "8bit", "base64", "quoted-printable", "binary", "x-uuencode", "bogus"]
_TYPES = [
    "text/plain",
    "text/html",
    "application/pdf",
    "image/png",
    "message/rfc822",
    "text/x-junk",
]
_HEADER_NAMES = [
    "Subject", "From", "To", "Cc", "Reply-To", "Date", "Message-ID", "In-Reply-To",
    "References", "List-Unsubscribe", "Content-ID", "X-Custom",
]  # fmt: skip
_NOISE = [b"\r\n", b"\n", b"\r", b"--", b"=?utf-8?B?", b"?=", b"\x00", b"boundary=", b";", b'"']

_ALPHABET = (
    [chr(c) for c in range(32, 127)] * 4
    + list("\t\r\n\x00\x7f\u00e9\u00fc\u20ac\u0130\u200b\u202e\ufeff\u3042\u4e2d\U0001f600")
    + ["=?", "?=", "<", ">", "@", '"', ";", "--", "&#", "://", "www."]
)


def _random_text(rnd: random.Random, size: int = 80) -> str:
    return "".join(rnd.choice(_ALPHABET) for _ in range(rnd.randrange(size)))


def _word(rnd: random.Random) -> str:
    text = "".join(rnd.choice("ABCabc=_+/0123456789?") for _ in range(rnd.randrange(30)))
    return f"=?{rnd.choice(_CHARSETS)}?{rnd.choice('BQbqX')}?{text}?="


def _value(rnd: random.Random) -> str:
    return " ".join(
        _word(rnd) if rnd.random() < 0.3 else _random_text(rnd) for _ in range(rnd.randrange(5))
    )


def _header(name: str, value: str, eol: bytes) -> bytes:
    return (
        name.encode("utf-8", "surrogateescape")
        + b": "
        + value.encode("utf-8", "surrogateescape")
        + eol
    )


def _part(rnd: random.Random, depth: int) -> bytes:
    """A random MIME part (a multipart tree up to 3 deep) with random headers and bodies."""
    eol = rnd.choice([b"\r\n", b"\r\n", b"\n"])
    headers = [
        _header(rnd.choice(_HEADER_NAMES), _value(rnd), eol) for _ in range(rnd.randrange(5))
    ]
    if depth < 3 and rnd.randrange(4) == 0:
        boundary = "".join(rnd.choice("abc-_=") for _ in range(rnd.randrange(9)))
        subtype = rnd.choice(["mixed", "alternative", "related"])
        headers.append(_header("Content-Type", f'multipart/{subtype}; boundary="{boundary}"', eol))
        b = boundary.encode()
        children = [_part(rnd, depth + 1) for _ in range(rnd.randrange(5))]
        body = b"".join(b"--" + b + eol + child + eol for child in children)
        if rnd.random() < 0.5:
            body += b"--" + b + b"--" + eol
    else:
        cte, ctype = rnd.choice(_CTES), rnd.choice(_TYPES)
        headers.append(_header("Content-Type", f"{ctype}; charset={rnd.choice(_CHARSETS)}", eol))
        headers.append(_header("Content-Transfer-Encoding", cte, eol))
        if rnd.random() < 0.5:
            name = _random_text(rnd, 40)
            headers.append(_header("Content-Disposition", f'attachment; filename="{name}"', eol))
        text = _random_text(rnd, 200)
        if ctype == "text/html":
            text = f"<p>{text}</p><a href='https://x.example/{_random_text(rnd, 20)}'>verify</a>"
        body = text.encode("utf-8", "surrogateescape")
        if cte == "base64" and rnd.random() < 0.5:
            body = base64.encodebytes(body)
    return b"".join(headers) + eol + body


def _mutate(data: bytes, rnd: random.Random, steps: int) -> bytes:
    buf = bytearray(data)
    for _ in range(steps):
        op = rnd.randrange(5)
        pos = rnd.randrange(len(buf) + 1)
        if op == 0 and buf:
            buf[min(pos, len(buf) - 1)] = rnd.randrange(256)
        elif op == 1:
            buf[pos:pos] = rnd.choice(_NOISE)
        elif op == 2 and buf:
            del buf[pos : pos + rnd.randrange(1, 64)]
        elif op == 3 and buf:
            end = min(len(buf), pos + rnd.randrange(1, 256))
            buf[pos:pos] = buf[pos:end]
        else:
            del buf[pos:]
    return bytes(buf)


@st.composite
def messages(draw: st.DrawFn) -> bytes:
    """A generated MIME message, byte-mutated half of the time (or random bytes). Hypothesis
    draws the seed of a ``random.Random`` that builds the message: a few draws per message
    instead of thousands keeps 10,000 messages within ``make test``'s budget."""
    rnd = draw(st.randoms(use_true_random=True))
    kind = draw(st.integers(0, 9))
    if kind == 0:
        return rnd.randbytes(rnd.randrange(2048))
    raw = _part(rnd, 0)
    if kind % 2:
        raw = _mutate(raw, rnd, rnd.randrange(1, 13))
    return raw


# --- memory ---------------------------------------------------------------------------------


class RssWatch:
    """Samples this process's resident memory every few milliseconds while in use; ``growth``
    is the highest sample minus the first (``ru_maxrss`` would hide growth under an earlier
    peak of the test process)."""

    def __init__(self, every: float = 0.005) -> None:
        import threading

        self.every = every
        self.start = self.peak = self._rss()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @staticmethod
    def _rss() -> int:
        import os

        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self.peak = max(self.peak, self._rss())

    def __enter__(self) -> RssWatch:
        self.start = self.peak = self._rss()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self._rss())

    @property
    def growth(self) -> int:
        return self.peak - self.start
