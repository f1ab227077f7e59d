"""The files tools through the service (and once the command line), on each store: index a folder, search it,
re-index incrementally, forget, ignore rules, access rules for token-bound callers, isolation."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from m3.config import Config, load_config
from m3.errors import M3Error
from m3.gateway.service import CallContext, Service
from tests.gateway.outcomes import Run
from tests.helpers import call

A, B = CallContext(agent_id="agent-a"), CallContext(agent_id="agent-b")
REMOTE = CallContext(agent_id="agent-a", bound=True)


@pytest.fixture
def allowed(tmp_path: Path) -> Path:
    """The one folder of files.roots: token-bound callers may read under it only."""
    root = tmp_path / "allowed"
    root.mkdir()
    return root


@pytest.fixture
def config(env: dict[str, str], allowed: Path) -> Config:
    return load_config({**env, "M3_FILES_ROOTS": str(allowed)})


@pytest.fixture
def notes(allowed: Path) -> Path:
    """A folder of notes and code, with things the defaults leave out."""
    folder = allowed / "notes"
    (folder / "sub").mkdir(parents=True)
    (folder / "sub" / "deploy.md").write_text("# Deploy\n\nThe staging deploy runs every Tuesday at noon.\n"
                                              "Ask the platypus team before deploying.\n")
    (folder / "retry.py").write_text("def retry_policy():\n    # back off exponentially, at most 7 attempts\n"
                                     "    return 7\n")
    (folder / "todo.txt").write_text("Buy a new kettle.\n")
    (folder / ".git").mkdir()
    (folder / ".git" / "config").write_text("secret git platypus\n")
    (folder / "node_modules" / "lib").mkdir(parents=True)
    (folder / "node_modules" / "lib" / "index.js").write_text("platypus module\n")
    (folder / "image.dat").write_bytes(b"\x89PNG\x00\x00platypus")
    return folder


def index(service: Service, path: Path, ctx: CallContext = A, **args: Any) -> dict[str, Any]:
    return call(service, "files_index", ctx, path=str(path), **args)


def error_of(service: Service, tool: str, ctx: CallContext, **args: Any) -> M3Error:
    with pytest.raises(M3Error) as raised:
        call(service, tool, ctx, **args)
    return raised.value


def found_paths(service: Service, ctx: CallContext, query: str) -> set[str]:
    """The files whose chunks files_search returns. The semantic leg offers the nearest chunks by meaning even when
    no word matches, so "not found" is checked as "that file is not among the results"."""
    return {i["path"] for i in call(service, "files_search", ctx, query=query)["items"]}


def test_index_then_search_finds_a_chunk_with_its_path_and_lines(service: Service, notes: Path) -> None:
    done = index(service, notes)
    assert (done["new"], done["changed"], done["unchanged"], done["forgotten"]) == (3, 0, 0, 0)
    assert done["skipped"] == {"binary": 1}  # .git and node_modules are not even entered
    found = call(service, "files_search", A, query="when does the staging deploy run")
    top = found["items"][0]
    assert top["path"] == str(notes.resolve() / "sub" / "deploy.md")
    assert (top["start_line"], top["end_line"]) == (1, 4)
    assert "Tuesday" in top["content"]
    assert all("git" not in item["path"] and "node_modules" not in item["path"]
               for item in call(service, "files_search", A, query="platypus")["items"])


def test_memory_search_leaves_file_chunks_out_and_files_search_can_keep_to_a_folder(service: Service,
                                                                                   notes: Path) -> None:
    index(service, notes)
    call(service, "memory_write", A, content="The kettle is in the cupboard.")
    assert [i["type"] for i in call(service, "memory_search", A, query="kettle")["items"]] == ["note"]
    assert call(service, "files_search", A, query="kettle")["items"][0]["path"] == str((notes / "todo.txt").resolve())
    # Kept to sub/: the kettle note is out; the semantic leg may still offer sub/'s chunk, by meaning only.
    in_sub = call(service, "files_search", A, query="kettle", path=str(notes / "sub"))["items"]
    assert {i["path"] for i in in_sub} <= {str(notes.resolve() / "sub" / "deploy.md")}
    assert all(i["bm25_score"] == 0 for i in in_sub)
    only = call(service, "files_search", A, query="deploy Tuesday", path=str(notes / "sub"))
    assert {i["path"] for i in only["items"]} == {str(notes.resolve() / "sub" / "deploy.md")}


def test_reindex_after_editing_one_file_rechunks_only_that_file(service: Service, notes: Path) -> None:
    index(service, notes)
    before = {f["path"]: f for f in call(service, "files_list", A)["files"]}
    todo = notes / "todo.txt"
    todo.write_text("Buy a new kettle and descale the old one.\n")
    done = index(service, notes)
    assert (done["new"], done["changed"], done["unchanged"]) == (0, 1, 2)
    assert done["items"] == [{"path": str(todo.resolve()), "change": "changed", "chunks": 1}]
    assert (done["chunks_written"], done["chunks_retired"]) == (1, 1)
    after = {f["path"]: f for f in call(service, "files_list", A)["files"]}
    assert after[str(todo.resolve())]["file_hash"] != before[str(todo.resolve())]["file_hash"]
    retry = str((notes / "retry.py").resolve())
    assert after[retry]["indexed_at"] == before[retry]["indexed_at"]
    assert call(service, "files_get", A, path=str(todo))["chunks"][0]["content"].startswith("Buy a new kettle and")
    again = index(service, notes)
    assert (again["changed"], again["unchanged"], again["chunks_written"]) == (0, 3, 0)


def test_a_folder_of_many_files_is_written_in_a_few_transactions(service: Service, tmp_path: Path) -> None:
    folder = tmp_path / "many"
    folder.mkdir()
    for i in range(520):
        (folder / f"note{i:03d}.txt").write_text(f"Note number {i} about item {i * 7}.\n")
    done = index(service, folder)
    assert (done["new"], done["chunks_written"]) == (520, 520)
    files = call(service, "files_list", A)["files"]
    # One Writer request, one transaction, one recorded_at: 500 chunks a request.
    assert len(files) == 520 and len({f["indexed_at"] for f in files}) == 2


def test_near_identical_files_both_stay_once_embedded(service: Service, tmp_path: Path) -> None:
    folder = tmp_path / "twins"
    folder.mkdir()
    (folder / "a.md").write_text("The backup server is rebooted every Sunday night.\n")
    (folder / "b.md").write_text("The backup server is rebooted every Sunday night!\n")
    (folder / "c.md").write_text("The backup server is rebooted every Sunday night.\n")  # identical to a.md
    index(service, folder)
    service.system.wait_embedded()  # similarity supersession would have run by now
    assert call(service, "files_stats", A)["chunks"] == 3
    assert call(service, "files_search", A, query="backup server reboot")["count"] == 3


def test_a_touched_but_unchanged_file_is_not_rechunked(service: Service, notes: Path) -> None:
    index(service, notes)
    todo = notes / "todo.txt"
    os.utime(todo, (1_000_000_000, 1_000_000_000))
    done = index(service, notes)
    assert (done["changed"], done["unchanged"], done["chunks_written"]) == (0, 3, 0)


def test_a_deleted_file_is_forgotten_and_history_records_why(service: Service, notes: Path) -> None:
    index(service, notes)
    chunk_id = call(service, "files_get", A, path=str(notes / "todo.txt"))["chunks"][0]["id"]
    (notes / "todo.txt").unlink()
    done = index(service, notes)
    assert (done["forgotten"], done["chunks_retired"]) == (1, 1)
    assert str((notes / "todo.txt").resolve()) not in found_paths(service, A, "kettle")
    assert error_of(service, "files_get", A, path=str(notes / "todo.txt")).code == "not_found"
    events = call(service, "memory_history", A, id=chunk_id)["events"]
    assert events[-1]["event"] == "deleted" and events[-1]["details"]["reason"] == "gone from disk or ignored"


def test_files_forget_retires_a_folder_and_status_shows_changes_without_writing(service: Service,
                                                                              notes: Path) -> None:
    index(service, notes)
    (notes / "new.md").write_text("A fresh note about wombats.\n")
    status = call(service, "files_status", A, path=str(notes))
    assert (status["new"], status["unchanged"], status["dry_run"], status["chunks_written"]) == (1, 3, True, 0)
    assert str((notes / "new.md").resolve()) not in found_paths(service, A, "wombats")
    gone = call(service, "files_forget", A, path=str(notes / "sub"))
    assert (gone["files"], gone["chunks_retired"]) == (1, 1)
    assert str((notes / "sub" / "deploy.md").resolve()) not in found_paths(service, A, "staging deploy Tuesday")
    assert error_of(service, "files_forget", A, path=str(notes / "sub")).code == "not_found"
    stats = call(service, "files_stats", A)
    assert (stats["files"], stats["by_extension"]) == (2, {".py": 1, ".txt": 1})


def test_ignore_patterns_and_m3ignore_hold(service: Service, notes: Path) -> None:
    (notes / ".m3ignore").write_text("sub/\n")
    done = index(service, notes, ignore=["*.py"])
    paths = {f["path"] for f in call(service, "files_list", A)["files"]}
    assert paths == {str((notes / "todo.txt").resolve()), str((notes / ".m3ignore").resolve())}
    assert done["skipped"]["ignored"] == 1  # retry.py; sub/ is not entered
    # Lifting a rule brings the files in; adding one forgets what it now covers.
    (notes / ".m3ignore").write_text("todo.txt\n")
    again = index(service, notes)
    assert (again["new"], again["forgotten"]) == (2, 1)


def test_reindex_rechunks_every_file(service: Service, notes: Path) -> None:
    index(service, notes)
    done = call(service, "files_reindex", A, path=str(notes))
    assert (done["changed"], done["unchanged"], done["chunks_written"], done["chunks_retired"]) == (3, 0, 3, 3)


def test_a_bound_caller_is_refused_outside_the_roots_and_through_a_symlink(service: Service, notes: Path,
                                                                         tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("the vault code is 1234\n")
    refused = error_of(service, "files_index", REMOTE, path=str(outside))
    assert refused.code == "forbidden" and "files.roots" in refused.hint
    (notes / "link.txt").symlink_to(outside / "secret.txt")
    assert error_of(service, "files_index", REMOTE, path=str(notes / "link.txt")).code == "forbidden"
    assert error_of(service, "memory_write_from_file", REMOTE, path=str(notes / "link.txt")).code == "forbidden"
    # A missing path outside the roots is refused too: a remote caller learns nothing about it.
    assert error_of(service, "files_index", REMOTE, path=str(outside / "nope")).code == "forbidden"
    done = index(service, notes, REMOTE)  # inside the root: the symlink in the walk is not followed
    assert done["skipped"]["symlink"] == 1
    seen = call(service, "files_search", REMOTE, query="vault code")["items"]
    assert not any("vault code" in i["content"] for i in seen)
    assert index(service, outside)["new"] == 1  # the local user may read anywhere


def test_no_roots_means_a_bound_caller_may_not_index(env: dict[str, str], notes: Path) -> None:
    from m3.actors.system import ActorSystem
    from m3.gateway.registry import default_registry

    system = ActorSystem(load_config(env)).start()
    try:
        svc = Service(system.config, system, default_registry())
        refused = error_of(svc, "files_index", REMOTE, path=str(notes))
        assert refused.code == "forbidden" and "files.roots is empty" in refused.message
    finally:
        system.stop()


def test_a_missing_path_a_relative_path_and_a_binary_file_give_coded_errors(service: Service, notes: Path) -> None:
    assert error_of(service, "files_index", A, path=str(notes / "nope")).code == "not_found"
    assert error_of(service, "files_index", A, path="notes").code == "invalid_argument"
    binary = error_of(service, "files_index", A, path=str(notes / "image.dat"))
    assert binary.code == "invalid_argument" and binary.details["reason"] == "binary"
    assert error_of(service, "memory_write_from_file", A, path=str(notes / "image.dat")).code == "invalid_argument"
    assert call(service, "files_list", A)["count"] == 0


def test_agent_b_cannot_see_agent_a_private_chunks(service: Service, notes: Path) -> None:
    index(service, notes)
    assert call(service, "files_search", B, query="platypus deploy")["count"] == 0
    assert call(service, "files_list", B)["count"] == 0
    assert error_of(service, "files_get", B, path=str(notes / "todo.txt")).code == "not_found"
    assert error_of(service, "files_forget", B, path=str(notes)).code == "not_found"
    index(service, notes / "todo.txt", B, scope="org")
    # A's own chunk and B's shared one (the semantic leg may add other files' chunks once their vectors exist).
    kettle = [i for i in call(service, "files_search", A, query="kettle")["items"] if i["path"].endswith("todo.txt")]
    assert len(kettle) == 2
    assert [f["agent_id"] for f in call(service, "files_list", A, path=str(notes / "todo.txt"))["files"]] == [
        "agent-a", "agent-b"]


def test_memory_write_from_file_stores_a_line_range_with_its_path(service: Service, notes: Path) -> None:
    path = notes / "retry.py"
    done = call(service, "memory_write_from_file", A, path=str(path), start_line=2, end_line=3)
    assert (done["created"], done["start_line"], done["end_line"]) == (True, 2, 3)
    record = call(service, "memory_get", A, id=done["id"])
    assert record["content"] == "    # back off exponentially, at most 7 attempts\n    return 7\n"
    assert record["metadata"]["path"] == str(path.resolve()) and record["source"] == str(path.resolve())
    assert record["type"] == "reference" and record["title"] == "retry.py:2-3"
    assert call(service, "memory_search", A, query="back off exponentially")["items"][0]["id"] == done["id"]
    assert error_of(service, "memory_write_from_file", A, path=str(path), start_line=9).code == "invalid_argument"
    assert error_of(service, "memory_write_from_file", A, path=str(path), start_line=3,
                    end_line=2).code == "invalid_argument"


@pytest.fixture
def store_cli(env: dict[str, str], cli: Run, monkeypatch: pytest.MonkeyPatch) -> Run:
    monkeypatch.setenv("M3_STORE_URL", env["M3_STORE_URL"])
    return cli


def test_index_and_search_on_the_command_line(store_cli: Run, notes: Path) -> None:
    done = store_cli("files", "files_index", "--path", str(notes)).document()
    assert done["new"] == 3
    found = store_cli("files", "search", "--query", "retry policy attempts").document()
    assert found["items"][0]["path"] == str((notes / "retry.py").resolve())
    assert store_cli("files", "files_index", "--path", str(notes / "nope")).error()["code"] == "not_found"
