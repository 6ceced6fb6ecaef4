"""HTML to plain text, whitespace folding and message previews.

Pure standard library, no Django. ``html_to_text`` renders an e-mail HTML body the way a reader
would see it as plain text:

* the contents of ``<script>``, ``<style>``, ``<title>``, ``<template>`` and ``<head>`` and HTML
  comments (including Outlook conditional comments) are dropped;
* block elements (``p``, ``div``, ``tr``, ``li``, headings, ...) and ``<br>`` become line breaks,
  paragraph-like blocks (``p``, headings, ``table``, lists, ``blockquote``, ``pre``, ``hr``) a
  blank line;
* table cells (``td``/``th``) are separated by a space;
* every other tag is removed without a trace (``<b>Ver</b>ify`` stays ``Verify``);
* character references are decoded after the tags are gone (``&lt;b&gt;`` stays the text ``<b>``);
* whitespace runs fold to one space (line breaks inside ``<pre>`` are kept), lines are
  stripped, at most one blank line is kept in a row, and invisible padding characters
  (zero-width space and non-joiner, word joiner, soft hyphen, BOM, combining grapheme joiner)
  are removed.

``parse_html`` returns the same text plus the ``(href, text)`` of every ``<a href>``, from the
same single tokenization (the extraction module needs both).

Only the standard library is used (``re``, ``html.unescape``), but not
``html.parser.HTMLParser``: it runs Python code for every tag, so its tokenizing alone, before
anything is done with the events, overruns extraction's 5 ms budget on a typical newsletter (and
many times over on a tag-dense one). Here a tag costs one match of a precompiled regex and
C-level list operations. Every pattern starts with a literal and cannot backtrack
catastrophically; an unclosed comment, tag, quoted attribute, script or style runs to the end of
the input (as in browsers) instead of being re-scanned, so the work is linear in the input.
"""

from __future__ import annotations

import html as _html
import re
from itertools import repeat

__all__ = ["fold_whitespace", "html_to_text", "make_preview", "parse_html"]


def _ci(word: str) -> str:
    """Case-insensitive pattern for an ASCII word that keeps a literal first character.

    (``re.IGNORECASE`` would disable the literal-prefix fast scan of the regex engine.)
    """
    return "".join(f"[{c.lower()}{c.upper()}]" if c.isalpha() else re.escape(c) for c in word)


_END = r"(?![\w:-])"

_DECL_RE = re.compile(r"<[!?][^>]*(?:>|\Z)")  # bogus comments end at ">" or at the end
_DROP_RES = {
    name: re.compile(rf"<{_ci(name)}{_END}[^>]*(?:>|\Z).*?(?:</{_ci(name)}\s*>|\Z)", re.S)
    for name in ("script", "style", "title", "template")
}
_HEAD_OPEN_RE = re.compile(rf"<{_ci('head')}{_END}[^>]*(?:>|\Z)")
_HEAD_END_RE = re.compile(rf"</{_ci('head')}\s*>|(?=<{_ci('body')}{_END})")
_BLANK_LINES_RE = re.compile(r"\n[ \t]*\n\s*")
_PRE_RE = re.compile(rf"<{_ci('pre')}{_END}[^>]*(?:>|\Z).*?(?:</{_ci('pre')}\s*>|\Z)", re.S)
_CONTROLS = "\x00\x01\x02\x03\x04"
# Tokenizer: split() yields text, tag name (with a leading "/" for end tags), attributes, text...
# As in the HTML tokenizer, a quote only opens an attribute value right after "=", so
# <a title="a > b"> is one tag; a tag, quoted value or declaration left open swallows the rest
# of the input, as in browsers. Possessive loops whose branches start differently keep every
# scan linear.
_TAG_SPLIT_RE = re.compile(
    r"<(/?[A-Za-z][^\s/>]*)"
    r"((?:[^>\"'=]+|=\s*\"[^\"]*(?:\"|\Z)|=\s*'[^']*(?:'|\Z)|=|[\"'])*+)"
    r"(?:>|\Z)"
)

# Block tags are replaced by markers (line break, paragraph break) resolved after folding.
_LINE, _PARA, _CELL = "\x01", "\x02", " "
_BLOCK_TAGS: dict[str, str] = {}


def _blocks(names: str, marker: str) -> None:
    for name in names.split():
        _BLOCK_TAGS[name] = _BLOCK_TAGS["/" + name] = marker


_blocks("p h1 h2 h3 h4 h5 h6 table ul ol dl blockquote pre hr center", _PARA)
_blocks(
    "div br tr li dt dd address article aside section header footer nav main figure figcaption"
    " form fieldset legend caption details summary body html tbody thead tfoot option select"
    " textarea button noscript",
    _LINE,
)
_blocks("td th", _CELL)

_INVISIBLE = "\u00ad\u034f\u200b\u200c\u2060\ufeff"
_SPACES_RE = re.compile(r"  +")
_PARA_RUN_RE = re.compile("\x02[\x01\x02]+")
# Starts only at the beginning of a run of line markers: "\x01+\x02" alone would rescan a long
# run from each of its positions (quadratic in 200,000 <div>s).
_LINE_PARA_RE = re.compile("(?<!\x01)\x01+\x02")
_LINES_RE = re.compile("\x01\x01+")

_HREF_RE = re.compile(
    r"""(?<![\w-])[hH][rR][eE][fF]\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'=<>`]+))"""
)
_ALT_RE = re.compile(r"""(?<![\w-])[aA][lL][tT]\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'=<>`]+))""")
# In attribute values only references ending in ";" and numeric ones are decoded, like browsers
# do, so a query such as "?a=1&copy=2" keeps its "&copy".
_ATTR_REF_RE = re.compile(r"&(?:#[0-9]{1,8};?|#[xX][0-9a-fA-F]{1,8};?|[A-Za-z][A-Za-z0-9]{1,31};)")


def fold_whitespace(s: str) -> str:
    """Fold every run of whitespace to one space (invisible padding characters are removed)."""
    if not s:
        return ""
    return _fold(s).strip()


def _unescape_attr(value: str) -> str:
    if "&" not in value:
        return value
    if value.count("&") == value.count("&amp;"):
        return value.replace("&amp;", "&")
    return _ATTR_REF_RE.sub(lambda m: _html.unescape(m.group(0)), value)


def _attr(pattern: re.Pattern[str], attrs: str) -> str | None:
    m = pattern.search(attrs)
    if m is None:
        return None
    raw = m.group(1) if m.group(1) is not None else m.group(2) or m.group(3) or ""
    return _unescape_attr(raw)


def _drop_comments(markup: str) -> str:
    """Remove ``<!-- ... -->``; an unclosed comment runs to the end of the input."""
    out: list[str] = []
    pos = 0
    while (i := markup.find("<!--", pos)) >= 0:
        out.append(markup[pos:i])
        j = markup.find("-->", i + 4)
        pos = len(markup) if j < 0 else j + 3
    out.append(markup[pos:])
    return "".join(out)


def _drop_elements(markup: str, lower: str, name: str) -> str:
    """Remove every ``<name ...> ... </name>`` element (found in ``lower``, which is
    ``markup.lower()`` of the same length); an unclosed one runs to the end of the input."""
    opening, closing = "<" + name, "</" + name
    out: list[str] = []
    pos = 0
    size = len(markup)
    while (i := lower.find(opening, pos)) >= 0:
        after = i + len(opening)
        if after < size and (lower[after].isalnum() or lower[after] in "_:-"):
            out.append(markup[pos:after])  # a longer tag name such as <styles>
            pos = after
            continue
        out.append(markup[pos:i])
        end = size
        k = lower.find(">", after)
        while k >= 0 and (k := lower.find(closing, k)) >= 0:
            tail = k + len(closing)
            if tail < size and (lower[tail].isalnum() or lower[tail] in "_:-"):
                k = tail
                continue
            gt = lower.find(">", tail)
            end = size if gt < 0 else gt + 1
            break
        pos = end
    out.append(markup[pos:])
    return "".join(out)


def _clean(markup: str) -> str:
    """Drop comments, declarations, script/style/title/template and the head element."""
    if "\r" in markup:
        markup = markup.replace("\r\n", "\n").replace("\r", "\n")
    if "<!--" in markup:
        markup = _drop_comments(markup)
    if "<!" in markup or "<?" in markup:
        markup = _DECL_RE.sub("", markup)
    lower = markup.lower()
    same_length = len(lower) == len(markup)
    for name, pattern in _DROP_RES.items():
        if "<" + name in lower:
            if same_length:
                markup = _drop_elements(markup, lower, name)
                lower = markup.lower()
            else:  # lower() changed some lengths (e.g. U+0130): use the slower regex
                markup = pattern.sub("", markup)
    if "<head" in lower:
        head = _HEAD_OPEN_RE.search(markup)
        if head is not None:
            end = _HEAD_END_RE.search(markup, head.end())
            if end is not None:
                markup = f"{markup[: head.start()]} {markup[end.end() :]}"
    return markup


def _keep_pre_newlines(m: re.Match[str]) -> str:
    return _BLANK_LINES_RE.sub("<p>", m.group(0)).replace("\n", "<br>")


def _fold(text: str) -> str:
    """Fold whitespace runs to one space without a full regex scan when possible."""
    if text.isascii():
        for ch in "\n\t\r\f\v\x1c\x1d\x1e\x1f":
            if ch in text:
                text = text.replace(ch, " ")
        return _SPACES_RE.sub(" ", text) if "  " in text else text
    for ch in _INVISIBLE:
        if ch in text:
            text = text.replace(ch, "")
    return " ".join(text.split())  # every Unicode space, e.g. U+00A0 from &nbsp;


def _finish(text: str) -> str:
    """Decode references, fold whitespace and turn line/paragraph markers into newlines."""
    if "&" in text:
        text = _html.unescape(text)
    text = _fold(text)
    if "\x01" in text or "\x02" in text:
        text = text.replace(" \x01", "\x01").replace("\x01 ", "\x01")
        text = text.replace(" \x02", "\x02").replace("\x02 ", "\x02")
        text = _PARA_RUN_RE.sub("\x02", text)
        text = _LINE_PARA_RE.sub("\x02", text)
        text = _LINES_RE.sub("\x01", text)
        text = text.replace("\x01", "\n").replace("\x02", "\n\n")
    return text.strip()


def _inline_text(fragment: str) -> str:
    """One-line text of a rendered fragment (markers and whitespace folded to single spaces)."""
    if "&" in fragment:
        fragment = _html.unescape(fragment)
    if "\x01" in fragment:
        fragment = fragment.replace("\x01", " ")
    if "\x02" in fragment:
        fragment = fragment.replace("\x02", " ")
    return fold_whitespace(fragment)


def _strip_controls(text: str) -> str:
    """Remove the characters used as internal markers (and NUL) from the input."""
    for ch in _CONTROLS:
        if ch in text:
            text = text.replace(ch, "")
    return text


def _render(cleaned: str, with_anchors: bool) -> tuple[str, list[tuple[str, str]]]:
    cleaned = _strip_controls(cleaned)
    if "<" not in cleaned:
        return _finish(cleaned), []
    if _PRE_RE.search(cleaned) is not None:
        cleaned = _PRE_RE.sub(_keep_pre_newlines, cleaned)
    parts = _TAG_SPLIT_RE.split(cleaned)
    names = list(map(str.lower, parts[1::3]))
    attrs = parts[2::3]
    parts[1::3] = map(_BLOCK_TAGS.get, names, repeat(""))
    parts[2::3] = repeat("", len(attrs))
    anchors: list[tuple[str, str]] = []
    if with_anchors and "a" in names:
        anchors = _collect_anchors(parts, names, attrs)
    return _finish("".join(parts)), anchors


def _collect_anchors(parts: list[str], names: list[str], attrs: list[str]) -> list[tuple[str, str]]:
    """(href, text) of every ``<a href>``; an ``<a>`` left open ends at the next ``<a>``."""
    anchors: list[tuple[str, str]] = []
    count = len(names)
    opens: list[int] = []
    i = -1
    try:
        while True:
            i = names.index("a", i + 1)
            opens.append(i)
    except ValueError:
        pass
    for k, i in enumerate(opens):
        href = _attr(_HREF_RE, attrs[i])
        if href is None:
            continue
        stop = opens[k + 1] if k + 1 < len(opens) else count
        try:
            end = names.index("/a", i + 1, stop)
        except ValueError:
            end = stop
        text = _inline_text("".join(parts[3 * i + 3 : 3 * end + 1]))
        if not text:
            alts = (_attr(_ALT_RE, attrs[j]) for j in range(i + 1, end) if names[j] == "img")
            text = fold_whitespace(" ".join(a for a in alts if a))
        anchors.append((href.strip(), text))
    return anchors


def parse_html(markup: str) -> tuple[str, list[tuple[str, str]]]:
    """Render ``markup`` to text and list its anchors as ``(href, anchor text)``, in one pass.

    Hrefs are entity-decoded and stripped but otherwise as written (any scheme); anchors without
    an href are skipped. An image-only anchor's text is its images' ``alt`` text.
    """
    if not markup:
        return "", []
    return _render(_clean(markup), with_anchors=True)


def html_to_text(markup: str) -> str:
    """Render an HTML body as plain text (see the module docstring for the rules)."""
    if not markup:
        return ""
    return _render(_clean(markup), with_anchors=False)[0]


def make_preview(text: str, html: str, length: int = 200) -> str:
    """The text body (or, when it is empty or blank, the HTML rendered to text), whitespace
    folded to single spaces, stripped, then cut to its first ``length`` characters."""
    source = text if text and text.strip() else html_to_text(html)
    return fold_whitespace(source)[: max(length, 0)]
