"""The committed reference docs are exactly what the generator makes from the code."""

from __future__ import annotations

import difflib
from pathlib import Path

import pytest

from devtools import docs

GENERATED = docs.render_all()


@pytest.mark.parametrize("name", sorted(GENERATED))
def test_the_committed_doc_is_the_generated_one(name: str) -> None:
    path = docs.DOCS_DIR / name
    committed = path.read_text(encoding="utf-8") if path.exists() else ""
    if committed != GENERATED[name]:
        diff = "".join(list(difflib.unified_diff(committed.splitlines(keepends=True),
                                                 GENERATED[name].splitlines(keepends=True),
                                                 f"committed docs/{name}", f"generated docs/{name}"))[:40])
        pytest.fail(f"docs/{name} is out of date; regenerate it with `{docs.REGENERATE}`.\n{diff}")


def test_the_generator_writes_every_doc_and_check_then_finds_none_stale(tmp_path: Path) -> None:
    assert docs.main(["--dir", str(tmp_path)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(GENERATED)
    assert docs.main(["--check", "--dir", str(tmp_path)]) == 0
    (tmp_path / "errors.md").write_text("edited by hand\n", encoding="utf-8")
    assert docs.stale(tmp_path) == ["errors.md"]
    assert docs.main(["--check", "--dir", str(tmp_path)]) == 1


def test_generation_does_not_depend_on_the_terminal_width(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "20")
    assert docs.render_all() == GENERATED
