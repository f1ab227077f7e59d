"""One interface over the dialects: the store's dialect module is found once, and nothing else compares names."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from m3.errors import ConfigError
from m3.store import postgres, sqlite
from m3.store.dialect import dialect_for
from m3.store.engine import StoreOptions, open_engine
from tests.stored import is_postgres

M3 = Path(__file__).resolve().parents[2] / "m3"
#: The modules that may name dialects; migrations keep op-level branches (frozen history imports no live code).
DIALECT_MODULES = {M3 / "store" / "dialect.py", M3 / "store" / "sqlite.py", M3 / "store" / "postgres.py"}
NAME = r"""["'](?:sqlite|postgresql)["']"""
COMPARISON = re.compile(rf"(?:==|!=|\bin\b|\bcase)\s*[(\[{{]?\s*{NAME}|{NAME}\s*(?:==|!=)|\bdialect\.name\b")


def test_the_dialect_of_a_url_an_engine_and_a_connection_is_the_one_module_of_that_backend(store_url: str) -> None:
    expected = postgres.DIALECT if is_postgres(store_url) else sqlite.DIALECT
    engine = open_engine(StoreOptions(url=store_url), "reader")
    try:
        with engine.connect() as conn:
            assert dialect_for(store_url) is dialect_for(engine) is dialect_for(conn) is dialect_for(conn.dialect)
            assert dialect_for(conn) is expected
    finally:
        engine.dispose()


def test_a_backend_m3_cannot_store_in_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="unsupported store backend 'mysql'"):
        dialect_for("mysql://m3@localhost/m3")


def test_no_module_outside_the_dialect_modules_and_migrations_compares_dialect_names() -> None:
    found = [f"{path.relative_to(M3.parent)}:{number}: {line.strip()}"
             for path in sorted(M3.rglob("*.py"))
             if path not in DIALECT_MODULES and "migrations" not in path.parts
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if COMPARISON.search(line)]
    assert found == [], "ask m3.store.dialect.dialect_for(...) instead:\n" + "\n".join(found)


def test_the_guard_recognises_the_comparisons_it_forbids() -> None:
    for line in ['if dialect == "postgresql":', "if conn.dialect.name != 'sqlite':", 'x in ("sqlite", "a")',
                 'case "postgresql":', '"sqlite" == backend']:
        assert COMPARISON.search(line), line
    for line in ['JSON().with_variant(JSONB(), "postgresql")', 'URL.create("postgresql+psycopg")']:
        assert not COMPARISON.search(line), line
