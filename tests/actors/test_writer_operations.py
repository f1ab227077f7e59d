"""The Writer's one operation table: every change has exactly one entry saying how it runs."""

from __future__ import annotations

import inspect

from m3.actors.writer import OPERATIONS
from m3.protocols.base import Message
from m3.protocols.messages import (
    admin,
    archive,
    conflicts,
    conversations,
    coordination,
    entities,
    files,
    governance,
    loop,
    memory,
    observations,
    rollup,
    sync,
)


def concrete_subclasses(base: type[Message]) -> set[type[Message]]:
    found: set[type[Message]] = set()
    for cls in base.__subclasses__():
        found |= {cls} | concrete_subclasses(cls)
    return found


def test_every_change_memories_tasks_shares_conflicts_has_an_entry_in_the_writers_operation_table() -> None:
    assert concrete_subclasses(memory.Change) <= set(OPERATIONS)


def test_memory_changes_refusable_part_way_run_in_savepoints_and_new_writes_do_not() -> None:
    changes = {memory.SupersedeMemory, memory.UpdateMemory, memory.DeleteMemory, memory.RestoreMemory,
               memory.PinMemory, memory.UnpinMemory, memory.LinkMemories}
    assert {cls for cls in changes if OPERATIONS[cls].refusable} == changes
    assert not any(OPERATIONS[cls].refusable for cls in (memory.WriteMemories, memory.StoreVectors, memory.WriteChat))


def test_only_writes_and_vectors_merge_with_their_neighbours() -> None:
    merged = {memory.WriteMemories, memory.StoreVectors}
    assert {cls for cls, op in OPERATIONS.items() if op.mergeable is not None} == merged
    assert all(OPERATIONS[cls].run_all is not None for cls in merged)


def test_the_table_holds_only_messages_of_the_protocol_modules() -> None:
    modules = {coordination.__name__, memory.__name__, conflicts.__name__, governance.__name__, entities.__name__,
               files.__name__, conversations.__name__, admin.__name__, loop.__name__, observations.__name__,
               rollup.__name__, archive.__name__, sync.__name__}
    assert all(inspect.isclass(cls) and cls.__module__ in modules for cls in OPERATIONS)
