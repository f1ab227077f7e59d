"""The crypto provider and the vault, through their public calls on real files and the real backend."""

from __future__ import annotations

from pathlib import Path

import pytest

from m3.crypto.keys import keyring_available
from m3.crypto.provider import Provider, backend_fips, same_secret, token_digest
from m3.crypto.vault import Vault
from m3.errors import FipsUnavailable, SecretTampered


def test_a_sealed_value_opens_only_with_its_key_and_associated_data() -> None:
    provider = Provider()
    key = provider.new_key()
    sealed = provider.seal(key, b"value", b"name-a")
    assert provider.open(key, sealed, b"name-a") == b"value"
    with pytest.raises(SecretTampered):
        provider.open(key, sealed, b"name-b")
    with pytest.raises(SecretTampered):
        provider.open(provider.new_key(), sealed, b"name-a")
    assert provider.key_id(key) == provider.key_id(key) != provider.key_id(provider.new_key())


def test_the_other_security_operations() -> None:
    assert token_digest("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"  # FIPS 180-2
    assert same_secret(b"k", b"k") and not same_secret(b"k", b"K")


def test_fips_mode_refuses_unless_openssl_reports_fips(tmp_path: Path) -> None:
    provider = Provider(fips_mode=True)
    if backend_fips()["fips_enabled"]:
        provider.new_key()
        return
    with pytest.raises(FipsUnavailable):
        provider.new_key()
    with pytest.raises(FipsUnavailable):
        Vault(tmp_path, provider).put({"embed.key": "x"})
    assert not (tmp_path / "secrets.key").exists()


def test_without_a_keyring_a_new_vault_keeps_its_key_in_an_owner_only_file(tmp_path: Path) -> None:
    if keyring_available():
        pytest.skip("this machine has a real keyring backend")
    vault = Vault(tmp_path / "config", Provider())
    vault.put({"embed.key": "x", "store.url": "sqlite:///y"})
    assert vault.status()["key_source"] == "file"
    assert (tmp_path / "config" / "secrets.key").stat().st_mode & 0o777 == 0o600
    assert Vault(tmp_path / "config", Provider()).read_all() == {"embed.key": "x", "store.url": "sqlite:///y"}
    vault.put({"embed.key": None})
    assert vault.names() == ["store.url"]
