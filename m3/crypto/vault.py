"""The encrypted secrets file, ``secrets.vault`` in the config root.

A JSON document, 0600: a header naming the cipher, the key's source and public id, and one sealed value per
name (AES-256-GCM, a fresh 96-bit nonce per value, the name and format version as associated data, so a
value moved to another name fails authentication). Names are not secret; values are. A changed value is
:class:`~m3.errors.SecretTampered`; a key that is missing or is not the vault's own is
:class:`~m3.errors.SecretKeyUnavailable` — coded errors, never a traceback. Which names may be stored is the
caller's rule (``m3.config`` admits the secret settings).
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from m3.crypto.keys import KeySource, choose
from m3.crypto.provider import CIPHER, Provider
from m3.errors import ConfigError, SecretKeyUnavailable, SecretTampered

VAULT_FILE_NAME = "secrets.vault"
#: The plaintext secrets file of m3 before the vault; :meth:`Vault.migrate_plaintext` moves it in.
PLAINTEXT_FILE_NAME = "secrets.toml"
FORMAT = "m3-vault"
VERSION = 1


class Vault:
    def __init__(self, folder: Path, provider: Provider, key_preference: str = "auto"):
        self.folder = folder
        self.path = folder / VAULT_FILE_NAME
        self.provider = provider
        self.key_preference = key_preference

    def exists(self) -> bool:
        return self.path.exists()

    def names(self) -> list[str]:
        return sorted(self._document()["values"])

    def read_all(self) -> dict[str, str]:
        """Every name with its plaintext value ({} when there is no vault)."""
        document = self._document()
        if not document["values"]:
            return {}
        key = self._key(document)
        return {name: self._open(key, name, sealed) for name, sealed in document["values"].items()}

    def get(self, name: str) -> str | None:
        document = self._document()
        sealed = document["values"].get(name)
        return None if sealed is None else self._open(self._key(document), name, sealed)

    def put(self, values: dict[str, str | None]) -> Path:
        """Set (a str) or remove (None) each name, in one atomic replacement of the file."""
        document = self._document()
        key = self._key(document) if self.exists() else self._new_key(document)
        for name, value in values.items():
            if value is None:
                document["values"].pop(name, None)
            else:
                document["values"][name] = self.provider.seal(key, value.encode("utf-8"), _aad(name))
        self._write(document)
        return self.path

    def migrate_plaintext(self, admit: Callable[[str], str]) -> list[str]:
        """Seal the values of the plaintext ``secrets.toml`` beside the vault (each key passed through ``admit``,
        which refuses what may not be stored; a value the vault already holds wins), then delete the plaintext
        file; the keys moved. The file is refused, unread, when others may read it."""
        path = self.folder / PLAINTEXT_FILE_NAME
        try:
            mode = path.stat().st_mode
        except FileNotFoundError:
            return []
        if mode & 0o077:
            raise ConfigError(f"{path} can be read by other users (mode {mode & 0o777:o})",
                              hint=f"Run `chmod 600 {path}`, or remove the file and set the secret again.")
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{path} is not valid TOML: {exc}", hint="Fix the file or remove it.") from None
        plain = {admit(f"{section}.{name}"): str(value) for section, table in data.items()
                 if isinstance(table, dict) for name, value in table.items()}
        held = set(self.names())
        moved: dict[str, str | None] = {k: v for k, v in plain.items() if k not in held}
        if moved:
            self.put(moved)
        path.unlink()
        return sorted(moved)

    def status(self) -> dict[str, Any]:
        """What doctor shows: where the key is, the cipher, how many values (never a value)."""
        if not self.exists():
            return {"vault": str(self.path), "exists": False}
        document = self._document()
        source = KeySource(document["key_source"], self.folder)
        return {"vault": str(self.path), "exists": True, "cipher": document["cipher"], "key_source": source.name,
                "key": source.where, "key_id": document["key_id"], "count": len(document["values"])}

    # -- the file -------------------------------------------------------------------------------------

    def _document(self) -> dict[str, Any]:
        try:
            mode = self.path.stat().st_mode
        except FileNotFoundError:
            return {"format": FORMAT, "version": VERSION, "cipher": CIPHER, "key_source": None, "key_id": None,
                    "values": {}}
        if mode & 0o077:
            raise ConfigError(f"{self.path} can be read by other users (mode {mode & 0o777:o})",
                              hint=f"Run `chmod 600 {self.path}` (or `m3 doctor --fix`).")
        try:
            document = json.loads(self.path.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError):
            raise SecretTampered(f"{self.path} is not a vault (not JSON)") from None
        if (not isinstance(document, dict) or document.get("format") != FORMAT
                or document.get("key_source") not in ("keyring", "file")
                or not isinstance(document.get("key_id"), str)
                or not isinstance(document.get("values"), dict)
                or not all(isinstance(v, str) for v in document["values"].values())):
            raise SecretTampered(f"{self.path} is not a vault m3 wrote (header or values changed)")
        if document.get("version") != VERSION or document.get("cipher") != CIPHER:
            raise ConfigError(f"{self.path} is vault version {document.get('version')} ({document.get('cipher')}); "
                              f"this m3 reads version {VERSION} ({CIPHER})",
                              hint="Upgrade m3 to the version that wrote the vault.")
        return document

    def _write(self, document: dict[str, Any]) -> None:
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        tmp = self.path.with_suffix(f".tmp{os.getpid()}")
        tmp.unlink(missing_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(document, fh, indent=1, sort_keys=True)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.path)

    # -- the key --------------------------------------------------------------------------------------

    def _key(self, document: dict[str, Any]) -> bytes:
        source = KeySource(document["key_source"], self.folder)
        if source.name == "keyring":
            self.provider.refuse_in_fips("a vault key kept in the OS keyring",
                                         "the keyring's storage is outside m3's crypto provider")
        key = source.load()
        if key is None:
            raise SecretKeyUnavailable(f"the vault's key is missing from {source.where}",
                                       hint="Restore the key from a backup; without it the vault cannot be read. "
                                            "Or remove the vault and set the secrets again.")
        if self.provider.key_id(key) != document["key_id"]:
            raise SecretKeyUnavailable(f"the key in {source.where} is not the key of {self.path}",
                                       hint="Restore the vault's own key; a vault sealed under another key cannot "
                                            "be read.")
        return key

    def _new_key(self, document: dict[str, Any]) -> bytes:
        source = choose(self.key_preference, self.folder, self.provider.fips_mode)
        if source.name == "keyring":
            self.provider.refuse_in_fips("a vault key kept in the OS keyring",
                                         "the keyring's storage is outside m3's crypto provider")
        key = source.load()  # a key file left by an earlier vault is reused rather than overwritten
        if key is None:
            key = self.provider.new_key()
            source.save(key)
        document.update(key_source=source.name, key_id=self.provider.key_id(key))
        return key

    def _open(self, key: bytes, name: str, sealed: str) -> str:
        plain = self.provider.open(key, sealed, _aad(name))
        try:
            return plain.decode("utf-8")
        except UnicodeDecodeError:
            raise SecretTampered(f"the secret {name} does not decrypt to text") from None


def _aad(name: str) -> bytes:
    return f"{FORMAT}/{VERSION}/{name}".encode()
