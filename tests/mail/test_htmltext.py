"""Table-driven tests for ``mail.message.htmltext``: HTML to text, whitespace folding and previews."""

from __future__ import annotations

import pytest

from mail.message.htmltext import fold_whitespace, html_to_text, make_preview, parse_html


@pytest.mark.parametrize(
    ("html", "expected"),
    [
        pytest.param("", "", id="empty"),
        pytest.param("plain words", "plain words", id="no-tags"),
        pytest.param(
            "<html><head><title>Subject</title><meta charset='utf-8'>"
            "<style>p { color: red }</style><script>var code = 1;</script></head>"
            "<body><p>Hello</p><p>World</p></body></html>",
            "Hello\n\nWorld",
            id="head-title-style-script-dropped",
        ),
        pytest.param(
            "<body><script type='text/javascript'>document.write('x')</script>"
            "<noscript>Enable JS</noscript><style media='screen'>.a{}</style>Text</body>",
            "Enable JS\nText",
            id="script-style-in-body-dropped",
        ),
        pytest.param(
            "<HTML><HEAD><TITLE>T</TITLE></HEAD><BODY><P>Upper</P><SCRIPT>x()</SCRIPT>"
            "</BODY></HTML>",
            "Upper",
            id="upper-case-tags",
        ),
        pytest.param("<head><title>T</title>", "", id="unclosed-head-and-no-body"),
        pytest.param(
            "<div>one</div><div>two</div>three<br>four<br/>five<BR >six",
            "one\ntwo\nthree\nfour\nfive\nsix",
            id="blocks-and-br-are-line-breaks",
        ),
        pytest.param(
            "<h1>Title</h1>intro<ul><li>first</li><li>second</li></ul>outro",
            "Title\n\nintro\n\nfirst\nsecond\n\noutro",
            id="headings-and-lists",
        ),
        pytest.param(
            "<table><tr><td>Code:</td><td>482913</td></tr>"
            "<tr><th>Name</th><th>Value</th></tr></table>after",
            "Code: 482913\nName Value\n\nafter",
            id="table-cells-separated-by-spaces",
        ),
        pytest.param(
            "<p>Tom &amp; Jerry &lt;b&gt; &quot;q&quot; &#39;s&#39; caf&eacute; &#x20AC;5 "
            "a&nbsp;b &copy; 2024</p>",
            "Tom & Jerry <b> \"q\" 's' café €5 a b © 2024",
            id="entities-decoded-after-tags-removed",
        ),
        pytest.param(
            "<p>  lots   of \n\n  spaces\t\there </p>\n\n\n<p>  next  </p>",
            "lots of spaces here\n\nnext",
            id="whitespace-folded-lines-stripped",
        ),
        pytest.param(
            "<p>a</p><p></p><p> </p><div><div><div>b</div></div></div><br><br><br>c",
            "a\n\nb\nc",
            id="at-most-one-blank-line",
        ),
        pytest.param(
            "<pre>line1\n  line2\n\n\nline3</pre>after",
            "line1\nline2\n\nline3\n\nafter",
            id="pre-keeps-line-breaks",
        ),
        pytest.param(
            "<!-- hidden 123 --><p>shown</p><!--[if mso]>Outlook only<![endif]-->"
            "<!--[if !mso]><!-->not Outlook<!--<![endif]-->",
            "shown\n\nnot Outlook",
            id="comments-and-conditional-comments",
        ),
        pytest.param("<p>visible<!-- unterminated comment", "visible", id="unclosed-comment"),
        pytest.param(
            "<!DOCTYPE html><?xml version='1.0'?><![CDATA[x]]><p>ok</p>",
            "ok",
            id="declarations-dropped",
        ),
        pytest.param(
            "<b>Ver</b>ify <span style='x'>your</span> <em>email</em>",
            "Verify your email",
            id="inline-tags-do-not-split-words",
        ),
        pytest.param(
            "preheader&zwnj;&nbsp;&zwnj;&nbsp;&#847;&#8203; text&shy;book",
            "preheader textbook",
            id="invisible-padding-removed",
        ),
        pytest.param("x < y and y > z, 1<2", "x < y and y > z, 1<2", id="lone-angle-brackets"),
        pytest.param(
            "<a title='a > b' href='https://x.com'>link</a> after",
            "link after",
            id="quoted-greater-than-in-attribute",
        ),
        pytest.param("<p>unclosed <b>bold", "unclosed bold", id="unclosed-tags"),
        pytest.param('<p class="open>rest of the document', "", id="tag-open-until-the-end"),
        pytest.param("a\x00b\x01c\x02d", "abcd", id="control-characters-removed"),
    ],
)
def test_html_to_text(html: str, expected: str) -> None:
    assert html_to_text(html) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("", ""),
        ("   ", ""),
        ("  a  b\tc\n\nd  ", "a b c d"),
        ("a\u00a0\u2003b\u3000c", "a b c"),
        ("zero\u200bwidth\u200c joiner\u00ad", "zerowidth joiner"),
        ("already folded", "already folded"),
        ("carriage\r\nreturn\x1funit", "carriage return unit"),
    ],
)
def test_fold_whitespace(value: str, expected: str) -> None:
    assert fold_whitespace(value) == expected


LONG = "word " * 100  # 500 characters


@pytest.mark.parametrize(
    ("text", "html", "length", "expected"),
    [
        pytest.param("Hello\n\n  world ", "<p>ignored</p>", 200, "Hello world", id="text-folded"),
        pytest.param("", "<p>From</p><p>HTML</p>", 200, "From HTML", id="html-fallback"),
        pytest.param(" \n\t ", "<p>blank text</p>", 200, "blank text", id="blank-text-uses-html"),
        pytest.param(
            "",
            "<head><style>p{}</style><script>x()</script></head><body>Body only</body>",
            200,
            "Body only",
            id="html-fallback-without-script-style",
        ),
        pytest.param(LONG, "", 200, LONG.strip()[:200], id="cut-to-200"),
        pytest.param("  " + LONG, "", 200, ("word " * 40)[:200], id="stripped-before-cut"),
        pytest.param(LONG, "", 12, "word word wo", id="custom-length"),
        pytest.param("", "", 200, "", id="nothing"),
        pytest.param("é" * 300, "", 200, "é" * 200, id="counts-characters"),
    ],
)
def test_make_preview(text: str, html: str, length: int, expected: str) -> None:
    preview = make_preview(text, html, length)
    assert preview == expected
    assert len(preview) <= length


def test_make_preview_default_length_is_200() -> None:
    assert make_preview("x" * 500, "") == "x" * 200
    assert make_preview("", "<p>" + "y " * 300 + "</p>") == ("y " * 100)[:200]


@pytest.mark.parametrize(
    ("html", "anchors"),
    [
        pytest.param(
            "<a href='https://x.com/?a=1&amp;b=2&copy=3'>Go</a>",
            [("https://x.com/?a=1&b=2&copy=3", "Go")],
            id="href-entities-decoded-like-browsers",
        ),
        pytest.param(
            '<A HREF="  https://x.com/  ">Spaced <b>bold</b> text</A>',
            [("https://x.com/", "Spaced bold text")],
            id="href-stripped-text-folded",
        ),
        pytest.param(
            "<a href=https://x.com/logo><img src=logo.png alt='Acme Logo'></a>",
            [("https://x.com/logo", "Acme Logo")],
            id="image-only-anchor-uses-alt",
        ),
        pytest.param(
            "<a name='top'>anchor</a><a href='mailto:a@b.c'>Mail</a><img src='https://t/p.gif'>",
            [("mailto:a@b.c", "Mail")],
            id="no-href-skipped-images-ignored",
        ),
        pytest.param(
            "<a href='https://a.com'>first<a href='https://b.com'>second</a>tail",
            [("https://a.com", "first"), ("https://b.com", "second")],
            id="unclosed-anchor-ends-at-next-anchor",
        ),
        pytest.param(
            "<!-- <a href='https://hidden.com'>x</a> --><a href='https://c.com'><div>Block"
            "</div><div>text</div></a>",
            [("https://c.com", "Block text")],
            id="comments-skipped-block-text-folded",
        ),
    ],
)
def test_parse_html_anchors(html: str, anchors: list[tuple[str, str]]) -> None:
    text, found = parse_html(html)
    assert found == anchors
    assert text == html_to_text(html)


def test_parse_html_and_html_to_text_agree_on_text() -> None:
    html = "<p>Hi <a href='https://x.com'>there</a>,</p><table><tr><td>a</td><td>b</td></tr>"
    assert parse_html(html) == ("Hi there,\n\na b", [("https://x.com", "there")])


@pytest.mark.parametrize(
    "html",
    [
        "<a " * 30_000,
        "<!x" * 30_000,
        "<pre" * 25_000,
        "<head" * 20_000,
        '<a href="' * 10_000,
        "<style>" * 15_000,
        "&#x1" * 25_000,
        "<p>" + "\n" * 100_000,
    ],
)
def test_pathological_markup_is_handled(html: str) -> None:
    # Timed by `make bench`; here: no error and no markup left in the text.
    text, anchors = parse_html(html)
    assert html_to_text(html) == text
    assert "<a " not in text and len(anchors) <= len(html)
