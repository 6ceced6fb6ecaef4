"""Signed mail for the authentication tests: RSA keys made in the test, their DKIM records
published on the run's nameserver (tests/dns_server.py), messages signed and ARC-sealed with
dkimpy, and a fresh domain per test (answers are cached per process for their TTL)."""

from __future__ import annotations

import base64
import functools
import uuid
from dataclasses import dataclass

import dkim
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.dns_server import DnsServer


@dataclass(frozen=True)
class Key:
    private_pem: bytes
    record: str  # the DKIM TXT record's value


@functools.cache
def key(n: int = 0) -> Key:
    """The ``n``-th test key (2048 bits: its record is longer than one TXT string)."""
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = private.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )
    der = private.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return Key(pem, f"v=DKIM1; k=rsa; p={base64.b64encode(der).decode()}")


def fresh_domain(label: str = "sender") -> str:
    return f"{label}-{uuid.uuid4().hex[:10]}.example"


def plain(
    *, sender: str, to: str, subject: str = "Sign-in code", body: str = "Code 482913."
) -> bytes:
    return (
        f"From: Sender <{sender}>\r\nTo: {to}\r\nSubject: {subject}\r\n"
        f"Message-ID: <{uuid.uuid4().hex}@test>\r\nDate: Fri, 27 Nov 2026 03:00:00 +0000\r\n"
        f"MIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n{body}\r\n"
    ).encode()


def sign(raw: bytes, *, domain: str, selector: str = "s1", key_index: int = 0) -> bytes:
    """``raw`` with a DKIM-Signature of ``domain`` prepended."""
    return dkim.sign(raw, selector.encode(), domain.encode(), key(key_index).private_pem) + raw


def publish_key(dns: DnsServer, *, domain: str, selector: str = "s1", key_index: int = 0) -> None:
    dns.publish(f"{selector}._domainkey.{domain}", key(key_index).record)


def arc_seal(raw: bytes, *, domain: str, selector: str = "arc", results: str = "") -> bytes:
    """``raw`` as a forwarder at ``domain`` passes it on: its Authentication-Results, then the
    next ARC set (seal, message signature, results)."""
    ar = f"Authentication-Results: {domain}; {results or 'dkim=pass'}\r\n".encode()
    message = ar + raw
    headers = dkim.arc_sign(
        message, selector.encode(), domain.encode(), key(0).private_pem, domain.encode()
    )
    return b"".join(headers) + message
