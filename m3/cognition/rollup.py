"""Belief roll-up (opt-in): related notes of one owner become one ``belief`` linked to them by ``consolidates``.

A :class:`~m3.cognition.passes.LoopPass` (docs/cognitive-loop.md "Belief roll-up (opt-in)"). Its watermark,
``{"model", "seq"}``, is the last vector of the active embedding model it has looked at: a note counts once it
has a vector, and a note written again (a new version, a new vector) is looked at again. On each tick it
reads at most ``ctx.budget`` vectors after the watermark; every owner (scope, agent, user) one of them belongs
to is clustered again over its ``max_group`` most recent notes (:mod:`m3.cognition.rollup_clusters`), and each
new or grown cluster becomes a belief (:mod:`m3.cognition.rollup_text`). The beliefs and the new watermark go
to the Writer as one :class:`~m3.protocols.messages.rollup.CommitRollup`. Another active model starts the
watermark again from the beginning (the clusters found are then compared with the beliefs there are).

Sources stay current and findable; nothing is deleted. A belief has its sources' owner, so it is exactly as
visible as each of them.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from sqlalchemy import Connection

from m3.cognition.passes import ChatModel, PassContext, PassStep
from m3.cognition.rollup_clusters import Plan, clusters, plan
from m3.cognition.rollup_text import MODEL_SCHEMA, extractive_summary, model_prompt, parse_model_summary, title_for
from m3.config import Config, setting
from m3.errors import M3Error
from m3.protocols.messages.rollup import CommitRollup, NewBelief, RollupWritten
from m3.store import embedding_models, loop_state, rollups

log = logging.getLogger(__name__)

NAME = "rollup"


@dataclass(frozen=True)
class RollupSettings:
    """``loop.rollup.*`` (m3/config.py), read from ``ctx.settings`` with the declared defaults."""

    types: tuple[str, ...]
    min_similarity: float
    min_cluster: int
    max_cluster: int
    max_group: int
    max_summary_chars: int

    @classmethod
    def of(cls, given: Mapping[str, Any]) -> RollupSettings:
        def value(name: str) -> Any:
            return given.get(name, setting(f"loop.{NAME}.{name}").default)

        return cls(types=tuple(value("types")), min_similarity=float(value("min_similarity")),
                   min_cluster=max(2, int(value("min_cluster"))), max_cluster=max(2, int(value("max_cluster"))),
                   max_group=max(2, int(value("max_group"))),
                   max_summary_chars=max(80, int(value("max_summary_chars"))))


@dataclass
class _Calls:
    """The model calls this tick may still make."""

    left: int
    made: int = 0


class RollupPass:
    """The roll-up pass; stateless (everything it knows is in the store, its settings come in ``ctx``)."""

    name: ClassVar[str] = NAME

    @classmethod
    def from_config(cls, config: Config) -> RollupPass:
        """The pass for the loop's registry (``FACTORIES["rollup"]``); ``loop.rollup.*`` reach it per tick."""
        return cls()

    def step(self, conn: Connection, ctx: PassContext) -> PassStep:
        """Read what is new and decide the beliefs (inside the caller's read transaction); see the module."""
        model = embedding_models.active(conn)
        if model is None:
            return PassStep(seen=0)  # nothing has a vector yet
        settings = RollupSettings.of(ctx.settings)
        mark = loop_state.watermark(conn, NAME, {}) or {}
        after = int(mark.get("seq", 0)) if mark.get("model") == model else 0
        found = rollups.new_vectors(conn, model, after, settings.types, max(1, ctx.budget))
        if not found:
            return PassStep(seen=0)
        calls = _Calls(left=ctx.llm_calls if ctx.llm is not None else 0)
        beliefs: list[NewBelief] = []
        for owner in dict.fromkeys(v.owner for v in found if v.owner is not None):
            beliefs += self._owner(conn, model, owner, settings, ctx.llm, calls)
        commit = CommitRollup(beliefs=tuple(beliefs), watermark={"model": model, "seq": found[-1].seq})
        return PassStep(seen=len(found), writes=(commit,), more=len(found) >= ctx.budget, llm_calls=calls.made)

    def produced(self, replies: Sequence[Any]) -> int:
        """Beliefs written (new clusters and new versions)."""
        return sum(len(reply.created) for reply in replies if isinstance(reply, RollupWritten))

    def _owner(self, conn: Connection, model: str, owner: rollups.Owner, settings: RollupSettings,
               llm: ChatModel | None, calls: _Calls) -> list[NewBelief]:
        group = rollups.group_notes(conn, model, owner, settings.types, settings.max_group)
        found = clusters(group.vectors, settings.min_similarity, settings.min_cluster, settings.max_cluster)
        if not found:
            return []
        plans = plan(group.vectors, group.ids, found, rollups.current_beliefs(conn, owner),
                     rollups.declined(conn, owner), settings.min_cluster, settings.max_cluster)
        return [_belief(owner, [group.rows[i] for i in p.members], p, settings, llm, calls) for p in plans]


def _belief(owner: rollups.Owner, members: list[dict[str, Any]], p: Plan, settings: RollupSettings,
            llm: ChatModel | None, calls: _Calls) -> NewBelief:
    """The belief of one plan: the model's text when a call is left and its answer passes, else extractive."""
    texts = [row["content"] for row in members]
    title, content, method = title_for(texts, [row["title"] for row in members]), "", "extractive"
    if llm is not None and calls.left > 0:
        calls.left -= 1
        calls.made += 1
        written = _ask_model(llm, texts, settings.max_summary_chars)
        if written is not None:
            title, content, method = written[0] or title, written[1], "model"
    if not content:
        content = extractive_summary(texts, settings.max_summary_chars)
    scope, agent_id, user_id = owner
    return NewBelief(title=title, content=content, scope=scope, agent_id=agent_id, user_id=user_id,
                     importance=max(float(row["importance"]) for row in members),
                     sources=tuple(row["id"] for row in members), replaces=p.replaces, method=method)


def _ask_model(llm: ChatModel, texts: list[str], max_chars: int) -> tuple[str | None, str] | None:
    """The model's (title, summary), or None (the extractive text is used) when it fails or answers badly."""
    system, user = model_prompt(texts, max_chars)
    try:
        answer = llm.complete_json(system, user, schema_hint=MODEL_SCHEMA)
    except M3Error as exc:  # llm_error: the endpoint failed or answered no JSON
        log.info("roll-up: the model did not answer (%s); using the extractive summary", exc.code)
        return None
    parsed = parse_model_summary(answer, max_chars)
    if parsed is None:
        log.info("roll-up: the model's answer was not a usable summary; using the extractive summary")
    return parsed
