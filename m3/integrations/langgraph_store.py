"""LangGraph: a ``BaseStore`` whose items are m3 memories (extra ``m3-memory[langchain]``).

Mapping. An item ``(namespace, key) -> value`` is one current memory owned by the client's agent:

- ``content``: the text searched (BM25 at once, vectors once embedded): the item's ``index`` fields, else
  the store's ``index_fields``, joined; else the whole value as JSON;
- ``metadata["langgraph"]``: ``{"namespace", "key", "value", "created_at"}``, the value exactly as put;
- ``conversation_id``: the item's token (``lgk`` + 20 hex digits of the SHA-256 of namespace and key), so
  ``get`` is an exact SQL filter and equal values under two keys never deduplicate into one memory;
- ``title``: the item token and one token per namespace prefix (``lgn`` + digest; the empty prefix
  included), so a search within a prefix, and ``list_namespaces``, ask m3 for exactly those rows;
- ``type``: ``memory_type`` (default ``observation``: exempt from similarity supersession by default,
  since two keys are two facts however alike their values); ``scope``: the store's (default ``agent``).

A ``put`` over an existing key supersedes the memory (the old value stays in m3's history and ``as_of``);
putting an equal value changes nothing; ``delete`` (or a ``None`` value) soft-deletes it (``memory_restore``
brings it back). ``created_at`` is the first put's, ``updated_at`` the current version's ``recorded_at``.

Limits (documented in docs/integrations.md): a search or ``list_namespaces`` looks at the ``max_scan``
(default and at most m3's ``limits.max_k``, 200) best rows m3 returns for its tokens, then filters and
pages them here; TTLs are not supported (m3's own ``expires_at`` is not mapped); only items the client's
agent owns are seen.
"""

from __future__ import annotations

import json
import operator
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import Any, Literal

import anyio.to_thread
from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    validate_op_namespace,
)

from m3.integrations.client import M3Client
from m3.integrations.tokens import path_token, prefix_tokens

Namespace = tuple[str, ...]


def item_token(namespace: Namespace, key: str) -> str:
    return path_token("lgk", [*namespace, key])


def prefix_token(prefix: Namespace) -> str:
    return path_token("lgn", prefix)


class M3Store(BaseStore):
    """LangGraph's long-term store on m3 (see the module docstring for the mapping and its limits)."""

    def __init__(self, client: M3Client, *, scope: Literal["agent", "user", "org"] = "agent",
                 memory_type: str = "observation", index_fields: Sequence[str] | None = None,
                 max_scan: int | None = None):
        self.client = client
        self.scope = scope
        self.memory_type = memory_type
        self.index_fields = list(index_fields) if index_fields else None
        # m3 answers at most limits.max_k rows per search (default 200).
        limit: int = client.service.config["limits.max_k"]
        self.max_scan = min(max_scan or limit, limit)

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run the operations in order, each one m3 call or two (m3 commits each write on its own)."""
        return [self._run(op) for op in ops]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        batch = list(ops)
        return await anyio.to_thread.run_sync(self.batch, batch)

    def _run(self, op: Op) -> Result:
        validate_op_namespace(op)
        if isinstance(op, GetOp):
            found = self._find(op.namespace, op.key)
            return None if found is None else _item(found)
        if isinstance(op, SearchOp):
            return self._search(op)
        if isinstance(op, ListNamespacesOp):
            return self._list_namespaces(op)
        if isinstance(op, PutOp):
            self._put(op)
            return None
        raise TypeError(f"unknown LangGraph store operation {type(op).__name__}")

    # -- reads ---------------------------------------------------------------------------------------------

    def _rows(self, query: str, k: int, **filters: Any) -> list[dict[str, Any]]:
        """This agent's current store rows among m3's ``k`` best for ``query`` (other memories dropped)."""
        found = self.client.call("memory_search", {"query": query, "k": k, "type": self.memory_type,
                                                   "agent_id": self.client.agent_id, **filters})
        return [row for row in found["items"] if isinstance(row["metadata"].get("langgraph"), dict)]

    def _find(self, namespace: Namespace, key: str) -> dict[str, Any] | None:
        token = item_token(namespace, key)
        for row in self._rows(token, 8, conversation_id=token):
            meta = row["metadata"]["langgraph"]
            if tuple(meta["namespace"]) == tuple(namespace) and meta["key"] == key:
                return row
        return None

    def _search(self, op: SearchOp) -> list[SearchItem]:
        token = prefix_token(op.namespace_prefix)
        query = f"{op.query} {token}" if op.query else token
        wanted = min(self.max_scan, max(op.offset + op.limit, 1) * 4)
        hits = [row for row in self._rows(query, wanted)
                if _under(row, op.namespace_prefix) and matches(row["metadata"]["langgraph"]["value"], op.filter)]
        page = hits[op.offset:op.offset + op.limit]
        return [_search_item(row, scored=bool(op.query)) for row in page]

    def _list_namespaces(self, op: ListNamespacesOp) -> list[Namespace]:
        prefixes = [c.path for c in op.match_conditions or () if c.match_type == "prefix" and "*" not in c.path]
        token = prefix_token(tuple(prefixes[0]) if prefixes else ())
        seen: set[Namespace] = set()
        for row in self._rows(token, self.max_scan):
            namespace = tuple(row["metadata"]["langgraph"]["namespace"])
            if all(namespace_matches(c, namespace) for c in op.match_conditions or ()):
                seen.add(namespace[:op.max_depth] if op.max_depth is not None else namespace)
        return sorted(seen)[op.offset:op.offset + op.limit]

    # -- writes --------------------------------------------------------------------------------------------

    def _put(self, op: PutOp) -> None:
        existing = self._find(op.namespace, op.key)
        if op.value is None:
            if existing is not None:
                self.client.call("memory_delete", {"id": existing["id"], "reason": "LangGraph store delete"})
            return
        value = dict(op.value)
        created = existing["metadata"]["langgraph"]["created_at"] if existing else _now()
        meta = {"langgraph": {"namespace": list(op.namespace), "key": op.key, "value": value, "created_at": created}}
        content = self._content(value, op.index, op.key)
        if existing is None:
            token = item_token(op.namespace, op.key)
            self.client.call("memory_write", {
                "content": content, "title": _title(op.namespace, op.key), "type": self.memory_type,
                "scope": self.scope, "metadata": meta, "conversation_id": token, "source": "langgraph"})
        elif existing["metadata"]["langgraph"]["value"] != value:
            self.client.call("memory_supersede", {"id": existing["id"], "content": content, "metadata": meta,
                                                  "reason": "LangGraph store put"})

    def _content(self, value: dict[str, Any], index: Literal[False] | list[str] | None, key: str) -> str:
        fields = index if isinstance(index, list) else self.index_fields
        if fields:
            texts = [_text(path_value(value, path)) for path in fields]
            joined = "\n".join(t for t in texts if t)
            return joined or key
        return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def _title(namespace: Namespace, key: str) -> str:
    return " ".join([item_token(namespace, key), *prefix_tokens("lgn", namespace)])


def _under(row: dict[str, Any], prefix: Namespace) -> bool:
    return tuple(row["metadata"]["langgraph"]["namespace"][:len(prefix)]) == tuple(prefix)


def _item(row: dict[str, Any]) -> Item:
    meta = row["metadata"]["langgraph"]
    return Item(value=meta["value"], key=meta["key"], namespace=tuple(meta["namespace"]),
                created_at=_time(meta["created_at"]), updated_at=_time(row["recorded_at"]))


def _search_item(row: dict[str, Any], *, scored: bool) -> SearchItem:
    item = _item(row)
    return SearchItem(namespace=item.namespace, key=item.key, value=item.value, created_at=item.created_at,
                      updated_at=item.updated_at, score=row["score"] if scored else None)


def _now() -> str:
    return datetime.now(UTC).isoformat()


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def path_value(value: dict[str, Any], path: str) -> Any:
    """The value at a dotted path (``"a.b"``), or None; ``"$"`` is the whole value."""
    if path == "$":
        return value
    current: Any = value
    for part in path.split("."):
        if not isinstance(current, dict):
            return None
        current = current.get(part)
    return current


def matches(value: dict[str, Any], conditions: dict[str, Any] | None) -> bool:
    """LangGraph's search filter: each key equal, or every ``$eq/$ne/$gt/$gte/$lt/$lte`` of it true."""
    return all(_holds(path_value(value, key), want) for key, want in (conditions or {}).items())


def _holds(actual: Any, want: Any) -> bool:
    if isinstance(want, dict) and any(name.startswith("$") for name in want):
        return all(_compare(actual, name, operand) for name, operand in want.items())
    return bool(actual == want)


_ORDER: dict[str, Callable[[Any, Any], bool]] = {"$gt": operator.gt, "$gte": operator.ge, "$lt": operator.lt,
                                                  "$lte": operator.le}


def _compare(actual: Any, name: str, operand: Any) -> bool:
    if name == "$eq":
        return bool(actual == operand)
    if name == "$ne":
        return bool(actual != operand)
    if name not in _ORDER:
        raise ValueError(f"unsupported filter operator {name}")
    try:
        return bool(_ORDER[name](actual, operand))
    except TypeError:  # a missing field, or a text compared with a number: not a match
        return False


def namespace_matches(condition: MatchCondition, namespace: Namespace) -> bool:
    """A ``list_namespaces`` condition: its path, ``*`` matching any label, at the start or end."""
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    part = namespace[:len(path)] if condition.match_type == "prefix" else namespace[len(namespace) - len(path):]
    return all(want in ("*", got) for got, want in zip(part, path, strict=True))
