"""Where the vault key lives: the OS keyring when a real backend exists, else an owner-only key file.

The ``keyring`` package is optional. It counts as available only when it imports and its chosen backend is a
real one (priority above zero: not the ``fail`` or ``null`` backends a headless machine falls back to). The key
file is ``secrets.key`` beside the vault, 32 random bytes in base64, created 0600 from its first byte and refused
when group or others may read it. A vault records which source holds its key, so installing ``keyring`` later
does not orphan an existing vault.
"""

from __future__ import annotations

import base64
import binascii
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from m3.errors import ConfigError, SecretKeyUnavailable

KeySourceName = Literal["keyring", "file"]
KEY_FILE_NAME = "secrets.key"
KEYRING_SERVICE = "m3-memory"


def keyring_available() -> bool:
    try:
        import keyring

        return float(keyring.get_keyring().priority) > 0
    except Exception:  # any import or backend failure means "no usable keyring"
        return False


@dataclass(frozen=True)
class KeySource:
    """The key of the vault in ``folder``, from the named source."""

    name: KeySourceName
    folder: Path

    @property
    def key_file(self) -> Path:
        return self.folder / KEY_FILE_NAME

    @property
    def where(self) -> str:
        return f"keyring {KEYRING_SERVICE}/{self._keyring_user}" if self.name == "keyring" else str(self.key_file)

    @property
    def _keyring_user(self) -> str:
        return f"vault:{self.folder.resolve()}"

    def load(self) -> bytes | None:
        """The key, or None when the source holds none yet."""
        text = self._read()
        if text is None:
            return None
        try:
            key = base64.b64decode(text.strip(), validate=True)
        except (binascii.Error, ValueError):
            key = b""
        if len(key) != 32:
            raise SecretKeyUnavailable(f"the vault key in {self.where} is not a 256-bit key",
                                       hint="Restore the key from a backup; without it the vault cannot be read.")
        return key

    def save(self, key: bytes) -> None:
        text = base64.b64encode(key).decode("ascii")
        if self.name == "keyring":
            import keyring

            keyring.set_password(KEYRING_SERVICE, self._keyring_user, text)
            return
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(self.key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="ascii") as fh:
            fh.write(text + "\n")
            fh.flush()
            os.fsync(fh.fileno())

    def delete(self) -> None:
        if self.name == "keyring":
            import keyring

            keyring.delete_password(KEYRING_SERVICE, self._keyring_user)
        else:
            self.key_file.unlink(missing_ok=True)

    def _read(self) -> str | None:
        if self.name == "keyring":
            if not keyring_available():
                raise SecretKeyUnavailable("the vault key is in the OS keyring, which is not available here",
                                           hint="Install `keyring` with a working backend (or unlock it).")
            import keyring

            value: str | None = keyring.get_password(KEYRING_SERVICE, self._keyring_user)
            return value
        try:
            mode = self.key_file.stat().st_mode
        except FileNotFoundError:
            return None
        if mode & 0o077:
            raise ConfigError(f"{self.key_file} can be read by other users (mode {mode & 0o777:o})",
                              hint=f"Run `chmod 600 {self.key_file}` (or `m3 doctor --fix`).")
        return self.key_file.read_text(encoding="ascii")


def choose(preference: str, folder: Path, fips_mode: bool) -> KeySource:
    """The source for a new vault: ``keyring``, ``file``, or ``auto`` (keyring when available, else file).

    In FIPS mode ``auto`` picks the file: the keyring's storage is outside m3's crypto boundary, and an explicit
    ``keyring`` is refused (the caller's provider raises).
    """
    if preference == "keyring" or (preference == "auto" and not fips_mode and keyring_available()):
        return KeySource("keyring", folder)
    return KeySource("file", folder)
