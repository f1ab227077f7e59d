"""Planning an index: what is new, changed, unchanged or gone, what is left out, and the file-count limit."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from m3.errors import InvalidArgument
from m3.gateway.fileindex.scan import Known, plan


def make(folder: Path) -> Path:
    (folder / "a.md").write_text("alpha\n")
    (folder / "b.txt").write_text("beta\n")
    (folder / "empty").mkdir()
    return folder


def test_a_new_folder_plans_every_text_file_and_skips_symlinks(tmp_path: Path) -> None:
    folder = make(tmp_path)
    (folder / "link.md").symlink_to(folder / "a.md")
    (folder / "bin.dat").write_bytes(b"\x00\x01")
    done = plan(folder, {}, patterns=[], max_bytes=1000, max_files=10, force=False)
    assert sorted(ft.rel for ft in done.changed) == ["a.md", "b.txt"]
    assert done.new == {str(folder / "a.md"), str(folder / "b.txt")}
    assert done.skipped == {"symlink": 1, "binary": 1}


def test_known_files_are_unchanged_by_hash_and_missing_ones_are_gone(tmp_path: Path) -> None:
    folder = make(tmp_path)
    a = folder / "a.md"
    digest = hashlib.sha256(a.read_bytes()).hexdigest()
    known = {str(a): Known(file_hash=digest, size=None, mtime=None, chunks=1),
             str(folder / "gone.md"): Known(file_hash="x", size=1, mtime=1.0, chunks=2)}
    done = plan(folder, known, patterns=["b.txt"], max_bytes=1000, max_files=10, force=False)
    assert (done.changed, done.unchanged, done.gone) == ([], 1, [str(folder / "gone.md")])
    forced = plan(folder, known, patterns=["b.txt"], max_bytes=1000, max_files=10, force=True)
    assert [ft.rel for ft in forced.changed] == ["a.md"] and forced.new == set()


def test_a_folder_over_the_file_limit_is_refused_before_reading(tmp_path: Path) -> None:
    folder = make(tmp_path)
    with pytest.raises(InvalidArgument) as raised:
        plan(folder, {}, patterns=[], max_bytes=1000, max_files=1, force=False)
    assert raised.value.details["setting"] == "files.max_files"
