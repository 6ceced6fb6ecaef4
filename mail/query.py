"""The search language of ``q`` (``GET /emails``, ``GET /inboxes/{id}/emails``, the dashboard's
search box): a tokenizer and parser into a flat list of terms, all ANDed. Pure Python, no Django;
:func:`mail.selectors.email_list` turns the terms into a database filter.

Grammar (white space separates terms; everything is ANDed; there is no OR and no grouping)::

    query    = { space } [ term { space { space } term } ] { space }
    term     = [ "-" ] ( operator | text )          ; "-" negates the term
    operator = name ":" value                       ; name is case-insensitive
    name     = "from" | "to" | "subject" | "label" | "inbox" | "header"
             | "has" | "is" | "before" | "after" | "spf" | "dkim" | "dmarc" | "arc"
    value    = phrase | word
    text     = phrase | word
    phrase   = '"' { any character but '"' } '"'    ; a quoted phrase, searched as written
    word     = { any character but space or '"' }-  ; at least one character

- A bare word or phrase matches the sender (address or name), the subject or the text body:
  sender and subject as a case-insensitive substring (as ``q`` always did, with the preview), the
  body by its words (the phrase's words in that order), through the full-text index.
- ``from:`` sender address or name, ``to:`` the envelope recipient or a To address, ``subject:``:
  case-insensitive substrings. ``label:`` a label key of the workspace; ``inbox:`` an inbox id or
  address of the workspace. ``header:Name=value``: a header of that name (case-insensitive) whose
  value is ``value`` (case-insensitive, whole value); ``header:Name`` alone: the header is present.
- ``has:attachment``, ``has:code``, ``has:link``; ``is:read``, ``is:unread``, ``is:starred``.
- ``spf:``, ``dkim:``, ``dmarc:``, ``arc:`` a result of that mechanism's verdict
  (``dmarc:fail``, ``spf:softfail``): ``dkim:`` matches when any signature has that result,
  ``dkim:none`` when there is no signature; an email that was not checked matches none of them.
- ``before:`` and ``after:`` a date (``2026-11-27``, its midnight UTC) or an ISO 8601 date-time
  (``2026-11-27T08:30:00Z``; no offset means UTC): ``before:`` is received strictly before that
  instant, ``after:`` at or after it.
- A word whose part before its first colon is not an operator name (``10:30``, ``re:``, a URL)
  is a plain word. Nothing is a pattern: no regular expression, no wildcard.

A malformed query raises :class:`QueryError` with the offending term and its 0-based character
position: an unterminated quote, an empty phrase or operator value, an unknown ``has:``,
``is:`` or authentication result value, a date that is not one, a ``header:`` without a name,
a lone ``-``, more than :data:`MAX_TERMS` terms.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime

MAX_TERMS = 20
# The authentication verdicts (mail.authentication): the results each mechanism may give, plus
# "none" for dkim (no signature).
AUTH_OPERATORS: dict[str, frozenset[str]] = {
    "spf": frozenset({"pass", "fail", "softfail", "neutral", "none", "temperror", "permerror"}),
    "dkim": frozenset({"pass", "fail", "neutral", "none", "temperror", "permerror"}),
    "dmarc": frozenset({"pass", "fail", "none", "temperror", "permerror"}),
    "arc": frozenset({"pass", "fail", "none", "neutral", "temperror"}),
}
OPERATORS = frozenset(
    {"from", "to", "subject", "label", "inbox", "header", "has", "is", "before", "after"}
    | set(AUTH_OPERATORS)
)
HAS_VALUES = frozenset({"attachment", "code", "link"})
IS_VALUES = frozenset({"read", "unread", "starred"})
# An HTTP header's field-name (RFC 9110 token); fixed shape, no user pattern.
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,200}")


class QueryError(ValueError):
    """A malformed query: ``message`` says what, ``term`` and ``position`` (0-based) where."""

    def __init__(self, message: str, *, term: str, position: int) -> None:
        self.message = message
        self.term = term
        self.position = position
        super().__init__(f"{message} (term {term!r} at character {position})")


@dataclass(frozen=True)
class Term:
    """One term of a query. ``field`` is ``"text"`` for a bare word or phrase, else the
    operator's name; ``value`` is the word, the phrase's content or the operator's value
    (for ``header``, the name; ``header_value`` its value or None); ``when`` the instant of
    ``before``/``after``. ``source`` and ``position`` locate it in the query as sent."""

    field: str
    value: str
    negated: bool
    position: int
    source: str
    phrase: bool = False
    header_value: str | None = None
    when: datetime | None = None


def _read_value(query: str, i: int, start: int) -> tuple[str, bool, int]:
    """The value at ``query[i:]`` (a phrase or a word): its text, whether quoted, and the index
    after it. ``start`` is the term's position for errors."""
    n = len(query)
    if i < n and query[i] == '"':
        end = query.find('"', i + 1)
        if end < 0:
            raise QueryError("Unterminated quote.", term=query[start:], position=start)
        after = end + 1
        if after < n and not query[after].isspace():
            raise QueryError(
                "A closing quote must end the term.",
                term=query[start : _word_end(query, after)],
                position=start,
            )
        return query[i + 1 : end], True, after
    end = _word_end(query, i)
    if '"' in query[i:end] or (end < n and query[end] == '"'):
        stop = _word_end(query, end + 1) if end < n else end
        raise QueryError(
            "A quote may only open a term or an operator's value.",
            term=query[start:stop],
            position=start,
        )
    return query[i:end], False, end


def _word_end(query: str, i: int) -> int:
    n = len(query)
    while i < n and not query[i].isspace() and query[i] != '"':
        i += 1
    return i


def _instant(value: str, *, term: str, position: int) -> datetime:
    try:
        if len(value) == 10:
            day = date.fromisoformat(value)
            return datetime(day.year, day.month, day.day, tzinfo=UTC)
        when = datetime.fromisoformat(value)
    except ValueError:
        raise QueryError(
            "Not a date (YYYY-MM-DD) or an ISO 8601 date-time.", term=term, position=position
        ) from None
    try:
        # In UTC here: an offset that carries the instant out of years 1-9999 (0001-01-01 at
        # +01:00) is the client's error, not the database adapter's OverflowError (a 500).
        return when.astimezone(UTC) if when.tzinfo else when.replace(tzinfo=UTC)
    except OverflowError:
        raise QueryError(
            "The date-time is out of range in UTC.", term=term, position=position
        ) from None


def parse(query: str) -> list[Term]:
    """The terms of ``query`` in order (an empty or blank query has none); :class:`QueryError`
    when it is malformed."""
    terms: list[Term] = []
    i, n = 0, len(query)
    while True:
        while i < n and query[i].isspace():
            i += 1
        if i >= n:
            return terms
        start = i
        negated = query[i] == "-"
        if negated:
            i += 1
            if i >= n or query[i].isspace():
                raise QueryError("A '-' must be followed by a term.", term="-", position=start)
        head_end = _word_end(query, i)
        colon = query.find(":", i, head_end)
        name = query[i:colon].lower() if colon > i else ""
        if name in OPERATORS:
            value, quoted, i = _read_value(query, colon + 1, start)
            term = _operator(name, value, quoted, negated, start, query[start:i])
        else:
            value, quoted, i = _read_value(query, i, start)
            source = query[start:i]
            if not value.strip():
                raise QueryError("Empty phrase.", term=source, position=start)
            term = Term("text", value, negated, start, source, phrase=quoted)
        terms.append(term)
        if len(terms) > MAX_TERMS:
            raise QueryError(
                f"At most {MAX_TERMS} terms.", term=term.source, position=term.position
            )


def _operator(name: str, value: str, quoted: bool, negated: bool, start: int, source: str) -> Term:
    def fail(message: str) -> QueryError:
        return QueryError(message, term=source, position=start)

    value = value.strip()
    if not value:
        raise fail(f"'{name}:' needs a value.")
    if name == "has":
        if value.lower() not in HAS_VALUES:
            raise fail(f"has: takes one of {', '.join(sorted(HAS_VALUES))}.")
        return Term(name, value.lower(), negated, start, source)
    if name == "is":
        if value.lower() not in IS_VALUES:
            raise fail(f"is: takes one of {', '.join(sorted(IS_VALUES))}.")
        return Term(name, value.lower(), negated, start, source)
    if name in AUTH_OPERATORS:
        if value.lower() not in AUTH_OPERATORS[name]:
            raise fail(f"{name}: takes one of {', '.join(sorted(AUTH_OPERATORS[name]))}.")
        return Term(name, value.lower(), negated, start, source)
    if name in ("before", "after"):
        when = _instant(value, term=source, position=start)
        return Term(name, value, negated, start, source, when=when)
    if name == "header":
        header, sep, wanted = value.partition("=")
        header = header.strip()
        if not _HEADER_NAME.fullmatch(header):
            raise fail("header: takes Name=value or Name (a header's name).")
        return Term(
            name, header, negated, start, source, header_value=wanted.strip() if sep else None
        )
    return Term(name, value, negated, start, source, phrase=quoted)
