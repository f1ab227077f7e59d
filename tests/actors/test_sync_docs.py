"""docs/sync.md lists exactly the tables that travel and those that stay, as m3.store.sync_tables declares them."""

from __future__ import annotations

import re
from pathlib import Path

from m3.store import schema
from m3.store.sync_tables import BY_NAME, LOCAL_TABLES, SYNCED

DOC = (Path(__file__).resolve().parents[2] / "docs" / "sync.md").read_text()


def _table_after(marker: str) -> list[list[str]]:
    block = DOC.split(marker, 1)[1].split("-->", 1)[1].strip().split("\n\n", 1)[0]
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in block.splitlines()[2:]]


def test_the_docs_list_every_table_that_travels_with_its_key_and_deletion_rule() -> None:
    rows = _table_after("<!-- sync-tables")
    listed = [r[0].strip("`") for r in rows]
    assert sorted(listed) == sorted(t.name for t in SYNCED)
    for name, key, deletion in rows:
        spec = BY_NAME[name.strip("`")]
        if spec.kind == "hash":
            assert "SHA-256" in key
        else:
            assert re.findall(r"`(\w+)`", key) == list(spec.key_columns)
        assert (deletion == "final") == spec.final_delete


def test_the_docs_list_every_table_and_column_that_stays_with_its_reason() -> None:
    rows = _table_after("<!-- local-tables")
    tables = {r[0].strip("`"): r[1] for r in rows if "." not in r[0]}
    assert tables == LOCAL_TABLES
    columns = {c.strip("`") for r in rows if "." in r[0] for c in r[0].split(", ")}
    assert columns == {f"{t.name}.{c}" for t in SYNCED for c in t.local_columns}
    # Every table of the store is either synced, local, or the store's own sync bookkeeping.
    bookkeeping = {t for t in schema.metadata.tables if t.startswith("sync_")}
    assert set(schema.metadata.tables) == set(BY_NAME) | set(LOCAL_TABLES) | bookkeeping
