"""The retrieval structures that fit a store, chosen from what its dialect says it can do."""

from __future__ import annotations

from m3.retrieval.dense import DenseLeg, MatrixLeg, SqlLeg
from m3.retrieval.supersession import CandidateIndex, Candidates
from m3.store.dialect import Dialect


def leg_for(dialect: Dialect) -> DenseLeg:
    """pgvector SQL where the database ranks vectors itself; else an in-memory matrix."""
    return SqlLeg() if dialect.nearest_in_sql else MatrixLeg()


def candidates_for(dialect: Dialect, exempt_types: frozenset[str]) -> Candidates:
    """An in-memory index where writes are serial (it stays exact); else advisory locks and SQL."""
    if dialect.serial_writes:
        return CandidateIndex(exempt_types)
    from m3.retrieval.pg_locks import LockedCandidates

    return LockedCandidates(exempt_types)
