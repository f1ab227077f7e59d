"""Files are private to their user: m3's folders are 0700 and its files 0600, through the real command line.

An existing store whose modes let other users in is tightened when m3 opens it, with a line in the log.
"""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from tests.gateway.outcomes import Run


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)



def sqlite_files(store_url: str) -> list[Path]:
    if not store_url.startswith("sqlite"):
        return []
    db = Path(store_url.removeprefix("sqlite:///"))
    return [p for p in (db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")) if p.exists()]


@pytest.mark.fresh_files
def test_a_new_home_its_folders_the_database_and_the_log_are_the_owners_only(
        m3: Run, m3_home: Path, store_url: str) -> None:
    m3("memory", "write", "--content", "A private memory.").document()
    assert {name: mode(m3_home / name) for name in ("", "engine", "logs")} == {"": 0o700, "engine": 0o700,
                                                                              "logs": 0o700}
    assert mode(m3_home / "logs" / "m3.log") == 0o600
    files = sqlite_files(store_url)
    assert all(mode(f) == 0o600 for f in files), {str(f): oct(mode(f)) for f in files}
    assert len(files) >= (1 if store_url.startswith("sqlite") else 0)


@pytest.mark.fresh_files
def test_an_existing_store_open_to_others_is_tightened_on_open_with_a_log_line(
        m3: Run, m3_home: Path, store_url: str) -> None:
    m3("memory", "write", "--content", "A private memory.").document()
    m3("engine", "stop").document()  # the next command's engine opens the store anew
    opened = [m3_home, m3_home / "engine", m3_home / "logs"]
    for folder in opened:
        folder.chmod(0o755)
    (m3_home / "logs" / "m3.log").chmod(0o644)
    for f in sqlite_files(store_url):
        f.chmod(0o644)
    found = m3("memory", "search", "--query", "private").document()
    assert found["count"] == 1
    assert all(not mode(folder) & 0o066 for folder in opened), [oct(mode(f)) for f in opened]
    assert mode(m3_home / "logs" / "m3.log") == 0o600
    assert all(mode(f) == 0o600 for f in sqlite_files(store_url))
    log = (m3_home / "logs" / "m3.log").read_text(encoding="utf-8")
    assert f"{m3_home / 'engine'} was open to other users (mode 755); tightened to 711" in log
    if store_url.startswith("sqlite"):
        assert "m3.db was open to other users (mode 644); tightened to 600" in log


@pytest.mark.fresh_files
def test_a_home_first_made_by_config_set_is_the_owners_only(m3: Run, m3_home: Path) -> None:
    m3("config", "set", "search.k", "5").document()
    assert (mode(m3_home), mode(m3_home / "config")) == (0o700, 0o700)
