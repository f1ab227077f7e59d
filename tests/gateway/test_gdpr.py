"""GDPR export and erasure through real interfaces (the service with its actors, and the m3 CLI), on each store.

One agent's data is written through every tool that stores text, exported, then erased with
``m3 governance gdpr_forget``; the raw database files are then scanned for any byte of its texts (SQLite: the
database and its WAL; PostgreSQL: every relation file of the database, found with pg_relation_filepath after
a CHECKPOINT), and another agent's data must still be there.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, make_url, text
from sqlalchemy.pool import NullPool

from m3.actors.system import ActorSystem
from m3.errors import M3Error
from m3.gateway.service import CallContext, Service
from tests.gateway.outcomes import Run

pytestmark = pytest.mark.anyio

SUBJECT, KEEPER = "subj-erase-7", "keeper-1"
ME, OTHER = CallContext(agent_id=SUBJECT), CallContext(agent_id=KEEPER)
LOCAL = CallContext(agent_id=None)


def secret(n: int) -> str:
    """A text only the subject wrote, with a token no other text has."""
    return f"Qzv{n}marker the subject's private fact number {n} about Xylophone{n}"


KEPT = ["The keeper's own note about Kumquat9 stays.", "Keeper chat line about Kumquat8 stays.",
        "Keeper task about Kumquat7 stays."]


async def write_everything(service: Service) -> dict[str, Any]:
    """The subject's data through every tool that stores text, and some of the keeper's."""
    await service.call("agent_register", {"description": secret(1), "metadata": {"bio": secret(2)}}, ME)
    await service.call("agent_register", {}, OTHER)
    first = await service.call("memory_write", {"content": secret(3), "title": secret(4), "scope": "user",
                                                "metadata": {"m": secret(5)}}, ME)
    await service.call("memory_update", {"id": first["id"], "content": secret(6), "reason": secret(19)}, ME)
    older = await service.call("memory_write", {"content": secret(7), "scope": "user"}, ME)
    newer = await service.call("memory_supersede", {"id": older["id"], "content": secret(8)}, ME)
    await service.call("memory_link", {"from_id": first["id"], "to_id": newer["id"]}, ME)
    private = await service.call("memory_write", {"content": secret(18)}, ME)
    await service.call("memory_share", {"id": private["id"], "agents": [KEEPER]}, ME)
    dropped = await service.call("memory_write", {"content": secret(22)}, ME)
    await service.call("memory_delete", {"id": dropped["id"], "reason": secret(21)}, ME)
    await service.call("memory_restore", {"id": dropped["id"], "reason": secret(23)}, ME)
    await service.call("chatlog_write", {"conversation_id": "conv-s", "role": "user", "content": secret(9)}, ME)
    await service.call("memory_handoff", {"to_agent": KEEPER, "task": secret(10), "note": secret(11),
                                          "context_ids": [first["id"]]}, ME)
    await service.call("notify", {"to_agent": KEEPER, "message": secret(12), "data": {"d": secret(13)}}, ME)
    task = await service.call("task_create", {"title": secret(14), "description": secret(15),
                                              "assignee": KEEPER}, ME)
    await service.call("task_update", {"id": task["id"], "version": task["version"], "title": secret(16)}, ME)
    own = await service.call("task_create", {"title": secret(20), "assignee": SUBJECT}, ME)
    await service.call("task_set_result", {"id": own["id"], "version": own["version"], "note": secret(17)}, ME)
    # Reads of the subject's data by the keeper, and by the subject: audit records about it.
    await service.call("memory_search", {"query": "Xylophone3 private fact"}, OTHER)
    await service.call("memory_get", {"id": first["id"]}, ME)
    # The keeper's own data, which must survive.
    await service.call("memory_write", {"content": KEPT[0], "scope": "user"}, OTHER)
    await service.call("chatlog_write", {"conversation_id": "conv-k", "role": "user", "content": KEPT[1]}, OTHER)
    await service.call("task_create", {"title": KEPT[2]}, OTHER)
    return {"memory": first["id"]}


SECRETS = [secret(n) for n in range(1, 24)]
TOKENS = [f"qzv{n}marker" for n in range(1, 24)] + [f"xylophone{n}" for n in range(1, 24)]


def raw_bytes(store_url: str) -> bytes:
    """The bytes of every file of the store's tables (after a CHECKPOINT on PostgreSQL)."""
    url = make_url(store_url)
    if url.get_backend_name() == "sqlite":
        db = Path(str(url.database))
        return b"".join(p.read_bytes() for p in (db, db.with_name(db.name + "-wal")) if p.exists())
    engine = create_engine(url, isolation_level="AUTOCOMMIT", poolclass=NullPool)
    try:
        with engine.connect() as conn:
            conn.execute(text("CHECKPOINT"))
            data_dir = Path(conn.execute(text("SHOW data_directory")).scalar_one())
            paths = conn.execute(text(
                "SELECT pg_relation_filepath(c.oid) FROM pg_class c WHERE c.relnamespace NOT IN "
                "('pg_catalog'::regnamespace, 'information_schema'::regnamespace) "
                "AND pg_relation_filepath(c.oid) IS NOT NULL")).scalars().all()
    finally:
        engine.dispose()
    files = [data_dir / p for p in paths]
    assert any(f.exists() for f in files)
    return b"".join(f.read_bytes() for f in files if f.exists())


def remaining(data: bytes, needles: list[str]) -> list[str]:
    return [n for n in needles if n.encode() in data or n.lower().encode() in data]


async def test_export_holds_every_text_of_the_subject_and_forget_leaves_no_byte_of_them(
        service: Service, system: ActorSystem, m3: Run, store_url: str, tmp_path: Path) -> None:
    await write_everything(service)
    system.wait_embedded(60)
    exported = await service.call("gdpr_export", {"agent_id": SUBJECT}, LOCAL)
    dumped = json.dumps(exported, ensure_ascii=False)
    assert remaining(dumped.encode(), SECRETS) == SECRETS  # every text is in the export
    assert not any(k in dumped for k in KEPT)  # and nothing of the keeper's
    assert exported["vectors"] and all(set(v) == {"memory_id", "model", "dim", "created_at"}
                                       for v in exported["vectors"])
    assert {a["subject_agent"] for a in exported["audit"]} == {SUBJECT}
    assert {a["reader"] for a in exported["audit"]} == {KEEPER, SUBJECT}
    assert len(exported["memories"]) == 6  # four current memories, an updated and a superseded version
    assert exported["agent"]["description"] == secret(1)
    system.stop()
    assert remaining(raw_bytes(store_url), SECRETS) == SECRETS  # the scan sees them before the erasure

    refused = m3("governance", "gdpr_forget", "--agent-id", SUBJECT).error()
    assert refused["code"] == "confirmation_required"
    done = m3("governance", "gdpr_forget", "--agent-id", SUBJECT, "--confirm").document()
    assert done["counts"]["memories"] == 6 and done["counts"]["chat"] == 1 and done["counts"]["agent"] == 1

    data = raw_bytes(store_url)
    assert remaining(data, SECRETS + TOKENS) == []
    assert remaining(data, KEPT) == KEPT
    after = m3("governance", "gdpr_export", "--agent-id", SUBJECT).document()
    assert [len(after[k]) for k in ("memories", "history", "chat", "tasks", "inbox", "notifications", "audit")] == [
        0] * 7
    assert after["agent"] is None
    assert [e["counts"]["memories"] for e in after["erasures"]] == [6]
    # The keeper's data is whole, and its export is a zip of JSON files.
    target = tmp_path / "keeper.zip"
    listed = m3("governance", "export-zip", "--agent-id", KEEPER, "--zip", str(target)).document()
    assert target.stat().st_mode & 0o777 == 0o600
    with zipfile.ZipFile(target) as archive:
        assert set(archive.namelist()) == set(listed["files"])
        memories = json.loads(archive.read("memories.json"))
        assert [m["content"] for m in memories] == [KEPT[0]]
        assert [c["content"] for c in json.loads(archive.read("chat.json"))] == [KEPT[1]]
        assert json.loads(archive.read("subject.json"))["subject"] == {"kind": "agent", "id": KEEPER}


async def test_forgetting_a_user_in_a_running_process_erases_the_memories_about_them_only(
        service: Service, system: ActorSystem, store_url: str) -> None:
    """Through the service while every actor keeps its connection open (SQLite's WAL stays in use)."""
    about = await service.call("memory_write", {"content": secret(30), "user_id": "dana", "scope": "user"}, OTHER)
    await service.call("memory_write", {"content": KEPT[0], "user_id": "erin", "scope": "user"}, OTHER)
    await service.call("memory_get", {"id": about["id"]}, OTHER)
    system.wait_embedded(60)
    exported = await service.call("gdpr_export", {"user_id": "dana"}, LOCAL)
    assert [m["content"] for m in exported["memories"]] == [secret(30)]
    assert [a["subject_user"] for a in exported["audit"]] == ["dana"]
    assert remaining(raw_bytes(store_url), [secret(30)]) == [secret(30)]
    done = await service.call("gdpr_forget", {"user_id": "dana", "confirm": True}, LOCAL)
    # Two audit records: the memory_get, and the export, itself a read of the memory.
    assert done["counts"]["memories"] == 1 and done["counts"]["audit"] == 2
    data = raw_bytes(store_url)
    assert remaining(data, [secret(30), "qzv30marker"]) == []
    assert remaining(data, [KEPT[0]]) == [KEPT[0]]
    # Search no longer finds it, by keyword or by meaning; the other user's memory still is.
    found = await service.call("memory_search", {"query": "Xylophone30 private fact Kumquat9"}, OTHER)
    assert [item["content"] for item in found["items"]] == [KEPT[0]]


async def test_a_token_bound_agent_may_export_only_itself_and_may_not_erase(service: Service) -> None:
    await service.call("memory_write", {"content": "Mine to export."}, ME)
    bound = CallContext(agent_id=SUBJECT, bound=True)
    mine = await service.call("gdpr_export", {"agent_id": SUBJECT}, bound)
    assert [m["content"] for m in mine["memories"]] == ["Mine to export."]
    for tool, args in (("gdpr_export", {"agent_id": KEEPER}), ("gdpr_export", {"user_id": "dana"}),
                       ("gdpr_forget", {"agent_id": SUBJECT, "confirm": True})):
        with pytest.raises(M3Error) as raised:
            await service.call(tool, args, bound)
        assert raised.value.code == "forbidden", tool
    for args in ({}, {"agent_id": SUBJECT, "user_id": "dana"}):
        with pytest.raises(M3Error) as raised:
            await service.call("gdpr_export", args, LOCAL)
        assert raised.value.code == "invalid_argument"


@pytest.mark.store_only("sqlite", reason="a reader holding the WAL is SQLite's case; PostgreSQL's is a lock timeout")
async def test_an_erasure_whose_scrub_is_blocked_says_it_committed_and_a_second_call_scrubs(
        env: dict[str, str], embedder: Any, store_url: str) -> None:
    import sqlite3

    from m3.config import load_config
    from m3.gateway.registry import default_registry

    system = ActorSystem(load_config({**env, "M3_STORE_BUSY_TIMEOUT_MS": "200"}), embedder).start()
    try:
        service = Service(system.config, system, default_registry())
        await service.call("memory_write", {"content": secret(40)}, ME)
        system.wait_embedded(60)
        other = sqlite3.connect(str(make_url(store_url).database), isolation_level=None)
        try:
            other.execute("BEGIN")
            other.execute("SELECT count(*) FROM memories").fetchone()  # a read transaction on the WAL's snapshot
            with pytest.raises(M3Error) as raised:
                await service.call("gdpr_forget", {"agent_id": SUBJECT, "confirm": True}, LOCAL)
            assert raised.value.code == "store_error" and "erasure committed" in raised.value.message
            assert "gdpr_forget again" in (raised.value.hint or "")
        finally:
            other.close()
        again = await service.call("gdpr_forget", {"agent_id": SUBJECT, "confirm": True}, LOCAL)
        assert again["counts"]["memories"] == 0
        assert remaining(raw_bytes(store_url), [secret(40), "qzv40marker"]) == []
    finally:
        system.stop()
