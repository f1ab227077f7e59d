"""``m3 secret set|get|list|delete|migrate``: the encrypted vault through the command line.

Real files under a temporary M3_HOME, the real ``cryptography`` backend; tampering is done to the files
themselves, as an attacker or a broken disk would.
"""

from __future__ import annotations

import argparse
import base64
import json
from pathlib import Path

import pytest

from m3.config import load_config
from m3.crypto.provider import backend_fips
from m3.gateway.secret_commands import secret_migrate
from tests.gateway.outcomes import Run

SECRET_URL = "postgresql+psycopg://m3:s3cret-pw@/m3?host=/nonexistent/socket/dir&port=5432"
EMBED_KEY = "sk-embed-0123456789-s3cret"


@pytest.fixture
def config_dir(m3_home: Path) -> Path:
    return m3_home / "config"


def test_a_secret_is_set_encrypted_read_back_listed_and_deleted(cli: Run, config_dir: Path) -> None:
    done = cli("secret", "set", "embed.key", stdin=EMBED_KEY + "\n").document()
    assert done == {"file": str(config_dir / "secrets.vault"), "key": "embed.key", "value": "<set, hidden>"}
    vault, key_file = config_dir / "secrets.vault", config_dir / "secrets.key"
    assert vault.stat().st_mode & 0o777 == 0o600
    assert key_file.stat().st_mode & 0o777 == 0o600
    assert b"s3cret" not in vault.read_bytes()
    assert json.loads(vault.read_text())["cipher"] == "AES-256-GCM"
    assert cli("secret", "get", "embed.key").document() == {"key": "embed.key", "value": EMBED_KEY}
    listed = cli("secret", "list").document()
    assert {r["key"]: r["set"] for r in listed["secrets"]} == {"store.url": False, "embed.key": True, "llm.key": False,
                                                               "dashboard.token": False, "sync.warehouse_url": False}
    assert (listed["key_source"], listed["count"]) == ("file", 1)
    assert "s3cret" not in json.dumps(listed)
    shown = cli("config", "show", "--origin").document()["settings"]["embed.key"]
    assert shown == {"value": "<set, hidden>", "origin": "secret", "env": "M3_EMBED_KEY"}
    assert cli("secret", "delete", "embed.key").document()["deleted"] is True
    assert cli("secret", "delete", "embed.key").document()["deleted"] is False
    assert cli("secret", "get", "embed.key").error()["code"] == "not_found"


def test_two_values_under_one_key_get_different_nonces(cli: Run, config_dir: Path) -> None:
    cli("secret", "set", "embed.key", stdin="same").document()
    cli("secret", "set", "store.url", stdin="sqlite:////tmp/x.db").document()
    first = json.loads((config_dir / "secrets.vault").read_text())["values"]["embed.key"]
    cli("secret", "set", "embed.key", stdin="same").document()
    assert json.loads((config_dir / "secrets.vault").read_text())["values"]["embed.key"] != first


def _tamper(vault: Path, change: str) -> None:
    document = json.loads(vault.read_text())
    sealed = bytearray(base64.b64decode(document["values"]["embed.key"]))
    if change == "flip":
        sealed[-1] ^= 0x01
        document["values"]["embed.key"] = base64.b64encode(bytes(sealed)).decode()
    elif change == "swap":  # a value moved under another name fails: the name is associated data
        document["values"]["store.url"] = document["values"].pop("embed.key")
    elif change == "garbage":
        document["values"]["embed.key"] = "not base64 !!"
    vault.write_text(json.dumps(document))


@pytest.mark.parametrize("change", ["flip", "swap", "garbage"])
def test_a_tampered_ciphertext_is_a_coded_error_and_never_a_traceback(cli: Run, config_dir: Path,
                                                                      change: str) -> None:
    cli("secret", "set", "embed.key", stdin=EMBED_KEY).document()
    _tamper(config_dir / "secrets.vault", change)
    # Every command reads the configuration, secrets included, first: each one fails closed.
    for argv in (("secret", "get", "embed.key"), ("config", "show"), ("secret", "list")):
        outcome = cli(*argv)
        error = outcome.error()
        assert error["code"] == "secret_tampered"
        assert "Traceback" not in outcome.stderr and "s3cret" not in outcome.stderr


def test_a_vault_that_is_not_json_or_another_key_is_refused(cli: Run, config_dir: Path) -> None:
    cli("secret", "set", "embed.key", stdin=EMBED_KEY).document()
    key_file = config_dir / "secrets.key"
    key_file.write_text(base64.b64encode(b"k" * 32).decode())
    assert cli("secret", "get", "embed.key").error()["code"] == "secret_key_unavailable"
    key_file.unlink()
    assert cli("config", "show").error()["code"] == "secret_key_unavailable"
    (config_dir / "secrets.vault").write_text("{ not json")
    assert cli("config", "show").error()["code"] == "secret_tampered"
    for header in ('{"format": "m3-vault", "values": {}}', '{"format": "m3-vault", "key_source": "file", '
                   '"values": {"embed.key": 1}}', "[]"):
        (config_dir / "secrets.vault").write_text(header)
        assert cli("config", "show").error()["code"] == "secret_tampered"


def test_a_vault_or_key_file_others_can_read_is_refused(cli: Run, config_dir: Path) -> None:
    cli("secret", "set", "embed.key", stdin=EMBED_KEY).document()
    (config_dir / "secrets.key").chmod(0o644)
    assert "chmod 600" in cli("secret", "get", "embed.key").error()["hint"]
    (config_dir / "secrets.key").chmod(0o600)
    (config_dir / "secrets.vault").chmod(0o640)
    assert "chmod 600" in cli("config", "show").error()["hint"]


def test_a_plaintext_secrets_file_is_migrated_on_first_use_and_removed(cli: Run, config_dir: Path) -> None:
    config_dir.mkdir(parents=True, mode=0o700)
    plain = config_dir / "secrets.toml"
    plain.write_text(f'[embed]\nkey = "{EMBED_KEY}"\n')
    plain.chmod(0o600)
    shown = cli("config", "show", "--origin").document()["settings"]["embed.key"]
    assert shown["origin"] == "secret"
    assert not plain.exists()
    assert b"s3cret" not in (config_dir / "secrets.vault").read_bytes()
    assert cli("secret", "get", "embed.key").document()["value"] == EMBED_KEY


def test_secret_migrate_keeps_what_the_vault_already_holds(cli: Run, config_dir: Path) -> None:
    cli("secret", "set", "embed.key", stdin="newer").document()
    config = load_config()  # before the plaintext file appears: every command would migrate it on loading
    plain = config_dir / "secrets.toml"
    plain.write_text('[embed]\nkey = "older"\n[store]\nurl = "sqlite:////tmp/m.db"\n')
    plain.chmod(0o600)
    assert secret_migrate(config, argparse.Namespace())["migrated"] == ["store.url"]
    assert not plain.exists()
    assert cli("secret", "get", "embed.key").document()["value"] == "newer"
    assert cli("secret", "get", "store.url").document()["value"] == "sqlite:////tmp/m.db"
    assert cli("secret", "migrate").document()["migrated"] == []


def test_config_set_secret_still_works_with_a_warning_naming_secret_set(cli: Run) -> None:
    done = cli("config", "set-secret", "embed.key", stdin=EMBED_KEY).document()
    assert "m3 secret set" in done["warning"]
    assert cli("secret", "get", "embed.key").document()["value"] == EMBED_KEY
    gone = cli("config", "unset-secret", "embed.key").document()
    assert (gone["deleted"], "m3 secret delete" in gone["warning"]) == (True, True)


def test_only_secret_settings_go_into_the_vault(cli: Run) -> None:
    assert cli("secret", "set", "search.k", stdin="5").error()["code"] == "config_error"
    assert cli("secret", "set", "no.such", stdin="5").error()["code"] == "config_error"
    assert cli("secret", "set", "embed.key", stdin="").error()["code"] == "config_error"


def test_fips_mode_fails_closed_when_openssl_is_not_in_fips_mode(cli: Run, monkeypatch: pytest.MonkeyPatch,
                                                                 config_dir: Path) -> None:
    cli("secret", "set", "embed.key", stdin=EMBED_KEY).document()
    monkeypatch.setenv("M3_CRYPTO_FIPS_MODE", "true")
    if backend_fips()["fips_enabled"]:  # a FIPS build of OpenSSL: the same calls succeed
        assert cli("secret", "get", "embed.key").document()["value"] == EMBED_KEY
        return
    for argv in (("secret", "get", "embed.key"), ("config", "show"), ("secret", "set", "store.url")):
        error = cli(*argv, stdin="sqlite:////tmp/x.db").error()
        assert error["code"] == "fips_unavailable"
        assert error["details"]["fips_enabled"] is False
    assert json.loads((config_dir / "secrets.vault").read_text())["values"].keys() == {"embed.key"}


def test_an_explicit_keyring_without_a_keyring_is_a_coded_error(cli: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    from m3.crypto.keys import keyring_available

    if keyring_available():
        pytest.skip("this machine has a real keyring backend")
    monkeypatch.setenv("M3_CRYPTO_KEY_SOURCE", "keyring")
    assert cli("secret", "set", "embed.key", stdin=EMBED_KEY).error()["code"] == "secret_key_unavailable"


def test_the_store_url_is_read_from_the_vault_on_both_stores(cli: Run, store_url: str) -> None:
    cli("secret", "set", "store.url", stdin=store_url).document()
    written = cli("memory", "memory_write", "--content", "kept under an encrypted URL").document()
    assert cli("memory", "memory_get", "--id", written["id"]).document()["content"] == "kept under an encrypted URL"
    status = cli("store", "status").document()
    assert (status["url_origin"], status["schema"]["current"], status["counts"]["current"]) == ("secret", True, 1)
