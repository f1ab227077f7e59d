"""Arguments, results and declarations of the ``entity`` domain tools: the entity graph (docs/entities.md).

Entities are what memories name (people, organisations, places, dates, amounts, titles, addresses ...), found
in the background by the EntityIndexer; each is seen only through the memories its reader may read.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import Field

from m3.protocols.base import ToolArgs, ToolResult, ToolSpec
from m3.protocols.messages import entities as msg
from m3.protocols.tools.fields import Identifier, Text, Timestamp

#: The most entities, mentions or relations one reply lists.
MAX_ENTITY_PAGE = 500
#: The deepest neighbourhood entity_graph walks, and the most nodes it returns.
MAX_GRAPH_DEPTH = 3
MAX_GRAPH_NODES = 200

EntityType = Identifier


class EntitySummary(ToolResult):
    id: str
    name: str = Field(description="The canonical name: dates as YYYY-MM-DD, amounts as 'USD 1200', e-mails lower case.")
    type: str = Field(description="name, date, money, title, email, url, role, or a configured type.")
    scope: str = Field(description="agent: named only in its agent's private memories; user or org: shared.")
    agent_id: str | None
    user_id: str | None
    aliases: list[str] = Field(description="Other spellings: as written in the memories you may read, and the "
                                           "names of entities merged into it.")
    mentions: int = Field(description="How many mentions in memories you may read.")
    created_at: Timestamp
    updated_at: Timestamp


class EntityListResult(ToolResult):
    count: int
    items: list[EntitySummary]


class EntitySearchArgs(ToolArgs):
    query: Text = Field(description="Part of the name, any case (e.g. 'acme', 'alice smith', '2026-03').")
    type: EntityType | None = Field(None, description="Only entities of this type.")
    limit: int = Field(20, ge=1, le=MAX_ENTITY_PAGE)


ENTITY_SEARCH = ToolSpec(
    name="entity_search", domain="entity", args=EntitySearchArgs, result=EntityListResult, read_only=True,
    message=msg.SearchEntities, actor="entities",
    description=(
        "Find people, organisations, places, dates, amounts, titles or addresses your memories name, by part of "
        "the name, e.g. 'acme' when you want everything known about Acme Corp. Exact names first, then the most "
        "mentioned. Continue with entity_get for the memories that name one."
    ),
)


class EntityListArgs(ToolArgs):
    type: EntityType | None = Field(None, description="Only entities of this type.")
    limit: int = Field(50, ge=1, le=MAX_ENTITY_PAGE)
    offset: int = Field(0, ge=0, le=1_000_000, description="Skip this many (the next page: offset + limit).")


ENTITY_LIST = ToolSpec(
    name="entity_list", domain="entity", args=EntityListArgs, result=EntityListResult, read_only=True,
    message=msg.ListEntities, actor="entities",
    description=(
        "List the entities your memories name, the most mentioned first, optionally of one type (e.g. every "
        "person, or every date), a page at a time. Use it to see who and what the store knows about; use "
        "entity_search to find one by name."
    ),
)


class MentionRecord(ToolResult):
    memory_id: str
    span_start: int = Field(description="Where in the memory's indexed text (title, a blank line, content).")
    span_end: int
    surface: str = Field(description="The name as the memory wrote it.")
    snippet: str = Field(description="The text around the mention.")


class RelationRecord(ToolResult):
    id: str
    subject_id: str
    subject_name: str
    predicate: str = Field(description="e.g. works_at, moved_to, lives_in, joined, is_my, ceo_of.")
    object_id: str
    object_name: str
    valid_from: Timestamp | None = Field(description="When it holds from: the valid time of the memory stating it.")
    valid_to: Timestamp | None
    memory_id: str = Field(description="The memory that states it.")


class EntityGetArgs(ToolArgs):
    id: Identifier = Field(description="The entity's id (from entity_search or entity_list).")
    mention_limit: int = Field(50, ge=0, le=MAX_ENTITY_PAGE, description="The most mentions listed.")


class EntityDetails(EntitySummary):
    merged_from: str | None = Field(None, description="Set when the id asked for was merged into this entity.")
    mention_list: list[MentionRecord] = Field(description="Where it is named, the most recent memories first.")
    relations: list[RelationRecord] = Field(description="Relations with it as subject or object.")


def _mentioned(res: EntityDetails) -> Iterable[tuple[str, str]]:
    return (("memory", memory_id) for memory_id in dict.fromkeys(
        [m.memory_id for m in res.mention_list] + [r.memory_id for r in res.relations]))


ENTITY_GET = ToolSpec(
    name="entity_get", domain="entity", args=EntityGetArgs, result=EntityDetails, read_only=True,
    message=msg.GetEntity, actor="entities", audit=_mentioned,
    description=(
        "Open one entity: its name, type and spellings, the memories that name it (with the text around each "
        "mention) and its relations (who works where, moved where, is whose manager, since when). Use it after "
        "entity_search to gather everything about one person or thing; memory_get opens a memory it lists."
    ),
)


class EntityGraphArgs(ToolArgs):
    id: Identifier = Field(description="The entity to start from.")
    depth: int = Field(2, ge=1, le=MAX_GRAPH_DEPTH, description=f"How many hops; at most {MAX_GRAPH_DEPTH}.")
    max_nodes: int = Field(50, ge=1, le=MAX_GRAPH_NODES, description=f"The most entities; at most {MAX_GRAPH_NODES}.")
    co_mentions: bool = Field(True, description="Also link entities named in the same memory.")


class GraphNode(EntitySummary):
    depth: int = Field(description="Hops from the start.")


class GraphEdge(ToolResult):
    source: str
    target: str
    kind: str = Field(description="relation (a stated relation, source is its subject) or co_mention.")
    predicate: str | None
    memory_id: str = Field(description="A memory that states the relation or names both.")
    weight: int = Field(description="How many memories state or show it.")


class EntityGraphResult(ToolResult):
    root: str
    nodes: list[GraphNode]
    edges: list[GraphEdge]
    truncated: bool = Field(description="True when max_nodes cut the neighbourhood short.")


ENTITY_GRAPH = ToolSpec(
    name="entity_graph", domain="entity", args=EntityGraphArgs, result=EntityGraphResult, read_only=True,
    message=msg.EntityGraphOf, actor="entities",
    description=(
        "Walk the neighbourhood of one entity: the entities related to it or named together with it, to a depth "
        "of up to 3 hops and at most max_nodes entities, e.g. to see who is connected to a customer or a project. "
        "Edges name a memory that shows them."
    ),
)


class EntityRelationsArgs(ToolArgs):
    entity_id: Identifier | None = Field(None, description="Only relations with this entity as subject or object.")
    predicate: Identifier | None = Field(None, description="Only this relation, e.g. works_at.")
    limit: int = Field(100, ge=1, le=MAX_ENTITY_PAGE)


class EntityRelationsResult(ToolResult):
    count: int
    items: list[RelationRecord]


ENTITY_RELATIONS = ToolSpec(
    name="entity_relations", domain="entity", args=EntityRelationsArgs, result=EntityRelationsResult,
    read_only=True, message=msg.ListRelations, actor="entities",
    description=(
        "List stated relations between entities (X works_at Y, X moved_to Y, X is_my manager ...) with the time "
        "they hold from and the memory that states them, e.g. every works_at to answer 'who works where', or all "
        "of one entity's. The newest first."
    ),
)


class EntityMergeArgs(ToolArgs):
    source_id: Identifier = Field(description="The entity to fold in (e.g. a misspelling or a short form).")
    target_id: Identifier = Field(description="The entity that stays.")


class EntityMergeResult(ToolResult):
    source_id: str
    target: EntitySummary
    moved_mentions: int
    moved_relations: int
    at: Timestamp
    by: str | None


ENTITY_MERGE = ToolSpec(
    name="entity_merge", domain="entity", args=EntityMergeArgs, result=EntityMergeResult,
    message=msg.MergeEntities, actor="writer",
    description=(
        "Merge two entities that are one thing, e.g. 'Bob' and 'Robert Miller', or 'Acme' and 'Acme Corp': the "
        "source's mentions and relations move to the target, its name becomes an alias, and later mentions of it "
        "go to the target too. Both must have the same owner. Recorded; entity_unmerge undoes it."
    ),
)


class EntityUnmergeArgs(ToolArgs):
    source_id: Identifier = Field(description="The entity that was merged into another (entity_merge's source_id).")


ENTITY_UNMERGE = ToolSpec(
    name="entity_unmerge", domain="entity", args=EntityUnmergeArgs, result=EntityMergeResult,
    message=msg.UnmergeEntities, actor="writer",
    description=(
        "Undo an entity_merge that was wrong: the mentions and relations it moved go back to the source entity, "
        "which stands on its own again. The reply's target is the entity it was merged into."
    ),
)


class EntityExtractArgs(ToolArgs):
    limit: int | None = Field(None, ge=1, le=1_000_000, description=(
        "The most memories to look at in this call; default: the whole backlog."))


class EntityExtractResult(ToolResult):
    memories: int = Field(description="Memories looked at: new ones, and ones changed, retired or restored since.")
    mentions: int = Field(description="Mentions stored.")
    relations: int = Field(description="Relations stored.")
    entities_created: int
    dropped_mentions: int = Field(description="Mentions removed because their memory changed, was retired or deleted.")
    dropped_entities: int = Field(description="Entities removed because no memory names them any more.")
    remaining: int = Field(description="Memories still waiting, new or changed (0 unless limit stopped the pass).")


ENTITY_EXTRACT = ToolSpec(
    name="entity_extract", domain="entity", args=EntityExtractArgs, result=EntityExtractResult,
    message=msg.ExtractEntities, actor="entities",
    description=(
        "Run entity extraction now over the memories written since the last pass, instead of waiting for the "
        "background indexer (which runs every few seconds), and return what it did. Use it right after writing "
        "memories when the next call needs their entities, or in scripts and tests."
    ),
)

ENTITY_TOOLS: tuple[ToolSpec, ...] = (ENTITY_SEARCH, ENTITY_GET, ENTITY_GRAPH, ENTITY_LIST, ENTITY_RELATIONS,
                                      ENTITY_MERGE, ENTITY_UNMERGE, ENTITY_EXTRACT)


def summary(row: dict[str, Any]) -> EntitySummary:
    """An :class:`EntitySummary` of a store row (extra keys ignored)."""
    return EntitySummary(**{k: row[k] for k in EntitySummary.model_fields})
