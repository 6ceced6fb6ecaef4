"""The sanitiser behind the dashboard's HTML view, against hostile markup."""

from __future__ import annotations

import pytest

from mail.message.sanitize import BLOCKED_IMAGE, email_document, inline_image_uri, sanitize_html

EVIL = "http://evil.example"


@pytest.mark.parametrize(
    "markup",
    [
        "<script>alert(1)</script>",
        "<SCRIPT SRC=http://evil.example/x.js></SCRIPT>",
        "<img src=x onerror=alert(1)>",
        "<svg onload=alert(1)><circle r=1 /></svg>",
        "<body onload=alert(1)>",
        "<iframe src=http://evil.example></iframe>",
        "<object data=http://evil.example></object>",
        "<embed src=http://evil.example>",
        "<form action=http://evil.example><input name=a><button>go</button></form>",
        "<meta http-equiv=refresh content='0;url=http://evil.example'>",
        "<base href=http://evil.example/>",
        "<link rel=stylesheet href=http://evil.example/s.css>",
        "<style>@import url(http://evil.example/i.css)</style>",
        "<p style='background:url(http://evil.example/leak)'>x</p>",
        "<table background=http://evil.example/bg.png><tr><td>x</td></tr></table>",
        "<video poster=http://evil.example/p.png></video>",
        "<math><mtext><table><mglyph><style><img src=x onerror=alert(1)>",
        "<noscript><p title='</noscript><img src=x onerror=alert(1)>'>",
        "<a href='javascript:alert(1)'>x</a>",
        "<a href=' JaVaScRiPt:alert(1)'>x</a>",
        "<a href='jav&#x09;ascript:alert(1)'>x</a>",
        "<a href='vbscript:msgbox(1)'>x</a>",
        "<a href='data:text/html,<script>alert(1)</script>'>x</a>",
        "<img src='data:image/svg+xml,<svg onload=alert(1)>'>",
        "<img srcset='http://evil.example/a.png 1x'>",
        "<div onclick=alert(1) onmouseover=alert(2)>x</div>",
    ],
)
def test_hostile_markup_is_neutralised(markup: str) -> None:
    out = sanitize_html(markup).html.lower()
    for needle in (
        "<script", "onerror", "onload", "onclick", "onmouseover", "<svg", "<iframe", "<object",
        "<embed", "<form", "<input", "<button", "<meta", "<base", "<link", "<style", "style=",
        "javascript", "vbscript", "data:text", "background=", "srcset", "poster", "evil.example",
        "<video", "@import",
    ):  # fmt: skip
        assert needle not in out, (needle, out)


def test_formatting_and_safe_links_survive() -> None:
    out = sanitize_html(
        '<h1>Hi</h1><p><b>bold</b> <a href="https://ok.example/v?a=1&amp;b=2">verify</a> '
        '<a href="mailto:x@ok.example">mail</a></p><table><tr><td colspan="2">c</td></tr></table>'
    ).html
    assert "<h1>Hi</h1>" in out and "<b>bold</b>" in out
    assert 'href="https://ok.example/v?a=1&amp;b=2"' in out
    assert 'target="_blank"' in out and 'rel="noopener noreferrer"' in out
    assert 'href="mailto:x@ok.example"' in out
    assert 'colspan="2"' in out


def test_remote_images_are_held_back_until_asked_for() -> None:
    markup = '<img src="https://t.example/p.gif" alt="pixel"><img src="http://t.example/q.png">'
    blocked = sanitize_html(markup)
    assert blocked.blocked_images == 2 and "t.example" not in blocked.html
    assert blocked.html.count(BLOCKED_IMAGE.replace("&", "&amp;")) == 2
    assert blocked.remote_images == ["https://t.example/p.gif", "http://t.example/q.png"]
    shown = sanitize_html(markup, remote_images=True)
    assert shown.blocked_images == 0
    assert 'src="https://t.example/p.gif"' in shown.html and 'alt="pixel"' in shown.html
    # Even when shown, only http(s) images: other schemes are dropped.
    odd = sanitize_html(
        '<img src="ftp://t.example/x.png"><img src="file:///etc/passwd">', remote_images=True
    )
    assert "ftp:" not in odd.html and "file:" not in odd.html


def test_cid_images_resolve_to_inline_attachments_only() -> None:
    uri = inline_image_uri(b"\x89PNG\r\n", "image/png")
    assert uri is not None and uri.startswith("data:image/png;base64,")
    out = sanitize_html(
        '<img src="cid:Logo@Mail"><img src="cid:unknown@mail">', inline_images={"<logo@mail>": uri}
    ).html
    assert out.count("<img") == 2 and out.count(uri) == 1
    assert "cid:" not in out
    assert inline_image_uri(b"<svg onload=alert(1)>", "image/svg+xml") is None
    assert inline_image_uri(b"x", "text/html") is None


def test_dimensions_must_be_numbers() -> None:
    out = sanitize_html('<img src="cid:x" width="100" height="expression(alert(1))">').html
    assert "expression" not in out


def test_document_escapes_the_title() -> None:
    doc = email_document("<p>x</p>", title="</title><script>alert(1)</script>")
    assert "<script>" not in doc and "&lt;/title&gt;" in doc
