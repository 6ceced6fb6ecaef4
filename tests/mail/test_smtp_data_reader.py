"""The smtpd's DATA reader (``mail.smtpd.server.DataReader``) against RFC 5321's definition, whatever
the blocks the bytes arrive in."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from mail.smtpd.server import DATA_BLOCK, DataReader
from tests.sizes import examples


def _reference(stream: bytes) -> tuple[bytes, bytes] | None:
    """(content, what follows) by RFC 5321 4.1.1.4 and 4.5.2: the data ends at the first line
    that is a lone ".", lines are CRLF-delimited, one leading dot of each line is removed."""
    if stream.startswith(b".\r\n"):
        return b"", stream[3:]
    end = stream.find(b"\r\n.\r\n")
    if end < 0:
        return None
    lines = stream[: end + 2].split(b"\r\n")
    content = b"\r\n".join(line[1:] if line[:1] == b"." else line for line in lines)
    return content, stream[end + 5 :]


def _read(
    stream: bytes, cuts: list[int], size_limit: int | None = None
) -> tuple[DataReader, bytes | None]:
    reader, pos, rest = DataReader(size_limit, 65_536), 0, None
    for cut in [*sorted(cuts), len(stream)]:
        if rest is not None:
            break
        rest = reader.feed(stream[pos:cut])
        pos = max(pos, cut)
    if rest is not None:
        rest += stream[pos:]
    return reader, rest


@settings(max_examples=examples(2000), deadline=None)
@given(
    stream=st.lists(st.sampled_from([b".", b"\r", b"\n", b"a", b"\x00", b"\r\n"]), max_size=40).map(
        b"".join
    ),
    cuts=st.lists(st.integers(0, 60), max_size=8),
)
def test_matches_rfc_5321_in_any_blocks(stream: bytes, cuts: list[int]) -> None:
    reader, rest = _read(stream, cuts)
    expected = _reference(stream)
    if expected is None:
        assert rest is None
    else:
        assert (reader.content, rest) == expected


def test_smuggled_ends_are_content() -> None:
    for end in (b"\n.\n", b"\r.\r", b"\n.\r\n", b"\r\n.\n", b"\r\n.\x00\r\n", b"\r\n..\r\n"):
        stream = b"one" + end + b"two\r\n.\r\nNEXT"
        reader, rest = _read(stream, [])
        assert rest == b"NEXT"
        assert reader.content.startswith(b"one") and reader.content.endswith(b"two\r\n")


def test_long_lines_end_where_they_end() -> None:
    line = b"." + b"x" * 60_000  # under the 64 KB line limit: kept, in any blocks
    reader, rest = _read(line + b"\r\n.\r\nNEXT", list(range(0, len(line), 1000)))
    assert rest == b"NEXT" and not reader.too_long
    assert reader.content == line[1:] + b"\r\n"
    # longer than a block: taken in pieces (refused as too long), the end of data still found
    line = b"." + b"x" * (3 * DATA_BLOCK) + b"\r"
    reader, rest = _read(line + b"\n.\r\nNEXT", list(range(0, len(line), 1000)))
    assert rest == b"NEXT" and reader.too_long and reader.parts == []
    assert len(reader.pending) == 0


def test_nothing_is_kept_past_the_limits() -> None:
    reader, rest = _read(b"y" * 100 + b"\r\n" + b"z" * (4 * DATA_BLOCK) + b"\r\n.\r\n", [], 50)
    assert rest == b"" and reader.too_much and reader.parts == []
    long_line = b"w" * (65_536 + 10 * DATA_BLOCK)
    reader, rest = _read(long_line + b"\r\n.\r\n", list(range(0, len(long_line), DATA_BLOCK)))
    assert rest == b"" and reader.too_long and reader.parts == []


@settings(max_examples=examples(2000), deadline=None)
@given(
    stream=st.lists(
        st.sampled_from([b".", b"\r", b"\n", b"a", b"bb", b"\r\n", b"\r\n."]), max_size=40
    ).map(b"".join),
    cuts=st.lists(st.integers(0, 60), max_size=8),
    line_limit=st.integers(1, 12),
    size_limit=st.one_of(st.none(), st.integers(1, 30)),
)
def test_the_limits_hold_in_any_blocks(
    stream: bytes, cuts: list[int], line_limit: int, size_limit: int | None
) -> None:
    """Too long: a line of the content, its CRLF included, over ``line_limit``; too much: the
    content over ``size_limit``. Either way nothing is kept, and the end is still found."""
    stream += b"\r\n.\r\nNEXT"
    expected, after = _reference(stream)  # type: ignore[misc]
    reader, pos, rest = DataReader(size_limit, line_limit), 0, None
    for cut in [*sorted(cuts), len(stream)]:
        if rest is None:
            rest = reader.feed(stream[pos:cut])
            pos = max(pos, cut)
    assert rest is not None and rest + stream[pos:] == after
    lines = expected.split(b"\r\n")[:-1]
    assert reader.too_long == any(len(line) + 2 > line_limit for line in lines)
    assert reader.too_much == (size_limit is not None and len(expected) > size_limit)
    kept = not (reader.too_long or reader.too_much)
    assert reader.content == (expected if kept else b"")
