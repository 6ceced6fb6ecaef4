"""TLS of the SMTP front door over real connections: STARTTLS and implicit TLS with a configured
certificate (made here) and with embedded mode's self-signed one; old protocol versions refused;
a broken handshake costs only its own connection; no STARTTLS without a certificate; several
smtpd processes sharing a port all serve TLS."""

from __future__ import annotations

import asyncio
import hashlib
import smtplib
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.test import override_settings

from apikeys.models import Workspace
from inboxes import services as inbox_services
from inboxes.models import Inbox
from mail.management.commands import smtpd as smtpd_command
from mail.models import Email
from mail.smtpd import tls
from mail.smtpd.server import start_servers
from tests.live import ROOT, Process, child_env, free_port
from tests.mail.messages import message


class TlsSmtpServer:
    """Our SMTP front door with a TLS context: STARTTLS on ``port``, implicit TLS on
    ``smtps_port``, served by an event loop in a background thread."""

    def __init__(self, context: ssl.SSLContext | None, smtps: bool = True) -> None:
        self.loop = asyncio.new_event_loop()
        self.context, self.smtps = context, smtps
        ready = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(ready,), daemon=True)
        self.thread.start()
        assert ready.wait(10), "SMTP server did not start"

    def _run(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)
        self.servers = self.loop.run_until_complete(
            start_servers("127.0.0.1", 0, tls=self.context, smtps_port=0 if self.smtps else None)
        )
        self.port = self.servers[0].sockets[0].getsockname()[1]
        self.smtps_port = self.servers[1].sockets[0].getsockname()[1] if self.smtps else None
        ready.set()
        self.loop.run_forever()

    def stop(self) -> None:
        async def close() -> None:
            for server in self.servers:
                server.close()
            for server in self.servers:
                await server.wait_closed()

        asyncio.run_coroutine_threadsafe(close(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


def make_certificate(directory: Path) -> tuple[Path, Path]:
    """A certificate for localhost, as an operator would configure (here self-signed)."""
    return tls.self_signed(directory, "localhost")


def trusting(cert: Path) -> ssl.SSLContext:
    """A client context that trusts ``cert`` only and checks the host name."""
    context = ssl.create_default_context(cafile=str(cert))
    context.check_hostname = True
    return context


@pytest.fixture
def certificate(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    cert, key = make_certificate(tmp_path / "configured")
    with override_settings(SMTP_TLS_CERT=str(cert), SMTP_TLS_KEY=str(key)):
        yield cert, key


@pytest.fixture
def tls_server(transactional_db: None, certificate: tuple[Path, Path]) -> Iterator[TlsSmtpServer]:
    context = tls.configured_context()
    assert context is not None
    server = TlsSmtpServer(context)
    yield server
    server.stop()
    from django.db import connections

    connections.close_all()


@pytest.fixture
def inbox(workspace: Workspace) -> Inbox:
    return inbox_services.inbox_create(workspace=workspace, local_part="secure")


def _subjects(inbox: Inbox) -> list[str]:
    return sorted(Email.objects.filter(inbox=inbox).values_list("subject", flat=True))


def _fingerprint_of(sock: ssl.SSLSocket) -> str:
    der = sock.getpeercert(binary_form=True)
    assert der is not None
    return ":".join(f"{b:02X}" for b in hashlib.sha256(der).digest())


def test_starttls_with_the_configured_certificate(
    tls_server: TlsSmtpServer, certificate: tuple[Path, Path], inbox: Inbox
) -> None:
    cert, _ = certificate
    with smtplib.SMTP("localhost", tls_server.port, timeout=30) as smtp:
        smtp.ehlo()
        assert smtp.has_extn("starttls")
        code, _ = smtp.starttls(context=trusting(cert))
        assert code == 220
        assert isinstance(smtp.sock, ssl.SSLSocket)
        assert smtp.sock.version() in ("TLSv1.2", "TLSv1.3")
        assert _fingerprint_of(smtp.sock) == tls.fingerprint(cert)
        smtp.ehlo()
        assert not smtp.has_extn("starttls")  # not offered twice
        smtp.sendmail("a@example.org", [inbox.address], message(to=inbox.address, subject="st"))
    assert _subjects(inbox) == ["st"]


def test_implicit_tls_with_the_configured_certificate(
    tls_server: TlsSmtpServer, certificate: tuple[Path, Path], inbox: Inbox
) -> None:
    cert, _ = certificate
    assert tls_server.smtps_port is not None
    with smtplib.SMTP_SSL(
        "localhost", tls_server.smtps_port, timeout=30, context=trusting(cert)
    ) as smtp:
        smtp.ehlo()
        assert not smtp.has_extn("starttls")  # the port is TLS already
        assert _fingerprint_of(smtp.sock) == tls.fingerprint(cert)
        smtp.sendmail("a@example.org", [inbox.address], message(to=inbox.address, subject="im"))
    assert _subjects(inbox) == ["im"]


@pytest.mark.parametrize("version", [ssl.TLSVersion.TLSv1, ssl.TLSVersion.TLSv1_1])
def test_old_protocol_versions_are_refused(
    tls_server: TlsSmtpServer, certificate: tuple[Path, Path], version: ssl.TLSVersion
) -> None:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    try:
        context.minimum_version = context.maximum_version = version
        context.set_ciphers("ALL:@SECLEVEL=0")
    except (ValueError, ssl.SSLError) as error:
        pytest.fail(f"this OpenSSL cannot offer {version.name} to check the refusal: {error}")
    with (
        socket.create_connection(("127.0.0.1", tls_server.smtps_port), timeout=10) as raw,
        pytest.raises((ssl.SSLError, ConnectionResetError)),
    ):
        context.wrap_socket(raw, server_hostname="localhost")


def test_tls_1_2_gets_only_forward_secret_aead_ciphers(
    tls_server: TlsSmtpServer, certificate: tuple[Path, Path]
) -> None:
    cert, _ = certificate
    context = trusting(cert)
    context.maximum_version = ssl.TLSVersion.TLSv1_2
    with smtplib.SMTP_SSL("localhost", tls_server.smtps_port, timeout=30, context=context) as smtp:
        name, version, _ = smtp.sock.cipher()
        assert version == "TLSv1.2"
        assert name.startswith(("ECDHE-", "DHE-")) and ("GCM" in name or "CHACHA20" in name)
    weak = trusting(cert)
    weak.maximum_version = ssl.TLSVersion.TLSv1_2
    weak.set_ciphers("AES128-SHA:AES256-SHA:AES128-SHA256")  # no forward secrecy, CBC
    with pytest.raises((ssl.SSLError, ConnectionResetError)):
        smtplib.SMTP_SSL("localhost", tls_server.smtps_port, timeout=30, context=weak)


def _reply(stream: Any) -> bytes:
    """One SMTP reply, all its lines."""
    lines = b""
    while True:
        line = stream.readline()
        lines += line
        if len(line) < 4 or line[3:4] != b"-":
            return lines


def test_a_broken_handshake_costs_only_that_connection(
    tls_server: TlsSmtpServer, certificate: tuple[Path, Path], inbox: Inbox
) -> None:
    cert, _ = certificate
    # An open session over STARTTLS, before and after the broken one.
    with smtplib.SMTP("localhost", tls_server.port, timeout=30) as before:
        before.starttls(context=trusting(cert))
        before.ehlo()
        with socket.create_connection(("127.0.0.1", tls_server.port), timeout=10) as bad:
            replies = bad.makefile("rb")
            assert _reply(replies).startswith(b"220")  # greeting
            bad.sendall(b"EHLO bad.example\r\n")
            assert b"STARTTLS" in _reply(replies)
            bad.sendall(b"STARTTLS\r\n")
            assert _reply(replies).startswith(b"220")
            bad.sendall(b"this is not a TLS ClientHello\r\n" * 4)
            bad.settimeout(10)
            rest = b""
            while chunk := bad.recv(4096):  # the server closes it
                rest += chunk
        with socket.create_connection(("127.0.0.1", tls_server.smtps_port), timeout=10) as bad:
            bad.sendall(b"\x16\x03\x01\x00\x05garbage-handshake")
            bad.settimeout(10)
            while bad.recv(4096):
                pass
        before.sendmail("a@example.org", [inbox.address], message(to=inbox.address, subject="a"))
    with smtplib.SMTP("localhost", tls_server.port, timeout=30) as after:
        after.starttls(context=trusting(cert))
        after.sendmail("a@example.org", [inbox.address], message(to=inbox.address, subject="b"))
    with smtplib.SMTP_SSL(
        "localhost", tls_server.smtps_port, timeout=30, context=trusting(cert)
    ) as after:
        after.sendmail("a@example.org", [inbox.address], message(to=inbox.address, subject="c"))
    assert _subjects(inbox) == ["a", "b", "c"]


def test_no_starttls_without_a_certificate(transactional_db: None, inbox: Inbox) -> None:
    with override_settings(SMTP_TLS_CERT="", SMTP_TLS_KEY=""):
        assert tls.configured_context() is None
    server = TlsSmtpServer(None, smtps=False)
    try:
        with smtplib.SMTP("127.0.0.1", server.port, timeout=30) as smtp:
            smtp.ehlo()
            assert not smtp.has_extn("starttls")
            code, _ = smtp.docmd("STARTTLS")
            assert code == 454  # TLS not available
            smtp.sendmail("a@example.org", [inbox.address], message(to=inbox.address))
    finally:
        server.stop()
    assert len(_subjects(inbox)) == 1


def test_a_certificate_that_cannot_be_loaded_stops_smtpd(tmp_path: Path) -> None:
    missing = tmp_path / "missing.pem"
    with override_settings(SMTP_TLS_CERT=str(missing), SMTP_TLS_KEY=str(missing)):
        with pytest.raises(tls.TlsSetupError, match="Cannot load SMTP_TLS_CERT"):
            tls.configured_context()
        with pytest.raises(Exception, match="Cannot load SMTP_TLS_CERT"):
            smtpd_command.Command().handle(host="127.0.0.1", port=free_port(), smtps_port=None)
    cert, _ = make_certificate(tmp_path / "half")
    with (
        override_settings(SMTP_TLS_CERT=str(cert), SMTP_TLS_KEY=""),
        pytest.raises(tls.TlsSetupError, match="both"),
    ):
        tls.configured_context()


def test_embedded_mode_makes_a_self_signed_certificate_once(
    transactional_db: None, tmp_path: Path, inbox: Inbox
) -> None:
    with override_settings(VAR_DIR=tmp_path, SMTP_TLS_CERT="", SMTP_TLS_KEY=""):
        _, fingerprint = tls.embedded_context()
        cert = tmp_path / "tls" / "smtp.crt"
        assert cert.exists() and (tmp_path / "tls" / "smtp.key").stat().st_mode & 0o077 == 0
        again, fingerprint_again = tls.embedded_context()  # the second start keeps it
        assert fingerprint_again == fingerprint == tls.fingerprint(cert)
    server = TlsSmtpServer(again)
    try:
        with smtplib.SMTP("localhost", server.port, timeout=30) as smtp:
            smtp.starttls(context=trusting(cert))
            assert _fingerprint_of(smtp.sock) == fingerprint
            smtp.sendmail("a@example.org", [inbox.address], message(to=inbox.address, subject="e"))
        with smtplib.SMTP_SSL(
            "localhost", server.smtps_port, timeout=30, context=trusting(cert)
        ) as smtp:
            assert _fingerprint_of(smtp.sock) == fingerprint
            smtp.sendmail("a@example.org", [inbox.address], message(to=inbox.address, subject="f"))
    finally:
        server.stop()
    assert _subjects(inbox) == ["e", "f"]


@pytest.mark.live
def test_serve_prints_the_fingerprint_of_the_certificate_it_serves(tmp_path: Path) -> None:
    """``manage.py serve`` (make run) on a fresh data directory: the banner names the self-signed
    certificate's fingerprint, and STARTTLS and the SMTPS port present that certificate."""
    env = child_env("unused")
    env["DATA_DIR"] = str(tmp_path)
    env["DATABASE_URL"] = f"sqlite:///{tmp_path / 'embedded.sqlite3'}"
    env.pop("REDIS_URL", None)
    env.pop("SMTP_TLS_CERT", None)
    env.pop("SMTP_TLS_KEY", None)
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "-v0"],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        timeout=120,
    )
    http, smtp_port, smtps_port = free_port(), free_port(), free_port()
    argv = [sys.executable, "manage.py", "serve", "--port", str(http)]
    argv += ["--smtp-port", str(smtp_port), "--smtps-port", str(smtps_port)]
    proc = subprocess.Popen(
        argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    try:
        assert proc.stdout is not None
        banner = ""
        for line in proc.stdout:
            banner += line
            if "SMTP TLS" in line:
                break
        cert = tmp_path / "tls" / "smtp.crt"
        fingerprint = tls.fingerprint(cert)
        assert f"certificate SHA-256 {fingerprint}" in banner, banner
        with smtplib.SMTP("localhost", smtp_port, timeout=30) as smtp:
            smtp.starttls(context=trusting(cert))
            assert _fingerprint_of(smtp.sock) == fingerprint
        with smtplib.SMTP_SSL("localhost", smtps_port, timeout=30, context=trusting(cert)) as smtp:
            assert _fingerprint_of(smtp.sock) == fingerprint
    finally:
        proc.terminate()
        proc.wait(30)


@pytest.mark.live
def test_every_smtpd_process_sharing_the_port_serves_tls(
    transactional_db: None, tmp_path: Path, inbox: Inbox
) -> None:
    """Production: two smtpd processes on one port (SO_REUSEPORT) with SMTP_TLS_CERT; every
    connection, whichever process takes it, gets STARTTLS and the certificate."""
    from django.db import connection

    cert, key = make_certificate(tmp_path)
    port, smtps_port = free_port(), free_port()
    env = child_env(connection.settings_dict["NAME"])
    env |= {"SMTP_TLS_CERT": str(cert), "SMTP_TLS_KEY": str(key)}
    argv = [sys.executable, "manage.py", "smtpd", "--host", "127.0.0.1", "--port", str(port)]
    argv += ["--smtps-port", str(smtps_port)]
    first = Process(argv, port, env, also=(smtps_port,)).start()
    second = Process(argv, port, env, also=(smtps_port,)).start()
    try:
        for i in range(16):
            with smtplib.SMTP("localhost", port, timeout=30) as smtp:
                smtp.ehlo()
                assert smtp.has_extn("starttls")
                smtp.starttls(context=trusting(cert))
                smtp.sendmail(
                    "a@example.org", [inbox.address], message(to=inbox.address, subject=f"s{i}")
                )
            with smtplib.SMTP_SSL(
                "localhost", smtps_port, timeout=30, context=trusting(cert)
            ) as smtp:
                smtp.sendmail(
                    "a@example.org", [inbox.address], message(to=inbox.address, subject=f"i{i}")
                )
    finally:
        first.stop()
        second.stop()
    assert _subjects(inbox) == sorted([f"s{i}" for i in range(16)] + [f"i{i}" for i in range(16)])


def test_a_finished_starttls_session_lets_go_of_its_tls_objects(
    tls_server: TlsSmtpServer, certificate: tuple[Path, Path]
) -> None:
    """Ended sessions linger until the collector's oldest generation runs; their OpenSSL state
    must not linger with them (it made a busy smtpd's memory grow with every STARTTLS)."""
    import gc
    import weakref

    from mail.smtpd.server import PigeonholeSMTP

    cert, _ = certificate
    gc.disable()  # as in a long-lived smtpd, where old sessions wait for a rare full collection
    try:
        with smtplib.SMTP("localhost", tls_server.port, timeout=30) as smtp:
            smtp.starttls(context=trusting(cert))
            smtp.noop()
            client = smtp.sock.getsockname()
            [session] = [
                o
                for o in gc.get_objects()
                if type(o) is PigeonholeSMTP  # never isinstance: a dead weak proxy raises
                and o.session is not None
                and tuple(o.session.peer or ())[:2] == client[:2]
            ]
            assert session.tls_started
            tls_protocol = weakref.ref(session._tls_protocol)
            del session
        deadline = time.monotonic() + 30  # until the server has seen the connection end
        while tls_protocol() is not None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert tls_protocol() is None  # freed by reference counting, no collection needed
    finally:
        gc.enable()
