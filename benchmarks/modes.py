"""Search modes compared in one run, each a real m3 Searcher with weights set through config.

* ``m3``: the default settings, unchanged.
* ``bm25``: only the keyword signal has weight; MMR off (lambda 1, pure
  relevance order). Dense-only candidates still enter the fused pool, at
  score 0 below every keyword match; results with ``bm25_score == 0`` are
  dropped, so this mode returns keyword matches only, ranked by BM25.
* ``dense``: only the vector signal has weight; MMR off. Keyword-only
  candidates enter the pool with their true cosine, so the order is exactly
  the vector top-k (the dense leg's own top-N already holds it).

Every mode runs in its own Searcher actor (its own connection and vector
index) on the same store. None of them is given the Writer, so searches do
not record reads: access counts stay 0 and one question cannot change the
ranking of the next (the ``access`` signal's weight is 0.005 by default).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from m3.actors.searcher import Searcher
from m3.actors.supervisor import ActorHandle
from m3.actors.system import ActorSystem, query_variant, search_weights
from m3.config import Config
from m3.embed.base import Embedder
from m3.protocols.messages.memory import MemoryFilter, SearchMemories
from m3.retrieval import ranking

#: Every fusion signal (a new one must get weight 0 in the single-signal modes, so it is read from the ranking).
_SIGNALS = ranking.SIGNALS


def only(signal: str) -> dict[str, float]:
    """Config overrides giving ``signal`` all the weight, with MMR off."""
    overrides = {f"search__weight_{s}": (1.0 if s == signal else 0.0) for s in _SIGNALS}
    overrides["search__mmr_lambda"] = 1.0
    return overrides


MODE_OVERRIDES: dict[str, dict[str, float]] = {"bm25": only("bm25"), "dense": only("dense"), "m3": {}}
ALL_MODES = ("bm25", "dense", "m3")


@dataclass(frozen=True)
class Hit:
    id: str
    score: float
    bm25: float


class SearchModes:
    """One started Searcher per mode on ``system``'s store (embedding queries with ``embedder``,
    by default the system's own)."""

    def __init__(self, system: ActorSystem, modes: Iterable[str] = ALL_MODES, embedder: Embedder | None = None):
        self.system = system
        self.handles: dict[str, ActorHandle] = {}
        for mode in modes:
            config = system.config.with_overrides(**MODE_OVERRIDES[mode])
            self.handles[mode] = _searcher(system, config, mode, embedder or system.embedder_backend).start()

    def search(self, mode: str, query: str, k: int, now: datetime | None = None) -> list[Hit]:
        """The top ``k`` of ``mode`` for ``query`` asked at ``now`` (None: the clock)."""
        msg = SearchMemories(query=query, k=k, filter=MemoryFilter(), now=now)
        found = self.handles[mode].ask(msg, self.system.ask_timeout)
        hits = [Hit(id=i.id, score=i.score, bm25=i.bm25_score) for i in found.items]
        if mode == "bm25":
            hits = [h for h in hits if h.bm25 > 0]
        return hits

    def stop(self) -> None:
        for handle in self.handles.values():
            handle.stop()


def _searcher(system: ActorSystem, config: Config, mode: str, embedder: Embedder) -> ActorHandle:
    # Queries embed as the system's own Searcher embeds them (embed.query_int8).
    return ActorHandle(f"searcher-{mode}", Searcher, system.options, embedder=embedder,
                       queries=query_variant(config), weights=search_weights(config),
                       candidates=config["search.candidates"], writer=None)
