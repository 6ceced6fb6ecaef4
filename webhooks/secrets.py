"""Signing secrets: generated as ``whsec_…``, stored encrypted (AES-GCM with a key derived from
``SECRET_KEY``), and the HMAC-SHA256 signature of the spec.

The plain secret is in the create response only; the database holds ciphertext, so neither a
database dump nor the admin shows it. Changing ``SECRET_KEY`` makes stored secrets unreadable:
recreate the endpoints then.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets as _random

from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from django.conf import settings

PREFIX = "whsec_"


def generate() -> str:
    return PREFIX + _random.token_urlsafe(32)


def _key() -> bytes:
    return hashlib.sha256(b"pigeonhole.webhook-secret:" + settings.SECRET_KEY.encode()).digest()


def encrypt(plain: str) -> str:
    nonce = os.urandom(12)
    sealed = AESGCM(_key()).encrypt(nonce, plain.encode(), b"whsec")
    return "v1:" + base64.b64encode(nonce + sealed).decode()


def decrypt(stored: str) -> str:
    raw = base64.b64decode(stored.removeprefix("v1:"))
    return AESGCM(_key()).decrypt(raw[:12], raw[12:], b"whsec").decode()


def sign(secret: str, timestamp: int, body: bytes) -> str:
    """``Service-Signature`` value: ``t=<unix>,v1=<hex HMAC-SHA256 of "<t>.<body>">``."""
    digest = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return f"t={timestamp},v1={digest.hexdigest()}"
