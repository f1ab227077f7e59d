"""Reads around one memory without a query: its graph of links (memory_graph) and content verification
(memory_verify)."""

from __future__ import annotations

from sqlalchemy import Connection, select

from m3.protocols.messages.memory import GetGraph, VerifyMemories
from m3.protocols.tools import memory as r
from m3.store import id_reads, visibility
from m3.store import memories as rows
from m3.store.filters import isolation_clause
from m3.store.schema import memories as m


def graph(conn: Connection, msg: GetGraph) -> r.MemoryGraphResult:
    """The memories linked to ``msg.id`` up to ``msg.depth`` links away, through memories the reader may see."""
    start = rows.resolve_id(conn, msg.id, msg.filter)
    visible = isolation_clause(msg.filter)
    seen, frontier, edges = {start}, [start], {}
    for _ in range(msg.depth):
        found = rows.edges_of(conn, frontier)
        # Only through memories the reader may see: a hidden memory must not connect two visible ones.
        admitted = visibility.shown(conn, (end for e in found for end in (e["from_id"], e["to_id"])
                                                if end not in seen), visible)
        frontier = []
        for e in found:
            if {e["from_id"], e["to_id"]} <= seen | admitted:
                edges[(e["from_id"], e["to_id"], e["type"])] = e
            for end in (e["from_id"], e["to_id"]):
                if end not in seen and end in admitted:
                    seen.add(end)
                    frontier.append(end)
        if not frontier:
            break
    nodes = id_reads.rows_by_ids(conn, sorted(seen), visible)
    return r.MemoryGraphResult(
        nodes=[r.GraphNode(id=row["id"], title=row["title"], type=row["type"], current=row["retired_at"] is None)
               for row in nodes.values()],
        edges=[r.GraphEdge(from_id=f, to_id=t, type=ty) for (f, t, ty) in edges if f in nodes and t in nodes],
    )

def verify(conn: Connection, msg: VerifyMemories) -> r.MemoryVerifyResult:
    """Memories the reader may see (or the one named) whose content no longer matches its stored hash."""
    query = select(m.c.id, m.c.content, m.c.content_hash).where(isolation_clause(msg.filter))
    if msg.id is not None:
        query = query.where(m.c.id == rows.resolve_id(conn, msg.id, msg.filter))
    checked, bad = 0, []
    for memory_id, content, digest in conn.execute(query.order_by(m.c.seq)):
        checked += 1
        if rows.content_hash(content) != digest:
            bad.append(memory_id)
    return r.MemoryVerifyResult(checked=checked, ok=checked - len(bad), mismatched=bad)
