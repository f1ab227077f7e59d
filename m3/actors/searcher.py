"""The Searcher: every read of memories and the chat log.

It owns a read connection and its store's dense leg (:mod:`m3.retrieval.dense`), refreshed before each
search, so a search sent after a write's reply sees that write (other processes' writes too). Each
request runs in one read transaction: one consistent snapshot, released right after.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, and_, or_

from m3.actors.reader import StoreReader
from m3.actors.supervisor import ActorHandle
from m3.embed.base import Embedder
from m3.errors import EmbedderUnavailable, InvalidArgument, NotFound
from m3.protocols.base import Message
from m3.protocols.messages import admin
from m3.protocols.messages import conversations as cv
from m3.protocols.messages.files import ListFileChunks
from m3.protocols.messages.listing import CountMemories, ListMemories
from m3.protocols.messages.memory import (
    EmbeddingCounts,
    EmbeddingStats,
    GetGraph,
    GetHistory,
    GetMemory,
    ListChat,
    MemoriesArchived,
    MemoriesErased,
    MemoriesRestored,
    MemoryFilter,
    SearchChat,
    SearchMemories,
    SearchWeights,
    StoreFacts,
    StoreStatus,
    TouchMemories,
    VerifyMemories,
)
from m3.protocols.tools import chatlog as chat
from m3.protocols.tools import memory as r
from m3.retrieval import chat_search, native, pool, ranking, timewords
from m3.retrieval.candidate_rows import CandidateRows
from m3.retrieval.dense import DenseLeg, Vector, leg_for
from m3.retrieval.query_embedding import QueryEmbedding
from m3.retrieval.search_statements import KeptStatements
from m3.store import (
    chat_reads,
    conversations,
    dump,
    embedding_models,
    file_chunks,
    fulltext,
    maintenance,
    memory_lists,
    memory_reads,
    status,
    vectors,
    visibility,
)
from m3.store import memories as rows
from m3.store.dialect import dialect_for
from m3.store.engine import StoreOptions
from m3.store.filters import chat_isolation_clause, isolation_clause, narrows, time_clause
from m3.store.schema import chatlog
from m3.store.schema import memories as m

log = logging.getLogger(__name__)

#: The columns of a memory row a search item shows as they are.
ITEM_COLUMNS = tuple(sorted(set(r.SearchItem.model_fields) - {"bm25_score", "score", "explanation"}))
#: Longest wait for a query's embedding before the search goes on by keyword alone.
QUERY_EMBED_TIMEOUT_S = 60.0


class Searcher(StoreReader):
    def __init__(self, options: StoreOptions, *, embedder: Embedder, weights: SearchWeights, candidates: int,
                 writer: ActorHandle | None, resolve: Callable[[str], Embedder | None] | None = None,
                 queries: Callable[[Embedder], Embedder] | None = None,
                 default_k: int = 8, max_k: int = 200, **base: Any):
        """``embedder`` embeds memory texts (fresh writes ranked before their vector is stored); ``queries`` gives
        the embedder search queries go through for a model's embedder (default: the same one)."""
        super().__init__(options, **base)
        #: ``search.k`` and ``limits.max_k``: how many results a search without k gets, and the most it may ask.
        self._default_k, self._max_k = default_k, max_k
        self._configured = embedder
        self._resolve = resolve or (lambda model: embedder if model == embedder.model_id else None)
        #: Embeds memory texts with the model whose vectors the index holds (the store's active model).
        self._embedder: Embedder | None = embedder
        self._for_queries = queries or (lambda model: model)
        #: The same model as queries are embedded with (``embed.query_int8``).
        self._query_embedder: Embedder | None = self._for_queries(embedder)
        self._model = embedder.model_id
        self._weights = weights
        self._candidates = candidates
        self._writer = writer
        self._dialect = dialect_for(options.url)
        self._dense: DenseLeg = leg_for(self._dialect, self._side_connection)
        #: The clauses and statements of the filters searched last, kept for the next search under them.
        self._kept = KeptStatements()
        #: One thread embedding queries while the Searcher's own thread runs the keyword leg.
        self._embedding_pool: ThreadPoolExecutor | None = None

    def _side_connection(self) -> Connection:
        """A second connection of this actor's engine, for its query-embedding thread (the pool keeps it)."""
        assert self._engine is not None, "the actor is not running"
        return self._engine.connect()

    def release(self) -> None:
        if self._embedding_pool is not None:
            self._embedding_pool.shutdown(wait=True)
            self._embedding_pool = None
        super().release()

    def handlers(self) -> dict[type[Message], Callable[[Any], Any]]:
        return {
            SearchMemories: self.search, GetMemory: self.get, GetHistory: self.history,
            GetGraph: lambda msg: memory_reads.graph(self.conn, msg),
            VerifyMemories: lambda msg: memory_reads.verify(self.conn, msg),
            SearchChat: self.search_chat, ListChat: self.list_chat,
            EmbeddingStats: self.embedding_stats, StoreStatus: self.store_status,
            MemoriesErased: lambda msg: self._dense.forget(msg.ids),
            MemoriesArchived: lambda msg: self._dense.archived(msg.ids, True),
            MemoriesRestored: lambda msg: self._dense.archived(msg.ids, False),
            ListMemories: lambda msg: memory_lists.list_memories(self.conn, msg, datetime.now(UTC)),
            CountMemories: lambda msg: memory_lists.count_memories(self.conn, msg, datetime.now(UTC)),
            ListFileChunks: lambda msg: file_chunks.list_chunks(self.conn, msg),
            cv.GetChat: lambda msg: conversations.get_chat(self.conn, msg),
            cv.ChatContext: lambda msg: conversations.chat_context(self.conn, msg),
            cv.ChatStats: lambda msg: conversations.chat_stats(self.conn, msg, self._chat_model()),
            cv.ListConversations: lambda msg: conversations.list_conversations(self.conn, msg),
            cv.GetConversation: lambda msg: conversations.get_conversation(self.conn, msg),
            cv.ConversationStats: lambda msg: conversations.conversation_stats(self.conn, msg, self._chat_model()),
            cv.ConversationHistory: lambda msg: conversations.history(self.conn, msg),
            admin.ExportStore: self.export, admin.VerifyStore: lambda msg: maintenance.verify(self.conn, full=msg.full),
            admin.EmbeddingBacklog: lambda msg: maintenance.backlog(self.conn, list(msg.models), msg.limit),
        }

    def export(self, msg: admin.ExportStore) -> admin.ExportedStore:
        """Every table in one read transaction (:meth:`StoreReader.handle`), so the file is one snapshot."""
        revision = status.revision(self.conn)
        lines, tables = dump.export_lines(self.conn, {**msg.header, "revision": revision})
        return admin.ExportedStore(lines=lines, tables=tables, revision=revision)

    # -- memory search -------------------------------------------------------------------------

    def _k(self, k: int | None) -> int:
        k = self._default_k if k is None else k
        if k > self._max_k:
            raise InvalidArgument(f"k={k} is above the limit of {self._max_k}",
                                  hint="Ask for fewer results or raise limits.max_k.")
        return k

    def search(self, msg: SearchMemories) -> r.MemorySearchResult:
        now = datetime.now(UTC)
        k = self._k(msg.k)
        n = max(self._candidates, k)
        # The query embeds first, on another thread, then the in-memory index proposes there; meanwhile this thread
        # works out the filter and named times and reads the keyword matches and their rows (the model, the index
        # and SQLite release the GIL). The query vector is awaited only when nothing else is left to do.
        started = self._embed_query(msg.query, n, msg.filter.include_archived)
        kept = self._kept.at(now, msg.filter)
        clause = kept.clause
        # The question's time: relative times in the query and recency count from it.
        asked = msg.now or msg.filter.as_of or now
        named = timewords.windows(msg.query, asked)
        window = self._window(kept.by_valid_time if named else clause, named)
        embedding = self._leg_refreshed(started, clause, window)
        terms = fulltext.query_terms(msg.query)
        # Narrow rows (no content) for ranking; the chosen few are completed below. The keyword hits come with
        # theirs, read by the keyword statement itself while the query still embeds.
        loaded = CandidateRows(self.conn, clause, vector_model=self._model if embedding is not None
                               and self._dense.vectors_with_rows else None, kept=kept.rows)
        hits = self._dialect.memory_hits(self.conn, msg.query, clause, n, selective=self._selective(msg.filter),
                                         columns=loaded.columns(with_vectors=True), kept=kept.keyword)
        loaded.adopt({h.id: h.row for h in hits if h.row is not None}, with_vectors=True)
        early = None
        if embedding is None or not embedding.done():
            # While it embeds, the keyword hits' signals other than meaning are worked out too (fuse keeps them).
            early = pool.keyword_candidates(hits, loaded.fetch([h.id for h in hits], with_vectors=True))
            ranking.prepare(list(early.values()), terms, self._weights, asked, named)
        dense, query_vec = self._dense_hits(embedding, clause, n, msg.filter.include_archived, loaded)
        if window is not None and query_vec is not None:
            dense = self._with_window_hits(dense, query_vec, window, msg.filter.include_archived,
                                           embedding.window_hits if embedding is not None else None)
        found = loaded.fetch([h.id for h in hits] + [i for i, _ in dense])
        cands = self._candidates_from(found, hits, [(i, s) for i, s in dense if i in found], query_vec, loaded,
                                     early)
        ranking.fuse(cands, terms, self._weights, asked, named)
        ranking.add_proximity(cands, terms, self._weights, k, named, read=loaded.complete)
        by_relevance = {c.id: r for r, c in enumerate(sorted(cands, key=lambda c: c.score, reverse=True), 1)}
        chosen = ranking.mmr(cands, k, self._weights.mmr_lambda)
        loaded.complete([c.id for c in chosen])
        items = [self._item(c, msg.explain, rank, by_relevance[c.id], named, terms)
                 for rank, c in enumerate(chosen, 1)]
        self._touch([c.id for c in chosen], now)
        return r.MemorySearchResult(count=len(items), items=items, query=msg.query, grade_with="score")

    def _selective(self, flt: MemoryFilter) -> bool:
        """Whether the keyword leg ranks every match at once (``flt`` keeps a small part of the store) instead of
        checking the best first (the same hits if enough pass): not for a filter an index counts above a third of
        the in-memory index; any other field filter is taken as selective."""
        if not narrows(flt):
            return False
        held = self._dense.size()
        if held is None:
            return True
        return rows.holds_more_than(self.conn, flt, held // 3) is not True

    def _embed_query(self, query: str, n: int, include_archived: bool) -> QueryEmbedding | None:
        """The query's vector and proposals, started on the helper thread with the store's search model (None: no
        embedder for it)."""
        self._follow_active_model()
        if self._query_embedder is None:
            return None
        if self._embedding_pool is None:
            self._embedding_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="m3-searcher-embed")
        return QueryEmbedding(self._embedding_pool, self._query_embedder, self._dense, query, n, include_archived,
                              wait_s=QUERY_EMBED_TIMEOUT_S)

    def _leg_refreshed(self, started: QueryEmbedding | None, clause: Any,
                       window: tuple[Any, int] | None) -> QueryEmbedding | None:
        """Refresh the dense leg, then let the helper propose under ``clause`` (and ``window``); None: no vectors."""
        if started is None:
            return None
        ready = False
        try:
            ready = self._dense.ready(self.conn, self._model)
        finally:
            started.leg_refreshed(ready, clause, window)
        # Without stored vectors there is nothing to compare: the vector, still being computed, is left unread.
        return started if ready else None

    def _dense_hits(self, embedding: QueryEmbedding | None, clause: Any, n: int, include_archived: bool,
                    loaded: CandidateRows) -> tuple[list[tuple[str, float]], Vector | None]:
        """The dense leg's filtered top ``n`` and the query vector (None when there are no vectors to compare);
        the rows it checks against the filter are loaded for ranking on the way."""
        if embedding is None:
            return [], None
        try:
            query_vec, proposed = embedding.result(QUERY_EMBED_TIMEOUT_S)
        except EmbedderUnavailable as exc:
            log.warning("searching by keyword only: %s", exc.message)
            return [], None
        except FutureTimeout:
            log.warning("searching by keyword only: the query took over %s s to embed", QUERY_EMBED_TIMEOUT_S)
            return [], None
        return self._dense.top(self.conn, self._model, query_vec, clause, n, include_archived,
                               proposed=proposed, passing=loaded.passing), query_vec

    def _window(self, clause: Any, named: list[timewords.Window]) -> tuple[Any, int] | None:
        """The time leg's filter (the search's, within the windows the query names) and size; None without one."""
        if not named:
            return None
        within = or_(*(and_(m.c.valid_from >= w.start, m.c.valid_from < w.end) for w in named))
        return and_(clause, within), max(1, self._candidates // 2)

    def _with_window_hits(self, dense: list[tuple[str, float]], query_vec: Vector, window: tuple[Any, int],
                          include_archived: bool, proposed: list[tuple[str, float]] | None
                          ) -> list[tuple[str, float]]:
        """Add the time leg: the memories valid in a window the query names that are closest in meaning
        (``proposed``: ranked already on the query embedding's thread).

        A question such as "what did she do on 25 May?" shares few words with the answer; its memory can
        miss both legs' top ``search.candidates`` and would then never meet the time signal.
        """
        extra = proposed if proposed is not None else self._dense.top(
            self.conn, self._model, query_vec, window[0], window[1], include_archived, narrow=True)
        seen = {i for i, _ in dense}
        return dense + [(i, s) for i, s in extra if i not in seen]

    def _follow_active_model(self) -> None:
        """Use the model the store says search uses; on a change, drop the dense leg and start the new model's.

        The leg and the query embedder always belong to one model, so vectors of two models are never
        compared.
        """
        active = embedding_models.active(self.conn) or self._configured.model_id
        if active == self._model:
            return
        log.info("search switches from %s to %s vectors", self._model, active)
        self._model = active
        self._dense = leg_for(self._dialect, self._side_connection)
        self._embedder = self._resolve(active)
        self._query_embedder = None if self._embedder is None else self._for_queries(self._embedder)
        if self._embedder is None:
            log.warning("no embedder for %s in this process: searching by keyword until it is available", active)

    def _candidates_from(self, found: dict[str, Any], hits: list[fulltext.KeywordHit], dense: list[tuple[str, float]],
                         query_vec: Vector | None, loaded: CandidateRows,
                         early: dict[str, ranking.Candidate] | None) -> list[ranking.Candidate]:
        """The pool: ``early`` (the keyword hits' candidates made while the query embedded) or the keyword hits
        among ``found``, and the dense hits, with their vectors."""
        cands = early if early is not None else pool.keyword_candidates(hits, found)
        pool.add_dense(cands, dense, found)
        if query_vec is not None:
            # Some came with the keyword matches' rows (where the leg keeps none); the leg has the others.
            stored = {i: loaded.vectors[i] for i in cands if i in loaded.vectors}
            stored.update(self._dense.vectors(self.conn, self._model,
                                              [i for i in cands if i not in loaded.read_with_vectors]))
            pool.embed_pending(pool.add_vectors(cands, stored, query_vec), query_vec, loaded, self._embedder)
        return list(cands.values())

    def _item(self, c: ranking.Candidate, explain: bool, rank: int, relevance_rank: int,
              named: list[timewords.Window], terms: list[str]) -> r.SearchItem:
        explanation = None
        if explain:
            explanation = ranking.explain(c, self._weights, rank, relevance_rank, named, terms)
            # The one model whose vectors gave the cosine (query and memory alike).
            explanation["dense_model"] = self._model if c.cosine is not None else None
        return r.SearchItem(**{name: c.row[name] for name in ITEM_COLUMNS}, bm25_score=round(c.bm25, 6),
                            score=round(c.score, 6), explanation=explanation)

    def _touch(self, ids: list[str], at: datetime) -> None:
        if ids and self._writer is not None:  # a benchmark's Searcher leaves access counts alone
            self._writer.tell(TouchMemories(ids=tuple(ids), at=at))

    # -- single memories -----------------------------------------------------------------------

    def get(self, msg: GetMemory) -> r.MemoryRecord:
        """The memory; with ``as_of``/``valid_at``, the version of its chain current (holding) at that time, archived
        or expired or not (its ``archived_at`` says so, as without a time)."""
        now = datetime.now(UTC)
        memory_id = rows.resolve_id(self.conn, msg.id, msg.filter)
        if msg.filter.as_of is not None or msg.filter.valid_at is not None:
            at = {"as_of": msg.filter.as_of, "valid_at": msg.filter.valid_at}
            shown = msg.filter.model_copy(update={"include_archived": True})
            found = visibility.ids(self.conn, rows.version_chain(self.conn, memory_id), time_clause(shown, now))
            if not found:
                raise NotFound(f"memory {memory_id} had no version current at that time",
                               hint="See memory_history for when each version was recorded and valid.",
                               details={k: v.isoformat() for k, v in at.items() if v is not None})
            memory_id = found[-1]
        self._touch([memory_id], now)
        record = rows.record(rows.load(self.conn, memory_id))
        # A successor the reader may not see is not named.
        hidden = visibility.one(self.conn, record.superseded_by, isolation_clause(msg.filter))
        return record.model_copy(update={"superseded_by": hidden})

    def history(self, msg: GetHistory) -> r.MemoryHistoryResult:
        """Every event (up to ``as_of``) and the versions of the chain ``as_of``/``valid_at`` admit."""
        memory_id = rows.resolve_id(self.conn, msg.id, msg.filter)
        as_of, visible = msg.filter.as_of, isolation_clause(msg.filter)
        shown = visibility.events(self.conn, [rows.without_seq(e) for e in rows.history(self.conn, memory_id)
                                              if as_of is None or e["at"] <= as_of], visible)
        versions = visibility.ids(self.conn, rows.versions_at(self.conn, memory_id, msg.filter, datetime.now(UTC)),
                                  visible)
        return r.MemoryHistoryResult(id=memory_id, versions=versions,
                                     events=[r.HistoryEvent.model_validate(e) for e in shown])

    # -- chat log and statistics ---------------------------------------------------------------

    def search_chat(self, msg: SearchChat) -> chat.ChatlogSearchResult:
        """Both legs (keyword, and dense with the model memory search uses) under one filter, fused."""
        conds = [chatlog.c[name] == getattr(msg, name) for name in ("conversation_id", "role", "agent_id")
                 if getattr(msg, name) is not None]
        if msg.filter.scope is not None:
            conds.append(chatlog.c.scope == msg.filter.scope)
        k = self._k(msg.k)
        model = self._chat_model()
        return chat_search.search(self.conn, msg, and_(chat_isolation_clause(msg.filter), *conds), k=k,
                                  n=max(self._candidates, k), model=model, embedder=self._embedder,
                                  query_embedder=self._query_embedder,
                                  weights=self._weights)

    def _chat_model(self) -> str:
        """The model whose vectors chat search compares: the one memory search uses."""
        self._follow_active_model()
        return self._model

    def list_chat(self, msg: ListChat) -> chat.ChatlogListResult:
        return chat_reads.list_chat(self.conn, msg)

    def embedding_stats(self, msg: EmbeddingStats) -> EmbeddingCounts:
        return {
            "vectors_by_model": vectors.counts_by_model(self.conn),
            "pending": vectors.count_missing(self.conn, msg.model),
            "memories": vectors.count_current(self.conn),
            "active_model": embedding_models.active(self.conn),
            "models": embedding_models.states(self.conn),
            "search_model": self._model, "index_size": self._dense.size(),
        }

    def store_status(self, msg: StoreStatus) -> StoreFacts:
        return {"revision": status.revision(self.conn),
                "description": {**status.describe(self.conn, msg.model), "search_path": {
                    **native.status(), "query_embedding": getattr(self._query_embedder, "precision", None)}}}
