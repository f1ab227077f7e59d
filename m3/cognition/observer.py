"""The Observer pass (``observe``): what users state in conversations becomes ``observation`` memories.

Each tick reads what is new since the pass's watermark (``{"chat": <chatlog seq>, "memory": <memories seq>}``):
the users' turns of the chat log and the ``conversation`` memories (those whose ``metadata.role`` is absent or
``user``; an assistant's turn is read past, never observed), at most ``ctx.budget`` of them. In each it finds
the statements by the user (:mod:`m3.cognition.statements`: preferences, facts about themselves, decisions) —
by the rules, or with ``ctx.llm`` by the model, one call per batch of :data:`BATCH` items within
``ctx.llm_calls``; a batch whose call fails (``llm_error``) or whose answer does not validate falls back to the
rules, and a quote the model gives that is not in the item is dropped (the model may find, never invent).

An observation quotes the user (its content is a standalone sentence), is owned like its source (a private
turn gives an observation private to that agent), carries its kind and provenance in ``metadata`` and, when it
comes from a memory, a ``derived_from`` link to it. One Writer request (:class:`RecordObservations`) commits the
observations and the new watermark together, and the Writer skips any observation its owner already holds, so
a rerun, a later tick or a crash between ticks never writes one twice.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar

from sqlalchemy import Connection, select

from m3.cognition.passes import ChatModel, PassContext, PassStep
from m3.cognition.statements import KINDS, Statement, normalised, observation_key, quote, statements
from m3.errors import LlmError
from m3.protocols.messages.memory import NewMemory
from m3.protocols.messages.observations import NewObservation, ObservationsRecorded, RecordObservations
from m3.store import loop_state
from m3.store.schema import chatlog as c
from m3.store.schema import memories as m

log = logging.getLogger(__name__)

#: Items sent to the model in one call.
BATCH = 16
#: The importance of an observation (a user's own statement weighs a little above an average note).
IMPORTANCE = 0.6
ACTOR = "observer"

SYSTEM = (
    "You read turns a user wrote in conversations with an assistant and list what the user states about "
    "themselves: preferences (likes, dislikes, favourites), facts about their own life (where they live or work, "
    "what they have, who their family are) and decisions they have made. Ignore questions, requests, "
    "hypotheticals and anything the assistant said. Copy each statement's words exactly from the item it is in; "
    "never paraphrase or add anything."
)
SCHEMA = ('{"observations": [{"item": <number of the item>, "kind": "preference" | "fact" | "decision", '
          '"text": "<the user\'s words, copied exactly>"}]} (an empty list when there is none)')


@dataclass(frozen=True)
class Item:
    """One user turn read: its text, owner, time and where it came from."""

    text: str
    scope: str
    agent_id: str | None
    user_id: str | None
    conversation_id: str | None
    at: datetime
    provenance: dict[str, Any]
    memory_id: str | None = None


class ObservePass:
    """The Observer: see the module docstring. Settings (``loop.observe.*``): ``importance``, ``batch``."""

    name: ClassVar[str] = "observe"

    def step(self, conn: Connection, ctx: PassContext) -> PassStep:
        mark = loop_state.watermark(conn, self.name, {}) or {}
        chat_seq, memory_seq = int(mark.get("chat", 0)), int(mark.get("memory", 0))
        budget = max(1, ctx.budget)
        chats = _chat_rows(conn, chat_seq, budget + 1)
        mems = _memory_rows(conn, memory_seq, budget + 1)
        n_chat, n_mem = share(budget, len(chats), len(mems))
        more = n_chat < len(chats) or n_mem < len(mems)
        chats, mems = chats[:n_chat], mems[:n_mem]
        if not chats and not mems:
            return PassStep(seen=0)
        items = [_chat_item(row) for row in chats] + [i for i in map(_memory_item, mems) if i is not None]
        found, calls = self._statements(items, ctx)
        observations = tuple(_observation(item, st, by, ctx.settings) for item, st, by in found)
        watermark = {"chat": chats[-1].seq if chats else chat_seq, "memory": mems[-1].seq if mems else memory_seq}
        request = RecordObservations(pass_name=self.name, observations=observations, watermark=watermark,
                                     actor=ACTOR)
        return PassStep(seen=len(chats) + len(mems), writes=(request,), more=more, llm_calls=calls)

    def produced(self, replies: Sequence[Any]) -> int:
        return sum(len(r.created) for r in replies if isinstance(r, ObservationsRecorded))

    def _statements(self, items: list[Item], ctx: PassContext) -> tuple[list[tuple[Item, Statement, str]], int]:
        """(item, statement, "model" | "rules") for every statement found, and the model calls made."""
        found: list[tuple[Item, Statement, str]] = []
        calls = 0
        size = max(1, int(ctx.settings.get("batch", BATCH)))
        for start in range(0, len(items), size):
            batch = items[start:start + size]
            answer: list[list[Statement]] | None = None
            if ctx.llm is not None and calls < ctx.llm_calls:
                calls += 1
                answer = ask_model(ctx.llm, [item.text for item in batch])
            by = "rules" if answer is None else "model"
            per_item = answer if answer is not None else [statements(item.text) for item in batch]
            found += [(item, st, by) for item, sts in zip(batch, per_item, strict=True) for st in sts]
        return found, calls


def share(budget: int, chats: int, mems: int) -> tuple[int, int]:
    """How many chat turns and memories a tick of ``budget`` reads when that many wait: half each, and what
    one side leaves unused goes to the other (neither source can starve the other)."""
    half = budget // 2
    n_chat = min(chats, max(half, budget - min(mems, budget - half)))
    return n_chat, min(mems, budget - n_chat)


def ask_model(llm: ChatModel, texts: list[str]) -> list[list[Statement]] | None:
    """The model's statements per text, or None when the call failed or the answer does not validate (the
    caller uses the rules). A quote that is not in its text is dropped."""
    numbered = "\n".join(f"[{n}] {json.dumps(text[:4000])}" for n, text in enumerate(texts, 1))
    try:
        answer = llm.complete_json(SYSTEM, f"Items:\n{numbered}", schema_hint=SCHEMA)
    except LlmError as exc:
        log.info("observer: the chat model failed (%s); using the rules for %d items", exc.message, len(texts))
        return None
    entries = answer.get("observations") if isinstance(answer, dict) else answer
    if not isinstance(entries, list):
        log.info("observer: the model's answer has no observations list; using the rules")
        return None
    per_item: list[list[Statement]] = [[] for _ in texts]
    for entry in entries:
        parsed = _entry(entry, len(texts))
        if parsed is None:
            log.info("observer: the model's answer has a malformed entry %.200r; using the rules", entry)
            return None
        n, kind, said = parsed
        said_n = normalised(said)
        if said_n and said_n in normalised(texts[n]) and all(normalised(st.quote) != said_n for st in per_item[n]):
            per_item[n].append(Statement(kind, quote(said)))
    return per_item


def _entry(entry: Any, n_items: int) -> tuple[int, str, str] | None:
    if not isinstance(entry, dict):
        return None
    n, kind, text = entry.get("item"), entry.get("kind"), entry.get("text")
    if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= n_items:
        return None
    if kind not in KINDS or not isinstance(text, str) or not text.strip():
        return None
    return n - 1, kind, text.strip()


# -- reading ------------------------------------------------------------------------------------------------


def _chat_rows(conn: Connection, after: int, limit: int) -> list[Any]:
    return list(conn.execute(
        select(c.c.seq, c.c.id, c.c.conversation_id, c.c.content, c.c.agent_id, c.c.turn, c.c.at, c.c.scope)
        .where(c.c.seq > after, c.c.role == "user", c.c.redacted_at.is_(None)).order_by(c.c.seq).limit(limit)))


def _memory_rows(conn: Connection, after: int, limit: int) -> list[Any]:
    # ``type || ''``: SQLite (no statistics) would otherwise read every conversation memory through the type
    # index and sort them on every batch, instead of walking on from ``after`` by rowid.
    return list(conn.execute(
        select(m.c.seq, m.c.id, m.c.content, m.c.metadata, m.c.scope, m.c.agent_id, m.c.user_id,
               m.c.conversation_id, m.c.valid_from)
        .where(m.c.seq > after, m.c.type.concat("") == "conversation", m.c.retired_at.is_(None))
        .order_by(m.c.seq).limit(limit)))


def _chat_item(row: Any) -> Item:
    return Item(text=row.content, scope=row.scope, agent_id=row.agent_id, user_id=None,
                conversation_id=row.conversation_id, at=row.at,
                provenance={"chat_id": row.id, "conversation_id": row.conversation_id, "turn": row.turn})


def _memory_item(row: Any) -> Item | None:
    """The item of a conversation memory, or None when it records someone else's turn (an assistant's)."""
    meta = row.metadata if isinstance(row.metadata, dict) else {}
    if meta.get("role", "user") != "user":
        return None
    provenance = {"memory_id": row.id, "conversation_id": row.conversation_id}
    if "turn" in meta:
        provenance["turn"] = meta["turn"]
    return Item(text=row.content, scope=row.scope, agent_id=row.agent_id, user_id=row.user_id,
                conversation_id=row.conversation_id, at=row.valid_from, provenance=provenance, memory_id=row.id)


def _observation(item: Item, st: Statement, by: str, settings: Any) -> NewObservation:
    memory = NewMemory(
        type="observation", content=st.content, metadata={"kind": st.kind, "quote": st.quote, "by": by,
                                                          "source": item.provenance},
        scope=item.scope, agent_id=item.agent_id, user_id=item.user_id,
        importance=float(settings.get("importance", IMPORTANCE)), valid_from=item.at,
        conversation_id=item.conversation_id, source=observation_key(st.quote))
    return NewObservation(memory=memory, derived_from=item.memory_id)
