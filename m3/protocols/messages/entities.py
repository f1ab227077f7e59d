"""Requests about the entity graph: reads (the EntityIndexer's connection), the indexing pass and merges
(through the Writer). docs/entities.md."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from m3.protocols.base import Message, Request
from m3.protocols.messages.memory import Change, Filtered

if TYPE_CHECKING:  # the tool module imports these requests, so replies are named in strings (see Request)
    from m3.protocols.tools import entities  # noqa: F401


def normalise(name: str) -> str:
    """The form in which two entity names are the same: case-folded, inner whitespace collapsed."""
    return " ".join(name.casefold().split())


class FoundMention(Message):
    """One mention extraction found: canonical name, type, span and the text as written."""

    name: str
    type: str
    start: int
    end: int
    surface: str


class FoundRelation(Message):
    """``subject predicate object``, the two ends as positions in the memory's ``mentions``."""

    subject: int
    predicate: str
    object: int


class IndexedMemory(Message):
    """What extraction found in one memory, with the owner and valid time its entities and relations take."""

    memory_id: str
    scope: str
    agent_id: str | None
    user_id: str | None
    valid_from: datetime | None
    valid_to: datetime | None
    mentions: tuple[FoundMention, ...]
    relations: tuple[FoundRelation, ...]


class IndexEntities(Request[dict[str, int]]):
    """Writer: replace the mentions and relations of ``memories`` (those still current), drop those of the
    memories ``again`` names (read again: changed, retired or restored; the current ones are in ``memories`` too)
    and the entities left unmentioned, delete the ``entity_stale`` notes ``notes`` and move the watermark to
    ``watermark``; counts per kind."""

    memories: tuple[IndexedMemory, ...]
    watermark: int
    again: tuple[str, ...] = ()
    notes: tuple[int, ...] = ()


class ExtractEntities(Request["entities.EntityExtractResult"]):
    """EntityIndexer: run the indexing pass now over at most ``limit`` memories of the backlog (None: all)."""

    limit: int | None = None


class SearchEntities(Filtered, Request["entities.EntityListResult"]):
    query: str
    type: str | None = None
    limit: int = 20


class ListEntities(Filtered, Request["entities.EntityListResult"]):
    type: str | None = None
    limit: int = 50
    offset: int = 0


class GetEntity(Filtered, Request["entities.EntityDetails"]):
    id: str
    mention_limit: int = 50


class EntityGraphOf(Filtered, Request["entities.EntityGraphResult"]):
    id: str
    depth: int = 2
    max_nodes: int = 50
    co_mentions: bool = True


class ListRelations(Filtered, Request["entities.EntityRelationsResult"]):
    entity_id: str | None = None
    predicate: str | None = None
    limit: int = 100


class MergeEntities(Change, Request["entities.EntityMergeResult"]):
    """Writer: fold ``source_id`` into ``target_id`` (both visible to the caller, same owner), recorded."""

    source_id: str
    target_id: str


class UnmergeEntities(Change, Request["entities.EntityMergeResult"]):
    """Writer: undo the latest merge of ``source_id``: its mentions and relations go back to it."""

    source_id: str
