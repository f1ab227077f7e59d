"""Which embedding model search uses, and the models a store is moving between.

The *active* model is the one whose vectors the Searcher compares queries
with. A change of configured model does not change it: the new model is
*building* until every current memory has a vector of it, and only then
becomes active in one transaction (the previous one is *retired*). So search
never mixes two models and never loses its vectors half-way.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Connection, or_, select, update

from m3.store import vectors
from m3.store.schema import embedding_models as t

#: Read before every search: built once (a statement built per call costs more than it takes to run).
_ACTIVE = select(t.c.model).where(t.c.state == "active")


def active(conn: Connection) -> str | None:
    """The model search uses, or None before any model was chosen."""
    row = conn.execute(_ACTIVE).first()
    return None if row is None else str(row[0])


def states(conn: Connection) -> dict[str, str]:
    """Every known model with its state (``active``, ``building``, ``retired``)."""
    return {str(model): str(state) for model, state in conn.execute(select(t.c.model, t.c.state).order_by(t.c.model))}


def mark_building(conn: Connection, model: str, dim: int, at: datetime) -> None:
    """Record that ``model`` is being filled in (unless it is already the active one)."""
    if states(conn).get(model) in (None, "retired"):
        _set(conn, model, dim, "building", at)


def activate(conn: Connection, model: str, dim: int, at: datetime, *, require_complete: bool) -> bool:
    """Make ``model`` the one search uses; False (and nothing changed) if ``require_complete`` and a
    current memory still lacks a vector of it. Call inside the writer's transaction."""
    if require_complete and vectors.count_missing(conn, model) > 0:
        return False
    conn.execute(update(t).where(t.c.state == "active", t.c.model != model).values(state="retired", updated_at=at))
    _set(conn, model, dim, "active", at)
    return True


def _set(conn: Connection, model: str, dim: int, state: str, at: datetime) -> None:
    """Give ``model`` (a new row or an existing one) ``state`` and ``dim``; ``updated_at`` is when they last
    changed, so a row that already has them is left as it is (an engine restarting rewrites nothing)."""
    values = {"state": state, "dim": dim, "updated_at": at}
    differs = or_(t.c.state != state, t.c.dim != dim)
    if conn.execute(update(t).where(t.c.model == model, differs).values(**values)).rowcount == 0 and \
            conn.execute(select(t.c.model).where(t.c.model == model)).first() is None:
        conn.execute(t.insert().values(model=model, **values))
