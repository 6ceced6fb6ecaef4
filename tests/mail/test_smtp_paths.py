"""The receiver's fast path for MAIL/RCPT addresses answers exactly what aiosmtpd's parser does."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from aiosmtpd.smtp import SMTP
from hypothesis import given, settings
from hypothesis import strategies as st

from mail.smtpd.server import Handler, PigeonholeSMTP, make_protocol
from mail.smtpd.writer import ThreadWriter
from tests.sizes import examples

HAND_MADE = [
    "<user@example.com>",
    "<user@example.com> SIZE=4096",
    "<user@example.com> SIZE=4096 BODY=8BITMIME",
    "<first.last+tag@sub.example.co.uk>",
    "<o'brien@example.com>",
    "<a.b.c@x-y.example>",
    "<a..b@example.com>",
    "<.a@example.com>",
    "<a.@example.com>",
    '<"quoted local"@example.com>',
    "<@route.example:user@example.com>",
    "<user@[127.0.0.1]>",
    "<user@example.com>SIZE=1",
    " <user@example.com>",
    "user@example.com",
    "<>",
    "<user>",
    "<user@example.com",
    "<us(comment)er@example.com>",
    "<" + "x" * 64 + "@example.com>",
    "<" + "x" * 65 + "@example.com>",
    "<user@exa_mple.com>",
    "<üser@example.com>",
    "<user@example.com>\tSIZE=5",
]


def outcome(parse: Callable[[str], object], arg: str) -> object:
    """What ``parse`` answers, or the type of what it raises (the stdlib parser raises
    AttributeError on ``<@>``: aiosmtpd then answers 500, ours must do the same)."""
    try:
        return parse(arg)
    except Exception as exc:
        return type(exc)


def both(args: list[str]) -> list[tuple[object, object]]:
    async def run() -> list[tuple[object, object]]:
        ours = make_protocol(Handler(ThreadWriter()))
        theirs = SMTP(Handler(ThreadWriter()), enable_SMTPUTF8=True, decode_data=False)
        return [(outcome(ours._getaddr, arg), outcome(theirs._getaddr, arg)) for arg in args]

    return asyncio.run(run())


def test_hand_made_paths_parse_as_aiosmtpd_parses_them() -> None:
    results = both(HAND_MADE)
    mismatches = [(arg, o, t) for arg, (o, t) in zip(HAND_MADE, results, strict=True) if o != t]
    assert mismatches == []
    # The fast path does take the common form (else this test would compare the parser with
    # itself).
    assert results[1][0] == ("user@example.com", "SIZE=4096")
    assert PigeonholeSMTP._getaddr is not SMTP._getaddr


ATEXT = "abcXYZ019!#$%&'*+/=?^_`{|}~-"
PIECES = st.sampled_from([*ATEXT, ".", "@", "<", ">", " ", '"', "(", ")", "[", "]", ":", "é"])


@settings(max_examples=examples(2_000), deadline=None)
@given(
    local=st.text(PIECES, min_size=0, max_size=12),
    domain=st.text(PIECES, min_size=0, max_size=12),
    rest=st.sampled_from(["", " SIZE=10", "SIZE=10", "\tBODY=7BIT", " x", "  (c) x", " ", "\r\n"]),
)
def test_generated_paths_parse_as_aiosmtpd_parses_them(local: str, domain: str, rest: str) -> None:
    arg = f"<{local}@{domain}>{rest}"
    [(ours, theirs)] = both([arg])
    assert ours == (theirs if isinstance(theirs, tuple) else (None, None)), arg


def test_a_path_the_parser_cannot_take_is_a_malformed_address() -> None:
    """``<@`` and ``<"`` make the stdlib parser raise IndexError; aiosmtpd would answer 500 with
    the exception's text and log a traceback. Ours: a malformed address (553)."""
    results = both(["<@", '<"'])
    assert results == [((None, None), IndexError)] * 2


def test_sessions_after_the_first_are_set_up_like_aiosmtpd_sets_them_up() -> None:
    """Every session after the first comes from the first one's state (no ``getmembers`` per
    connection): same attributes as a full set-up, its command and AUTH methods bound to
    itself, and its own stream."""

    async def run() -> None:
        handler = Handler(ThreadWriter())
        first, second, third = (make_protocol(handler) for _ in range(3))
        assert handler.protocol_state.state is not None
        assert set(second.__dict__) == set(first.__dict__) == set(third.__dict__)
        for session in (second, third):
            assert session._smtp_methods.keys() == first._smtp_methods.keys()
            assert {m.__self__ for m in session._smtp_methods.values()} == {session}
            assert session._auth_methods.keys() == first._auth_methods.keys()
            builtin = [a.method for a in session._auth_methods.values() if a.is_builtin]
            assert builtin and {m.__self__ for m in builtin} == {session}
            assert session._stream_reader is not first._stream_reader
            assert session._closed is not first._closed
            assert session.session is None and session.envelope is None
        assert second._stream_reader is not third._stream_reader

    asyncio.run(run())
