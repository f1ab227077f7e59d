"""The crypto provider: AES-256-GCM, SHA-256, HMAC-SHA256 and random bytes, nothing else.

Every cryptographic operation of m3 goes through this module, so that FIPS mode (``crypto.fips_mode``) has one
place to restrict: with it on, each operation first asks the OpenSSL backend of ``cryptography`` whether it runs
in FIPS mode and refuses (:class:`~m3.errors.FipsUnavailable`) when it does not, rather than computing with a
module that was not asked to comply. The algorithms used here are all FIPS-approved, so FIPS mode changes which
backend may compute them, not the algorithms. Imports of ``cryptography`` happen on first use: a process that
never touches a secret does not pay for loading it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
from dataclasses import dataclass
from typing import Any

from m3.errors import FipsUnavailable, SecretTampered

CIPHER = "AES-256-GCM"
KEY_BYTES = 32
NONCE_BYTES = 12  # 96-bit random nonces, as SP 800-38D recommends for GCM
APPROVED = ("AES-256-GCM", "SHA-256", "HMAC-SHA256")


def backend_fips() -> dict[str, Any]:
    """What the OpenSSL backend of ``cryptography`` reports: its version and whether FIPS mode is on.

    ``cryptography`` has no public call for this; its backend's ``_fips_enabled`` is read, and a version that
    lacks it counts as *not FIPS* (fail closed).
    """
    import cryptography
    from cryptography.hazmat.backends.openssl import backend

    return {"cryptography": cryptography.__version__, "openssl": backend.openssl_version_text(),
            "fips_enabled": bool(getattr(backend, "_fips_enabled", False))}


@dataclass(frozen=True)
class Provider:
    """The operations, under one FIPS policy."""

    fips_mode: bool = False

    def require_compliant(self, what: str) -> None:
        """Refuse ``what`` in FIPS mode unless OpenSSL runs in FIPS mode."""
        if not self.fips_mode:
            return
        status = backend_fips()
        if not status["fips_enabled"]:
            raise FipsUnavailable(
                f"crypto.fips_mode is on but the OpenSSL backend ({status['openssl']}) is not in FIPS mode; "
                f"refusing to {what}", details=status)

    def refuse_in_fips(self, what: str, why: str) -> None:
        """A path that cannot comply: refused whenever FIPS mode is on."""
        if self.fips_mode:
            raise FipsUnavailable(f"crypto.fips_mode is on: {what} cannot comply ({why})",
                                  details={"path": what})

    def new_key(self) -> bytes:
        self.require_compliant("generate a key")
        return os.urandom(KEY_BYTES)

    def seal(self, key: bytes, plaintext: bytes, aad: bytes) -> str:
        """``plaintext`` encrypted and authenticated (with ``aad``), as base64 of nonce ‖ ciphertext ‖ tag."""
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        self.require_compliant("encrypt a secret")
        nonce = os.urandom(NONCE_BYTES)
        return base64.b64encode(nonce + AESGCM(key).encrypt(nonce, plaintext, aad)).decode("ascii")

    def open(self, key: bytes, sealed: str, aad: bytes) -> bytes:
        """The plaintext of :meth:`seal`'s output; :class:`SecretTampered` when it fails authentication."""
        from cryptography.exceptions import InvalidTag
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        self.require_compliant("decrypt a secret")
        try:
            blob = base64.b64decode(sealed.encode("ascii"), validate=True)
        except (ValueError, UnicodeEncodeError):
            raise SecretTampered("an encrypted secret is not valid base64", details={"aad": aad.decode()}) from None
        if len(blob) < NONCE_BYTES + 16:
            raise SecretTampered("an encrypted secret is too short to be one", details={"aad": aad.decode()})
        try:
            return AESGCM(key).decrypt(blob[:NONCE_BYTES], blob[NONCE_BYTES:], aad)
        except InvalidTag:
            raise SecretTampered("an encrypted secret failed authentication (changed, or sealed under another key)",
                                 details={"aad": aad.decode()}) from None

    def key_id(self, key: bytes) -> str:
        """A public name for ``key`` (HMAC-SHA256 of a fixed label, 16 hex digits): tells a wrong key from a
        changed ciphertext without revealing anything about the key."""
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives import hmac as chmac

        self.require_compliant("name a key")
        mac = chmac.HMAC(key, hashes.SHA256())
        mac.update(b"m3 vault key id")
        return mac.finalize()[:8].hex()


# -- the other security uses: bearer tokens and keys compared in constant time -------------------------

def new_token(prefix: str) -> str:
    """A bearer token: ``prefix`` and 256 random bits (the OS CSPRNG)."""
    return prefix + secrets.token_urlsafe(32)


def token_digest(token: str) -> str:
    """The SHA-256 (hex) under which a token is stored."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def same_secret(given: bytes, expected: bytes) -> bool:
    """``given == expected`` in time independent of where they differ."""
    return hmac.compare_digest(given, expected)


def keyed_digest(key: bytes, message: bytes) -> bytes:
    """HMAC-SHA256 of ``message`` under ``key`` (the dashboard's CSRF tokens bind a session this way)."""
    return hmac.new(key, message, hashlib.sha256).digest()


def random_bytes(n: int) -> bytes:
    """``n`` bytes from the OS CSPRNG (a process's own key, a session id)."""
    return secrets.token_bytes(n)
