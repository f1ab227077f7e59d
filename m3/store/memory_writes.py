"""The Writer's operations on memories, each inside the caller's transaction.

Every change records a history event with its actor and time. Nothing is
overwritten without the previous values landing in history, and content
always matches its SHA-256 hash.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, RowMapping

from m3.errors import InvalidArgument, NotRetired
from m3.protocols.messages.files import FilesApplied, IndexFiles
from m3.protocols.messages.memory import (
    DeleteMemory,
    LinkMemories,
    MemoryFilter,
    NewMemory,
    PinMemory,
    RestoreMemory,
    SupersedeMemory,
    UnlinkMemories,
    UpdateMemory,
    WriteMemories,
    WriteOutcome,
)
from m3.protocols.tools import memory as r
from m3.protocols.tools.links import MemoryUnlinkResult
from m3.store import archive_writes, file_chunk_writes
from m3.store import memories as rows
from m3.store.schema import memories as m
from m3.store.vectors import embed_text

UPDATABLE = ("content", "title", "metadata", "importance", "expires_at")


class MemoryWrites:
    """Memory mutations bound to one connection and the Writer's clock."""

    def __init__(self, conn: Connection, clock: Callable[[], datetime]):
        self.conn = conn
        self.clock = clock
        #: What the changes did, for the Writer to tell after the commit: (id, text) to embed,
        #: ids no longer current (supersession candidates no more), ids erased for good, ids unarchived.
        self.fresh: list[tuple[str, str]] = []
        self.retired: list[str] = []
        self.erased: list[str] = []
        #: Archived memories made visible again (the Searcher counts their vectors again).
        self.restored: list[str] = []

    def _own(self, ref: str, flt: MemoryFilter) -> str:
        """The id of a memory ``flt``'s reader may change: a private (``scope=agent``) memory only its own agent,
        whatever ``isolation.enforce`` says, and never through a grant (memory_share gives read access only);
        others' private memories are not found, as if they did not exist. A caller with no agent is the
        trusted local user."""
        if flt.reader_agent_id is not None:
            flt = flt.model_copy(update={"enforce_isolation": True, "grants": False})
        return rows.resolve_id(self.conn, ref, flt)

    def write_all(self, msgs: Sequence[WriteMemories]) -> list[tuple[list[WriteOutcome], list[tuple[str, str]]]]:
        """Insert each memory unless an identical current one exists; per request (as if run in turn) its outcomes
        and the (id, text) to embed.

        One query finds the duplicates of every memory; the new rows and their history events go in one
        executemany each. A memory repeating an earlier one (of the same or an earlier request) is its
        duplicate. A duplicate that is archived (or expired) is restored: writing it again is a use.
        """
        wanted = [(mem, rows.content_hash(mem.content)) for msg in msgs for mem in msg.memories]
        current: dict[rows.DuplicateKey, Any] = rows.find_duplicates(self.conn, wanted)
        values: list[dict[str, Any]] = []
        events: list[dict[str, Any]] = []
        results: list[tuple[list[WriteOutcome], list[tuple[str, str]]]] = []
        pairs = iter(wanted)
        for msg in msgs:
            outcomes: list[WriteOutcome] = []
            fresh: list[tuple[str, str]] = []
            for mem, digest in itertools.islice(pairs, len(msg.memories)):
                key = rows.duplicate_key(mem, digest)
                dup = current.get(key)
                if dup is not None:
                    if archive_writes.hidden(dup, self.clock()):
                        # Written again: the archived (or expired) memory is in use again, not a new one.
                        self._revive(dup, msg.actor)
                        current[key] = {"id": dup["id"], "recorded_at": dup["recorded_at"]}
                    outcomes.append(WriteOutcome(id=dup["id"], created=False, content_hash=digest,
                                                 recorded_at=dup["recorded_at"]))
                    continue
                memory_id, now = rows.new_id(), self.clock()
                values.append(rows.memory_values(mem, memory_id=memory_id, digest=digest, now=now))
                events.append(rows.event(memory_id, "created", msg.actor, now, type=mem.type))
                current[key] = {"id": memory_id, "recorded_at": now}
                outcomes.append(WriteOutcome(id=memory_id, created=True, content_hash=digest, recorded_at=now))
                fresh.append((memory_id, embed_text(mem.title, mem.content)))
            results.append((outcomes, fresh))
        rows.insert_memories(self.conn, values)
        rows.record_events(self.conn, events)
        return results

    def _revive(self, row: Any, actor: str | None) -> None:
        """Restore archived ``row`` because its exact text was written again (see :meth:`write_all`)."""
        now = self.clock()
        details = archive_writes.unarchive(self.conn, row, now)
        rows.record_events(self.conn, [rows.event(row["id"], "restored", actor, now, was="archived", how="rewritten",
                                                  **details)])
        self.restored.append(row["id"])

    def index_files(self, msg: IndexFiles) -> FilesApplied:
        """Replace the chunks of files (:mod:`m3.store.file_chunk_writes`); what it did is reported like any change."""
        done, fresh, retired = file_chunk_writes.apply(self.conn, msg, self.clock)
        self.fresh += fresh
        self.retired += retired
        return done

    def supersede(self, msg: SupersedeMemory) -> r.MemorySupersedeResult:
        old = rows.load(self.conn, self._own(msg.id, msg.filter))
        if old["retired_at"] is not None:
            raise _already_retired(old)
        now = self.clock()
        # The new version keeps what the request leaves out.
        kept = {k: old[k] for k in NewMemory.model_fields if k not in ("content", "valid_from")}
        given = {k: getattr(msg, k) for k in ("type", "title", "metadata", "importance") if getattr(msg, k) is not None}
        new = NewMemory(**(kept | given), content=msg.content, valid_from=msg.valid_from or now)
        new_id, digest = rows.new_id(), rows.content_hash(msg.content)
        rows.insert_memories(self.conn, [rows.memory_values(new, memory_id=new_id, digest=digest, now=now)])
        if not self.close_superseded(old, new_id, now, valid_to=new.valid_from or now, actor=msg.actor,
                                     reason=msg.reason, how="explicit"):
            # Another process retired it after we read it (PostgreSQL): this request's savepoint rolls back.
            raise _already_retired(rows.load(self.conn, old["id"]))
        rows.record_events(self.conn, [rows.event(new_id, "created", msg.actor, now, type=new.type,
                                                  supersedes=old["id"])])
        self.fresh.append((new_id, embed_text(new.title, new.content)))
        self.retired.append(old["id"])
        return r.MemorySupersedeResult(id=new_id, superseded_id=old["id"], recorded_at=now)

    def close_superseded(self, old: RowMapping, new_id: str, now: datetime, *, valid_to: datetime,
                         actor: str | None, reason: str | None, how: str, **details: Any) -> bool:
        """Retire ``old`` in favour of ``new_id`` and link them; False if it was retired already."""
        if not rows.retire(self.conn, old["id"], at=now, reason="superseded", superseded_by=new_id,
                           valid_to=valid_to):
            return False
        rows.link(self.conn, new_id, old["id"], "supersedes", at=now, actor=actor)
        rows.record_events(self.conn, [rows.event(old["id"], "superseded", actor, now, by=new_id, how=how,
                                                  reason=reason, **details)])
        return True

    def update(self, msg: UpdateMemory) -> r.MemoryRecord:
        """A new version under the same id: the previous one is kept as a retired copy (``as_of`` before now sees
        it; :func:`rows.archive_version`), history keeps the previous values, a changed text is embedded again."""
        unknown = set(msg.changes) - set(UPDATABLE)
        if unknown:
            raise InvalidArgument(f"cannot update {sorted(unknown)}", hint=f"Updatable fields: {list(UPDATABLE)}.")
        if not msg.changes:
            raise InvalidArgument("nothing to update", hint=f"Give at least one of {list(UPDATABLE)}.")
        memory_id = self._own(msg.id, msg.filter)
        old = rows.load(self.conn, memory_id)
        if old["retired_at"] is not None:
            raise InvalidArgument(f"memory {old['id']} is retired and cannot be updated",
                                  hint="Update its current version instead (see memory_history).")
        changed = {k: v for k, v in msg.changes.items() if old[k] != v}
        now = self.clock()
        version = None
        if changed:
            version = rows.archive_version(self.conn, old, at=now)
            rows.update_fields(self.conn, memory_id, {**changed, "recorded_at": now})
        previous = {k: _jsonable(old[k]) for k in changed}
        rows.record_events(self.conn, [rows.event(memory_id, "updated", msg.actor, now, reason=msg.reason,
                                                  previous=previous, fields=sorted(changed), version=version)])
        record = rows.record(rows.load(self.conn, memory_id))
        if "content" in changed or "title" in changed:
            self.fresh.append((record.id, embed_text(record.title, record.content)))
        return record

    def delete(self, msg: DeleteMemory) -> r.MemoryDeleteResult:
        row = rows.load(self.conn, self._own(msg.id, msg.filter))
        now = self.clock()
        self.retired.append(row["id"])
        if msg.hard:
            self.erased.append(row["id"])
            rows.hard_delete(self.conn, row["id"])
            return r.MemoryDeleteResult(id=row["id"], deleted="hard")
        if row["retired_at"] is not None:
            raise InvalidArgument(f"memory {row['id']} is already retired ({row['retire_reason']})",
                                  hint="Use hard=true with confirm=true to erase it for good.")
        rows.retire(self.conn, row["id"], at=now, reason="deleted", valid_to=None)
        rows.record_events(self.conn, [rows.event(row["id"], "deleted", msg.actor, now, reason=msg.reason)])
        return r.MemoryDeleteResult(id=row["id"], deleted="soft")

    def restore(self, msg: RestoreMemory) -> r.MemoryRestoreResult:
        """Make a retired memory current; the current version of its chain, if any, is retired in its favour. An
        archived (or expired) memory is made visible again as well (:func:`archive_writes.unarchive`)."""
        row = rows.load(self.conn, self._own(msg.id, msg.filter))
        now = self.clock()
        archived = archive_writes.hidden(row, now)
        if row["retired_at"] is None and not archived:
            raise NotRetired(f"memory {row['id']} is current and not archived: there is nothing to restore")
        unarchived = archive_writes.unarchive(self.conn, row, now) if archived else None
        if archived:
            self.restored.append(row["id"])
        if row["retired_at"] is None:
            rows.record_events(self.conn, [rows.event(row["id"], "restored", msg.actor, now, reason=msg.reason,
                                                      was="archived", **(unarchived or {}))])
            return r.MemoryRestoreResult(id=row["id"], retired_id=None)
        newer = sorted(rows.visible_ids(self.conn, rows.version_chain(self.conn, row["id"]), m.c.retired_at.is_(None)))
        for other in newer:
            rows.retire(self.conn, other, at=now, reason="superseded", superseded_by=row["id"], valid_to=now)
        rows.unretire(self.conn, row["id"])
        self.retired += newer
        rows.record_events(self.conn, [rows.event(row["id"], "restored", msg.actor, now, reason=msg.reason,
                                                  was=row["retire_reason"], retired=newer, **(unarchived or {}))]
                           + [rows.event(i, "superseded", msg.actor, now, by=row["id"], how="restore",
                                         reason=msg.reason) for i in newer])
        return r.MemoryRestoreResult(id=row["id"], retired_id=newer[0] if newer else None)

    def pin(self, msg: PinMemory) -> r.MemoryPinResult:
        row = rows.load(self.conn, self._own(msg.id, msg.filter))
        if row["pinned"] != msg.pinned:
            now = self.clock()
            rows.update_fields(self.conn, row["id"], {"pinned": msg.pinned})
            rows.record_events(self.conn, [rows.event(row["id"], "pinned" if msg.pinned else "unpinned",
                                                      msg.actor, now)])
        return r.MemoryPinResult(id=row["id"], pinned=msg.pinned)

    def link(self, msg: LinkMemories) -> r.MemoryLinkResult:
        from_id = self._own(msg.from_id, msg.filter)
        to_id = rows.resolve_id(self.conn, msg.to_id, msg.filter)
        if from_id == to_id:
            raise InvalidArgument("a memory cannot be linked to itself")
        now = self.clock()
        created = rows.link(self.conn, from_id, to_id, msg.type, at=now, actor=msg.actor)
        if created:
            rows.record_events(self.conn, [rows.event(from_id, "linked", msg.actor, now, to=to_id, type=msg.type)])
        return r.MemoryLinkResult(from_id=from_id, to_id=to_id, type=msg.type, created=created)

    def unlink(self, msg: UnlinkMemories) -> MemoryUnlinkResult:
        from_id = self._own(msg.from_id, msg.filter)
        to_id = rows.resolve_id(self.conn, msg.to_id, msg.filter)
        removed = rows.unlink(self.conn, from_id, to_id, msg.type)
        if removed:
            now = self.clock()
            rows.record_events(self.conn, [rows.event(from_id, "unlinked", msg.actor, now, to=to_id, type=kind)
                                           for kind in removed])
        return MemoryUnlinkResult(from_id=from_id, to_id=to_id, removed=removed)


def _already_retired(old: RowMapping) -> InvalidArgument:
    return InvalidArgument(
        f"memory {old['id']} is already retired ({old['retire_reason']})",
        hint="Supersede the current version; memory_history lists the chain.",
        details={"superseded_by": old["superseded_by"]},
    )


def _jsonable(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime) else value

