"""Untrusted e-mail HTML made safe to display in the dashboard.

The HTML of a received message is hostile by default. :func:`sanitize_html` keeps formatting
only (an allow-list of tags and attributes, via nh3/ammonia) and drops everything that can run
code, submit data or fetch anything behind the reader's back:

- script, style, iframe, object, embed, form, input, button, meta, link, base … are dropped
  (script, style, title, template, noscript, textarea and select together with their content);
- every ``on*`` attribute, every ``style`` attribute and every ``<style>`` element (no CSS at all:
  that defeats ``url(...)``/``@import`` exfiltration and layout tricks);
- link targets other than http(s) and mailto (``javascript:``, ``data:``, ``vbscript:`` …);
  links open in a new tab with ``rel="noopener noreferrer"``;
- remote images (``http(s)://``) become a local placeholder until the reader asks for them,
  and then only http(s) images are allowed; ``cid:`` images resolve to the message's own
  inline attachments as ``data:`` URIs (the sandboxed frame has no session cookie to fetch
  them with); any other image source is dropped.

:func:`email_document` wraps the result in a complete document (with the caller's default
stylesheet); the view serves it with its own strict Content-Security-Policy inside an ``<iframe>``
sandboxed with :data:`FRAME_SANDBOX` (docs/security.md, "The HTML frame").
"""

from __future__ import annotations

import base64
import html as html_lib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import quote

import nh3

ALLOWED_TAGS = frozenset(
    {
        "a", "abbr", "acronym", "address", "article", "aside", "b", "bdi", "bdo", "big",
        "blockquote", "br", "caption", "center", "cite", "code", "col", "colgroup", "dd", "del",
        "details", "dfn", "div", "dl", "dt", "em", "figcaption", "figure", "font", "footer",
        "h1", "h2", "h3", "h4", "h5", "h6", "header", "hgroup", "hr", "i", "img", "ins", "kbd",
        "li", "main", "mark", "ol", "p", "pre", "q", "rp", "rt", "ruby", "s", "samp", "section",
        "small", "span", "strike", "strong", "sub", "summary", "sup", "table", "tbody", "td",
        "tfoot", "th", "thead", "time", "tr", "tt", "u", "ul", "var", "wbr",
    }
)  # fmt: skip
# Dropped together with everything inside them (the rest of the forbidden tags keep their text).
DROPPED_WITH_CONTENT = frozenset(
    {"script", "style", "title", "template", "noscript", "textarea", "select", "head"}
)
GENERIC_ATTRIBUTES = frozenset({"title", "lang", "dir", "align", "valign"})
TAG_ATTRIBUTES: dict[str, set[str]] = {
    "a": {"href", "name"},
    "img": {"src", "alt", "width", "height"},
    "table": {"width", "border", "cellpadding", "cellspacing", "summary"},
    "td": {"colspan", "rowspan", "width", "height", "headers", "nowrap"},
    "th": {"colspan", "rowspan", "width", "height", "headers", "scope", "abbr"},
    "col": {"span", "width"},
    "colgroup": {"span", "width"},
    "ol": {"start", "type", "reversed"},
    "li": {"value"},
    "font": {"color", "face", "size"},
    "time": {"datetime"},
    "blockquote": {"cite"},
    "q": {"cite"},
    "del": {"cite", "datetime"},
    "ins": {"cite", "datetime"},
}
LINK_SCHEMES = ("http://", "https://", "mailto:")
REMOTE_IMAGE_SCHEMES = ("http://", "https://")
INLINE_IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
MAX_INLINE_IMAGE_BYTES = 5 * 1024 * 1024
_NUMBER = re.compile(r"^\s*\d{1,5}%?\s*$")
_CITE_ATTRIBUTES = frozenset({"cite"})
_PLACEHOLDER_SVG = (
    '<svg xmlns="http://www.w3.org/2000/svg" width="120" height="40" viewBox="0 0 120 40">'
    '<rect width="120" height="40" fill="#e2e8f0"/>'
    '<text x="60" y="24" font-family="sans-serif" font-size="10" fill="#475569" '
    'text-anchor="middle">remote image</text></svg>'
)
BLOCKED_IMAGE = "data:image/svg+xml," + quote(_PLACEHOLDER_SVG)
# The sandbox of the frame that shows a body (attribute and CSP directive): no scripts, an
# opaque origin, links may open a new tab. The hidden copy the page measures the height on keeps
# its origin so that it can be read, and fetches nothing (docs/security.md, "The HTML frame").
FRAME_SANDBOX = "allow-popups allow-popups-to-escape-sandbox"
MEASURE_SANDBOX = "allow-same-origin"


@dataclass
class SafeHtml:
    """Sanitised HTML and what was held back from it."""

    html: str
    blocked_images: int = 0
    remote_images: list[str] = field(default_factory=list)


def inline_image_uri(content: bytes, content_type: str) -> str | None:
    """A ``data:`` URI for an inline raster image attachment (never SVG), else None."""
    kind = (content_type or "").split(";", 1)[0].strip().lower()
    if kind not in INLINE_IMAGE_TYPES or len(content) > MAX_INLINE_IMAGE_BYTES:
        return None
    return f"data:{kind};base64,{base64.b64encode(content).decode('ascii')}"


def normalize_content_id(value: str) -> str:
    """``<abc@x>`` / ``cid:abc@x`` → ``abc@x`` (how messages and headers spell Content-IDs)."""
    value = value.strip()
    if value.lower().startswith("cid:"):
        value = value[4:]
    return value.strip().strip("<>").strip().lower()


def sanitize_html(
    html: str, *, remote_images: bool = False, inline_images: Mapping[str, str] | None = None
) -> SafeHtml:
    """The allow-listed subset of ``html``; see the module docstring for the policy."""
    inline = {normalize_content_id(k): v for k, v in (inline_images or {}).items()}
    result = SafeHtml(html="")

    def attribute_filter(element: str, attribute: str, value: str) -> str | None:
        name = attribute.lower()
        if name.startswith("on") or name == "style":
            return None  # never allowed by the lists either; belt and braces
        if element == "a" and name == "href":
            url = value.strip()
            return url if url.lower().startswith(LINK_SCHEMES) else None
        if element == "img" and name == "src":
            url = value.strip()
            lowered = url.lower()
            if lowered.startswith(REMOTE_IMAGE_SCHEMES):
                result.remote_images.append(url)
                if remote_images:
                    return url
                result.blocked_images += 1
                return BLOCKED_IMAGE
            if lowered.startswith("cid:"):
                return inline.get(normalize_content_id(url))
            return None
        if name in _CITE_ATTRIBUTES:
            return value if value.strip().lower().startswith(("http://", "https://")) else None
        if name in {"width", "height"}:
            return value if _NUMBER.match(value) else None
        return value

    result.html = nh3.clean(
        html,
        tags=set(ALLOWED_TAGS),
        clean_content_tags=set(DROPPED_WITH_CONTENT),
        attributes={"*": set(GENERIC_ATTRIBUTES), **TAG_ATTRIBUTES},
        attribute_filter=attribute_filter,
        strip_comments=True,
        link_rel="noopener noreferrer",
        set_tag_attribute_values={"a": {"target": "_blank"}},
        url_schemes={"http", "https", "mailto", "cid"},
    )
    return result


def email_document(body: str, *, title: str = "", stylesheet: str = "") -> str:
    """A complete HTML document around already sanitised ``body``; ``stylesheet``, a URL of the
    caller's, is linked first in the head: readable defaults the mail's own styling overrides."""
    link = f'<link rel="stylesheet" href="{html_lib.escape(stylesheet)}">' if stylesheet else ""
    return (
        '<!doctype html>\n<html><head><meta charset="utf-8">'
        f'<meta name="referrer" content="no-referrer">{link}'
        f"<title>{html_lib.escape(title)}</title></head>\n<body>{body}</body></html>\n"
    )
