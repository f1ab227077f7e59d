"""Similarity supersession, run by the Writer when vectors arrive.

Rule: among current memories of the same type, agent and user whose vectors
(same model) have cosine above the threshold and whose text differs, the
most recently recorded one stays current and the others are closed, linked
by ``supersedes``. Exempt types (events, conversation turns) never
supersede: repeating something is not correcting it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

import numpy as np
from sqlalchemy import Connection, RowMapping

from m3.protocols.messages import StoreVectors
from m3.store import memories as rows
from m3.store import vectors
from m3.store.writes import MemoryWrites


@dataclass(frozen=True)
class SupersessionPolicy:
    threshold: float
    exempt_types: frozenset[str]


def supersede_similar(conn: Connection, msg: StoreVectors, policy: SupersessionPolicy,
                      clock: Callable[[], datetime]) -> list[tuple[str, str]]:
    """Store the vectors, then apply the rule; returns (retired id, winner id) pairs."""
    matrix = np.frombuffer(msg.vectors, dtype="<f4").reshape(len(msg.ids), msg.dim)
    kept = vectors.store(conn, msg.model, msg.dim, msg.ids, matrix, clock())
    if not msg.supersede or not kept:
        return []
    by_id = rows.rows_by_ids(conn, kept)
    position = {memory_id: i for i, memory_id in enumerate(msg.ids)}
    closed: list[tuple[str, str]] = []
    ops = MemoryWrites(conn, clock)
    for row in sorted(by_id.values(), key=lambda r: r["recorded_at"]):
        if row["type"] in policy.exempt_types:
            continue
        current = rows.load(conn, row["id"])
        if current["retired_at"] is not None:
            continue
        closed += _apply_rule(conn, ops, current, matrix[position[row["id"]]], msg.model, policy)
    return closed


def _apply_rule(conn: Connection, ops: MemoryWrites, row: RowMapping, vector: np.ndarray, model: str,
                policy: SupersessionPolicy) -> list[tuple[str, str]]:
    ids, mat = vectors.vectors_for(conn, model, rows.same_owner_clause(row))
    if not ids:
        return []
    sims = mat @ vector
    closed: list[tuple[str, str]] = []
    for idx in np.argsort(-sims):
        cosine = float(sims[idx])
        if cosine <= policy.threshold:
            break
        other = rows.load(conn, ids[idx])
        if other["content_hash"] == row["content_hash"] or other["retired_at"] is not None:
            continue
        now = ops.clock()
        if other["recorded_at"] < row["recorded_at"]:
            if ops.close_superseded(other, row["id"], now, valid_to=row["valid_from"], actor="m3:supersession",
                                    reason=None, how="similarity", cosine=round(cosine, 4)):
                closed.append((other["id"], row["id"]))
        else:  # a newer version already exists: this one is the stale one
            if ops.close_superseded(row, other["id"], now, valid_to=other["valid_from"],
                                    actor="m3:supersession", reason=None, how="similarity",
                                    cosine=round(cosine, 4)):
                closed.append((row["id"], other["id"]))
            break
    return closed
