"""Messages as an mbox file, in the mboxrd variant: each message after a ``From_`` line, lines
that begin with ``From `` after any number of ``>`` quoted with one more ``>`` (reversible, unlike
mboxo), and an empty line after each message. The message's own bytes are kept as they are,
line endings included; one that does not end with a line break gets one."""

from __future__ import annotations

import re
from datetime import datetime

_FROM_LINE = re.compile(rb"^(>*From )", re.MULTILINE)
_SENDER_UNSAFE = re.compile(r"[\s]+")


def from_line(sender: str, when: datetime) -> bytes:
    """The separator line: ``From <envelope sender> <asctime>``, in UTC as ``when`` gives it."""
    sender = _SENDER_UNSAFE.sub("_", sender.strip()) or "MAILER-DAEMON"
    return f"From {sender} {when.strftime('%a %b %d %H:%M:%S %Y')}\n".encode("ascii", "replace")


def quote(raw: bytes) -> bytes:
    """mboxrd quoting: ``>`` before every line that starts with ``>``* then ``From ``."""
    return _FROM_LINE.sub(rb">\1", raw)


def unquote(body: bytes) -> bytes:
    """The inverse of :func:`quote`."""
    return re.sub(rb"^>(>*From )", rb"\1", body, flags=re.MULTILINE)


def entry(sender: str, when: datetime, raw: bytes) -> bytes:
    """One message of the file: its ``From_`` line, its quoted bytes, the empty line."""
    body = quote(raw)
    if not body.endswith(b"\n"):
        body += b"\n"
    return from_line(sender, when) + body + b"\n"
