"""TLS of the SMTP receiver: STARTTLS on ``SMTP_PORT``, implicit TLS on ``SMTPS_PORT``.

The certificate and key come from ``SMTP_TLS_CERT`` and ``SMTP_TLS_KEY`` (PEM files), loaded by
every smtpd process at start (a process that cannot load them does not start). Without them no
STARTTLS is offered, except in embedded mode (``manage.py serve``), which makes a self-signed
pair under ``var/tls/`` at its first start and prints the certificate's SHA-256 fingerprint.

Only TLS 1.2 and 1.3, and for TLS 1.2 only forward-secret AEAD cipher suites; no client
certificates are asked for (any MTA may deliver).
"""

from __future__ import annotations

import datetime
import hashlib
import ssl
from pathlib import Path

from django.conf import settings

# TLS 1.2 suites: ECDHE or DHE key exchange, AES-GCM or ChaCha20-Poly1305 (TLS 1.3's own suites
# are all of that kind and are not affected by this list).
CIPHERS = "ECDHE+AESGCM:ECDHE+CHACHA20:DHE+AESGCM:DHE+CHACHA20:!aNULL:!eNULL:!MD5:!DSS:!SHA1"
SELF_SIGNED_DAYS = 3650


class TlsSetupError(Exception):
    """The configured certificate or key could not be loaded."""


def server_context(cert: str | Path, key: str | Path) -> ssl.SSLContext:
    """A server context for ``cert`` and ``key`` (PEM files)."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.set_ciphers(CIPHERS)
    context.options |= ssl.OP_NO_COMPRESSION | ssl.OP_CIPHER_SERVER_PREFERENCE
    try:
        context.load_cert_chain(str(cert), str(key))
    except (OSError, ssl.SSLError) as error:
        raise TlsSetupError(
            f"Cannot load SMTP_TLS_CERT {cert} / SMTP_TLS_KEY {key}: {error}"
        ) from None
    return context


def configured_context() -> ssl.SSLContext | None:
    """The context of ``SMTP_TLS_CERT`` and ``SMTP_TLS_KEY``; None when they are unset."""
    cert, key = settings.SMTP_TLS_CERT, settings.SMTP_TLS_KEY
    if not cert and not key:
        return None
    if not cert or not key:
        raise TlsSetupError("Set both SMTP_TLS_CERT and SMTP_TLS_KEY (or neither).")
    return server_context(cert, key)


def fingerprint(cert: str | Path) -> str:
    """The SHA-256 fingerprint of a PEM certificate, as ``AB:CD:…``."""
    der = ssl.PEM_cert_to_DER_cert(Path(cert).read_text())
    return ":".join(f"{byte:02X}" for byte in hashlib.sha256(der).digest())


def self_signed(directory: Path, hostname: str) -> tuple[Path, Path]:
    """``directory``/smtp.crt and smtp.key: made (EC P-256, for ``hostname`` and localhost) if
    they are not there yet, else the existing pair."""
    cert_path, key_path = directory / "smtp.crt", directory / "smtp.key"
    if cert_path.exists() and key_path.exists():
        return cert_path, key_path
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hostname)])
    now = datetime.datetime.now(datetime.UTC)
    names = [x509.DNSName(hostname)] + ([x509.DNSName("localhost")] * (hostname != "localhost"))
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=SELF_SIGNED_DAYS))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    directory.mkdir(parents=True, exist_ok=True)
    key_tmp, cert_tmp = key_path.with_suffix(".key.tmp"), cert_path.with_suffix(".crt.tmp")
    key_tmp.touch(mode=0o600)
    key_tmp.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    cert_tmp.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_tmp.replace(key_path)
    cert_tmp.replace(cert_path)
    return cert_path, key_path


def embedded_context() -> tuple[ssl.SSLContext, str]:
    """Embedded mode: the configured pair if there is one, else the self-signed one under
    ``var/tls/`` (made now if missing); with the certificate's fingerprint."""
    if settings.SMTP_TLS_CERT or settings.SMTP_TLS_KEY:
        context = configured_context()
        assert context is not None
        return context, fingerprint(settings.SMTP_TLS_CERT)
    cert, key = self_signed(Path(settings.VAR_DIR) / "tls", settings.SMTP_HOSTNAME)
    return server_context(cert, key), fingerprint(cert)
