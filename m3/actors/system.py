"""Wiring: one store, its Writer, Searcher, Embedder and coordination actors, started and stopped together."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any, cast

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from m3.actors.audit_keeper import AuditKeeper
from m3.actors.directory import Directory
from m3.actors.embedder import EmbedderActor
from m3.actors.entity_indexer import EntityIndexer, Ticker
from m3.actors.loop import LoopActor
from m3.actors.router import RouterRegistry
from m3.actors.searcher import Searcher
from m3.actors.supervisor import ActorHandle
from m3.actors.sync import SyncActor, chosen_tables
from m3.actors.task_manager import TaskManager, lease_clock
from m3.actors.writer import Writer
from m3.cognition.extraction import Extractor, parse_types
from m3.cognition.llm import chat_model_from_config
from m3.cognition.passes import LoopPass
from m3.cognition.registry import build_passes, pass_settings, placed
from m3.config import Config
from m3.embed.base import Embedder
from m3.embed.factory import ModelResolver, close_embedder, create_embedder
from m3.errors import ConfigError, EmbedderUnavailable, M3Error
from m3.protocols.messages.files import FILE_CHUNK
from m3.protocols.messages.memory import Drain, Flush, SearchWeights
from m3.retrieval import native
from m3.retrieval.ranking import SIGNALS
from m3.retrieval.supersession import SupersessionPolicy
from m3.store.agents import Liveness
from m3.store.dialect import dialect_for
from m3.store.engine import StoreOptions, migrate_store

log = logging.getLogger(__name__)

#: Longest a stop waits for the query model's warm-up (deriving it takes a few seconds, loading it under one).
WARM_UP_JOIN_S = 60.0


def store_options(config: Config) -> StoreOptions:
    return StoreOptions(url=config.store_url, sqlite_synchronous=config["store.sqlite_synchronous"],
                        busy_timeout_ms=config["store.busy_timeout_ms"])


def warehouse_url(config: Config) -> str:
    """``sync.warehouse_url``, refused when it carries a password and comes from the plain config file."""
    url: str = config["sync.warehouse_url"]
    if url and config.origin("sync.warehouse_url") == "file" and _has_password(url):
        raise ConfigError("sync.warehouse_url holds a password in m3_config.toml, a plain file",
                          hint="Move it to the vault (`m3 secret set sync.warehouse_url` reads the URL from stdin) and "
                               "remove it from m3_config.toml, or give the password through PGPASSFILE.")
    return url


def _has_password(url: str) -> bool:
    try:
        return bool(make_url(url).password)
    except ArgumentError:
        return False


def search_weights(config: Config) -> SearchWeights:
    """Each signal's ``search.weight_<signal>``, and the other ``search.*`` settings of the ranking."""
    return SearchWeights(**{name: config[f"search.weight_{name}"] for name in SIGNALS},
                         **{name: config[f"search.{name}"]
                            for name in ("recency_half_life_days", "mmr_lambda", "conversation_top",
                                         "proximity_window", "proximity_depth")})


def entity_extractor(config: Config) -> Extractor:
    """The extractor with the configured ``entities.types``; a malformed entry is a ``config_error``."""
    try:
        return Extractor(parse_types(config["entities.types"]))
    except ValueError as exc:
        raise ConfigError(f"entities.types: {exc}",
                          hint="Give each entry as type=regex, e.g. ticket=JIRA-\\d+.") from None


def interactive(embedder: Embedder | None) -> Embedder | None:
    """The same embedder marked for queries someone waits for (a shared server serves those first)."""
    with_priority = getattr(embedder, "with_priority", None)
    return with_priority("interactive") if with_priority is not None else embedder


def query_variant(config: Config) -> Callable[[Embedder], Embedder]:
    """How search embeds its queries with a given embedder: with ``embed.query_int8``, through the backend's query
    variant where it has one (MiniLM's 8-bit products, the derived model kept under the m3 home), else as it is.
    Memory texts are always embedded by the embedder itself."""
    folder = config.home / "models" / "minilm-queries"

    def variant(embedder: Embedder) -> Embedder:
        for_queries = getattr(embedder, "for_queries", None)
        if for_queries is None or not config["embed.query_int8"]:
            return embedder
        return cast(Embedder, for_queries(folder))

    return variant


class ActorSystem:
    """The actors of one store. ``start`` migrates the store first; ``stop`` drains in a safe order.

    ``loop_passes`` replaces the cognitive loop's passes the registry builds from the config (tests, embedders):
    a tuple, placed in the loop actors by name, or a mapping of actor name to passes; ``loop_tickers`` gives
    a loop actor (by name) a ticker of its own instead of a timer thread.
    """

    def __init__(self, config: Config, embedder: Embedder | None = None, *, background: bool = True,
                 loop_passes: Mapping[str, tuple[LoopPass, ...]] | tuple[LoopPass, ...] | None = None,
                 loop_tickers: Mapping[str, Ticker] | None = None):
        # First, before any model loads: search.native=on without the extension stops the start here.
        native.select(config["search.native"])
        self.config = config
        self.options = store_options(config)
        self._owns_backend = embedder is None
        self.embedder_backend = embedder or create_embedder(config)
        #: Embedders of other models (the previous one, while the store moves to the configured one).
        self.resolve = ModelResolver(config, self.embedder_backend)
        self.ask_timeout: float = config["actors.ask_timeout_s"]
        #: Whether this process works the embedding backlog (a long-running one that holds the job).
        self.background = background
        self._started = False
        self._warming: threading.Thread | None = None
        policy = SupersessionPolicy(threshold=config["supersede.threshold"],
                                    # A file chunk is replaced by re-indexing its file, never by a look-alike.
                                    exempt_types=frozenset(config["supersede.exempt_types"]) | {FILE_CHUNK})
        # Handles exist before actors start so that each can address the others.
        self.writer = ActorHandle("writer", Writer, self.options, max_batch=config["writer.max_batch"],
                                  policy=policy, searcher=None, embedder=None)
        #: Where the Embedder writes (vectors, chat vectors, model changes): on a store where writers run at
        #: once (PostgreSQL) a second Writer with its own connection, so that acknowledged writes never queue
        #: behind the nearest-neighbour queries and index insertions of similarity supersession; on SQLite (one
        #: write lock) the Writer itself. Entities stay with the Writer (merges and indexing are not ordered
        #: by locks).
        self.vector_writer = self.writer if dialect_for(self.options.url).serial_writes else ActorHandle(
            "vector_writer", Writer, self.options, max_batch=config["writer.max_batch"], policy=policy,
            searcher=None, embedder=None)
        self.searcher = ActorHandle("searcher", Searcher, self.options,
                                    embedder=interactive(self.embedder_backend), queries=query_variant(config),
                                    resolve=lambda model: interactive(self.resolve(model)),
                                    weights=search_weights(config), candidates=config["search.candidates"],
                                    writer=self.writer, default_k=config["search.k"], max_k=config["limits.max_k"])
        self.embedder = ActorHandle("embedder", EmbedderActor, self.options, embedder=self.embedder_backend,
                                    resolve=self.resolve, writer=self.vector_writer, ask_timeout=self.ask_timeout,
                                    background=background, max_batch=config["embed.max_batch"],
                                    backend_name=config["embed.backend"], nice=config["embed.nice"],
                                    settle_ms=config["embed.settle_ms"], max_delay_ms=config["embed.max_delay_ms"])
        self.directory = ActorHandle("directory", Directory, self.options, liveness=Liveness(
            active_s=config["agents.active_window_s"], offline_s=config["agents.offline_after_s"]))
        self.tasks = ActorHandle("tasks", TaskManager, self.options, writer=self.writer)
        #: Entity extraction in the background (long-running processes), and the entity reads.
        self.entities = ActorHandle("entities", EntityIndexer, self.options, writer=self.writer,
                                    extractor=entity_extractor(config), batch=config["entities.batch"],
                                    interval_s=config["entities.interval_s"], ask_timeout=self.ask_timeout,
                                    background=background and config["entities.enabled"])
        #: Prunes the read audit at start and every audit.prune_interval_s, in long-running processes only.
        self.audit_keeper = ActorHandle("audit_keeper", AuditKeeper, writer=self.writer,
                                        retention_days=config["audit.retention_days"],
                                        interval_s=config["audit.prune_interval_s"], periodic=background)
        #: Warehouse sync (docs/sync.md): runs on demand, and every sync.interval_s in long-running processes.
        self.sync = ActorHandle("sync", SyncActor, self.options, writer=self.writer, url=warehouse_url(config),
                                interval_s=config["sync.interval_s"], batch=config["sync.batch"],
                                tables=chosen_tables(config["sync.tables"]), background=background,
                                ask_timeout=self.ask_timeout)
        #: The cognitive loop (docs/cognitive-loop.md): ticks in long-running processes holding the background lease.
        self.observer, self.reflector = self._loop_actors(config, loop_passes, loop_tickers or {})
        self.routers = RouterRegistry(self.writer, idle_s=config["inbox.router_idle_s"])
        #: Called after each commit that notified agents (beside this process's routers), e.g. to tell other
        #: processes sharing the store; each hook must return at once (it runs on the Writer's thread).
        self.notified_hooks: list[Callable[[tuple[str, ...]], None]] = []
        self.writer.rebind(searcher=self.searcher, embedder=self.embedder, on_notified=self._notified,
                           on_leased=lease_clock(self.tasks))
        if self.vector_writer is not self.writer:
            self.vector_writer.rebind(searcher=self.searcher, on_notified=self._notified)
        #: In start order; they stop in reverse, the Writer last (the vector Writer, if any, just before it).
        writers = (self.writer,) if self.vector_writer is self.writer else (self.writer, self.vector_writer)
        self._handles = (*writers, self.searcher, self.embedder, self.directory, self.tasks, self.entities,
                         self.audit_keeper, self.observer, self.reflector, self.sync)

    def _loop_actors(self, config: Config, passes: Mapping[str, tuple[LoopPass, ...]] | tuple[LoopPass, ...] | None,
                     tickers: Mapping[str, Ticker]) -> tuple[ActorHandle, ActorHandle]:
        chosen = build_passes(config) if passes is None else placed(passes)
        handles = []
        for name in ("observer", "reflector"):
            handles.append(ActorHandle(
                name, LoopActor, self.options, actor=name, passes=chosen[name], writer=self.writer,
                interval_s=config["loop.interval_s"], budget=config["loop.budget"],
                background=self.background and config["loop.enabled"], ask_timeout=self.ask_timeout,
                max_writes_per_s=config["loop.governor.max_writes_per_s"],
                max_load=config["loop.governor.max_load"], writes=lambda: self.writer.stats.handled,
                settings={one.name: pass_settings(config, one.name) for one in chosen[name]},
                # Each loop actor its own client (its own connection pool): the model is optional, None without llm.url.
                llm=chat_model_from_config(config), llm_calls=config["llm.max_calls_per_tick"],
                ticker=tickers.get(name)))
        return handles[0], handles[1]

    def _notified(self, agents: tuple[str, ...]) -> None:
        self.routers.arrived(agents)
        for hook in self.notified_hooks:
            hook(agents)

    def start(self) -> ActorSystem:
        migrate_store(self.options)
        for handle in self._handles:
            handle.start()
        self._started = True
        return self

    def warm_queries(self) -> threading.Thread:
        """Load the model search queries embed with on a background thread, now rather than on the first search
        (deriving MiniLM's 8-bit query model, once per machine, takes seconds); a long-lived process calls it."""
        queries = query_variant(self.config)(self.embedder_backend)  # the instance the Searcher holds
        load = getattr(queries, "load", None)

        def warm() -> None:
            try:
                if load is not None:
                    load()
            except EmbedderUnavailable as exc:  # the first search reports it
                log.warning("the query model did not load ahead of the first search: %s", exc.message)

        thread = threading.Thread(target=warm, name="m3-warm-queries", daemon=True)
        thread.start()
        self._warming = thread
        return thread

    def _await_warm_up(self) -> None:
        """Let a query model still loading (or being derived) finish before the process may exit: an interpreter
        shutting down under onnxruntime's loader aborted the process and left a traceback in the engine's log."""
        thread, self._warming = self._warming, None
        if thread is None:
            return
        thread.join(WARM_UP_JOIN_S)
        if thread.is_alive():
            log.warning("stopping while the query model still loads (over %s s); the next start loads it again",
                        WARM_UP_JOIN_S)

    def wait_embedded(self, timeout: float | None = None) -> None:
        """Block until every memory written so far has its vector stored (tests, CLI shutdown)."""
        limit = timeout if timeout is not None else self.ask_timeout
        self.embedder.ask(Flush(), limit)
        self.vector_writer.ask(Flush(), limit)
        self.writer.ask(Flush(), limit)

    def stop(self, drain_embeddings: bool = True) -> None:
        if not self._started:
            return
        self._started = False
        interrupted: BaseException | None = None
        if drain_embeddings:
            try:
                limit = self.config["embed.drain_timeout_s"]
                self.embedder.ask(Drain(), limit)
                self.vector_writer.ask(Flush(), limit)
                self.writer.ask(Flush(), limit)
            except M3Error as exc:
                log.warning("stopping before every vector was computed (%s); the next start finishes", exc.message)
            except (KeyboardInterrupt, SystemExit) as exc:
                # Asked to go now: skip the rest of the drain but still stop in order (the Writer
                # commits what it holds); the next start's backfill embeds what is left.
                interrupted = exc
        # Routers forward to the Writer and the task manager asks it to sweep: stop them first, so it
        # commits what they sent.
        self.routers.stop()
        for handle in reversed(self._handles):
            handle.stop()
        self.resolve.close()
        self._await_warm_up()
        if self._owns_backend:
            close_embedder(self.embedder_backend)
        if interrupted is not None:
            raise interrupted

    def statistics(self) -> list[dict[str, Any]]:
        return [h.statistics() for h in self._handles] + [self.routers.statistics()]
