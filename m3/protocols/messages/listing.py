"""Requests of the Searcher that list and count memories without a query (memory_list, memory_stats)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from m3.protocols.base import Request
from m3.protocols.messages.memory import Filtered

if TYPE_CHECKING:  # the tool module imports these requests, so replies are named in strings (see Request)
    from m3.protocols.tools import memory_lists  # noqa: F401


class ListMemories(Filtered, Request["memory_lists.MemoryListResult"]):
    """The memories ``filter`` sees, newest first: at most ``limit`` recorded before the row ``before``
    (an opaque cursor: the store's insertion order), current ones unless ``include_retired``."""

    limit: int = 50
    before: int | None = None
    include_retired: bool = False


class CountMemories(Filtered, Request["memory_lists.MemoryStatsResult"]):
    """How many memories ``filter`` sees, by type and scope; pinned, retired, oldest and newest."""
