"""The entity domain through the registry, on both stores: extraction on demand, search, get, graph, relations,
merge and unmerge, isolation between two agents, gdpr_forget, and coded errors."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import select

from m3.actors.system import ActorSystem
from m3.config import Config
from m3.embed.minilm import MiniLMEmbedder
from m3.errors import M3Error
from m3.gateway.registry import default_registry
from m3.gateway.service import CallContext, Service
from m3.store.engine import StoreOptions, open_engine
from m3.store.schema import entity_stale

pytestmark = pytest.mark.anyio

A, B = CallContext(agent_id="agent-a"), CallContext(agent_id="agent-b")


@pytest.fixture
def quiet(config: Config, embedder: MiniLMEmbedder) -> Iterator[Service]:
    """A service whose indexer runs only when asked (entity_extract), so counts are the test's own."""
    settled = config.with_overrides(entities__enabled=False, isolation__enforce=True)
    started = ActorSystem(settled, embedder).start()
    yield Service(settled, started, default_registry())
    started.stop()


async def write(svc: Service, content: str, ctx: CallContext = A, **args: Any) -> str:
    done: dict[str, Any] = await svc.call("memory_write", {"content": content, "type": "fact", **args}, ctx)
    return str(done["id"])


async def extract(svc: Service, ctx: CallContext = A) -> dict[str, Any]:
    done: dict[str, Any] = await svc.call("entity_extract", {}, ctx)
    return done


async def find(svc: Service, query: str, ctx: CallContext = A) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = (await svc.call("entity_search", {"query": query}, ctx))["items"]
    return found


async def test_extract_indexes_the_backlog_once_and_reports_counts(quiet: Service) -> None:
    await write(quiet, "Alice Smith works at Acme Corp.", scope="org")
    await write(quiet, "Alice Smith moved to Berlin on 3 May 2026.", scope="org")
    done = await extract(quiet)
    assert (done["memories"], done["relations"], done["remaining"]) == (2, 2, 0)
    assert done["entities_created"] == 4 and done["mentions"] == 5
    assert (await extract(quiet))["memories"] == 0


async def test_search_finds_entities_by_part_of_the_name_exact_first(quiet: Service) -> None:
    await write(quiet, "We signed Acme with Acme Corp lawyers present.", scope="org")
    await extract(quiet)
    names = [item["name"] for item in await find(quiet, "ACME")]
    assert names == ["Acme", "Acme Corp"]
    assert (await quiet.call("entity_search", {"query": "acme", "type": "date"}, A))["count"] == 0


async def test_get_shows_mentions_with_context_and_relations_with_valid_time(quiet: Service) -> None:
    memory = await write(quiet, "Alice Smith works at Acme Corp.", scope="org", valid_from="2025-01-01T00:00:00Z")
    await write(quiet, "Budget review with Alice Smith.", scope="org")
    await extract(quiet)
    [alice] = await find(quiet, "alice smith")
    got = await quiet.call("entity_get", {"id": alice["id"]}, A)
    assert got["type"] == "name" and got["mentions"] == 2
    assert {m["snippet"] for m in got["mention_list"]} == {"Alice Smith works at Acme Corp.",
                                                          "Budget review with Alice Smith."}
    [relation] = got["relations"]
    assert (relation["subject_name"], relation["predicate"], relation["object_name"]) == (
        "Alice Smith", "works_at", "Acme Corp")
    assert relation["memory_id"] == memory and relation["valid_from"].startswith("2025-01-01")


async def test_relations_filter_by_predicate_and_entity(quiet: Service) -> None:
    await write(quiet, "Alice works at Acme. Bob moved to Lisbon. Carol is my manager.", scope="org")
    await extract(quiet)
    every = await quiet.call("entity_relations", {}, A)
    assert sorted(r["predicate"] for r in every["items"]) == ["is_my", "moved_to", "works_at"]
    moved = await quiet.call("entity_relations", {"predicate": "moved_to"}, A)
    assert [(r["subject_name"], r["object_name"]) for r in moved["items"]] == [("Bob", "Lisbon")]
    [carol] = await find(quiet, "carol")
    mine = await quiet.call("entity_relations", {"entity_id": carol["id"]}, A)
    assert [(r["predicate"], r["object_name"]) for r in mine["items"]] == [("is_my", "manager")]


async def test_graph_walks_relations_and_co_mentions_to_a_bounded_depth(quiet: Service) -> None:
    await write(quiet, "Alice works at Acme.", scope="org")
    await write(quiet, "Dana Lee visited Acme with Erin Moss.", scope="org")
    await write(quiet, "Erin Moss lives in Porto.", scope="org")
    await extract(quiet)
    [alice] = await find(quiet, "alice")
    one = await quiet.call("entity_graph", {"id": alice["id"], "depth": 1}, A)
    assert {n["name"]: n["depth"] for n in one["nodes"]} == {"Alice": 0, "Acme": 1}
    assert [(e["kind"], e["predicate"]) for e in one["edges"] if e["kind"] == "relation"] == [("relation", "works_at")]
    three = await quiet.call("entity_graph", {"id": alice["id"], "depth": 3}, A)
    assert {n["name"]: n["depth"] for n in three["nodes"]}["Porto"] == 3
    small = await quiet.call("entity_graph", {"id": alice["id"], "depth": 3, "max_nodes": 2}, A)
    assert len(small["nodes"]) == 2 and small["truncated"] is True


async def test_merge_moves_mentions_keeps_the_alias_and_unmerge_undoes_it(quiet: Service) -> None:
    await write(quiet, "We asked Bob about the rollout. Robert Miller works at Initech.", scope="org")
    await extract(quiet)
    [bob], [robert] = await find(quiet, "bob"), await find(quiet, "robert")
    merged = await quiet.call("entity_merge", {"source_id": bob["id"], "target_id": robert["id"]}, A)
    assert merged["moved_mentions"] == 1 and merged["by"] == "agent-a"
    assert "Bob" in merged["target"]["aliases"] and merged["target"]["mentions"] == 2
    via_old = await quiet.call("entity_get", {"id": bob["id"]}, A)
    assert (via_old["id"], via_old["merged_from"]) == (robert["id"], bob["id"])
    assert [item["name"] for item in await find(quiet, "bob")] == []
    await write(quiet, "The budget was approved by Bob.", scope="org")
    await extract(quiet)
    assert (await quiet.call("entity_get", {"id": robert["id"]}, A))["mentions"] == 3  # later mentions follow
    undone = await quiet.call("entity_unmerge", {"source_id": bob["id"]}, A)
    # What the merge moved goes back; the mention indexed while merged stays with the target.
    assert undone["moved_mentions"] == 1 and undone["target"]["mentions"] == 2
    alone = await quiet.call("entity_get", {"id": bob["id"]}, A)
    assert (alone["id"], alone["merged_from"], alone["mentions"]) == (bob["id"], None, 1)


async def test_a_new_mention_follows_a_chain_of_merges_to_its_end(quiet: Service) -> None:
    await write(quiet, "We asked Bob about it. Robert Miller agreed. Later Rob Miller signed.", scope="org")
    await extract(quiet)
    [bob], [robert], [rob] = await find(quiet, "bob"), await find(quiet, "robert"), await find(quiet, "rob miller")
    await quiet.call("entity_merge", {"source_id": bob["id"], "target_id": robert["id"]}, A)
    await quiet.call("entity_merge", {"source_id": robert["id"], "target_id": rob["id"]}, A)
    await write(quiet, "The budget was approved by Bob and by Dana Lee.", scope="org")
    await write(quiet, "We met Dana Lee and Bob again.", scope="org")
    done = await extract(quiet)
    assert (done["memories"], done["entities_created"]) == (2, 1)  # Dana Lee once, though named twice
    assert (await quiet.call("entity_get", {"id": rob["id"]}, A))["mentions"] == 5  # Bob's two new ones, two hops on
    [dana] = await find(quiet, "dana")
    assert dana["mentions"] == 2


async def test_a_missing_entity_and_a_bad_merge_get_coded_errors(quiet: Service) -> None:
    await write(quiet, "Alice Smith works at Acme Corp.", scope="org")
    await extract(quiet)
    [alice] = await find(quiet, "alice")
    for tool, args in (("entity_get", {"id": "nope"}), ("entity_graph", {"id": "nope"}),
                       ("entity_relations", {"entity_id": "nope"}),
                       ("entity_merge", {"source_id": "nope", "target_id": alice["id"]})):
        with pytest.raises(M3Error) as raised:
            await quiet.call(tool, args, A)
        assert raised.value.code == "not_found", tool
    with pytest.raises(M3Error) as raised:
        await quiet.call("entity_merge", {"source_id": alice["id"], "target_id": alice["id"]}, A)
    assert raised.value.code == "invalid_argument"
    with pytest.raises(M3Error) as raised:
        await quiet.call("entity_unmerge", {"source_id": alice["id"]}, A)
    assert raised.value.code == "invalid_argument"
    with pytest.raises(M3Error) as raised:
        await quiet.call("entity_graph", {"id": alice["id"], "depth": 9}, A)
    assert raised.value.code == "invalid_argument"


async def test_an_entity_only_a_private_memory_names_exists_only_for_its_agent(quiet: Service) -> None:
    secret = await write(quiet, "Project Falcon pays Zed Corp $40,000.", A)  # scope agent: A's own
    await write(quiet, "Zed Corp ships on Friday.", B, scope="org")
    await extract(quiet)
    assert [i["name"] for i in await find(quiet, "falcon", A)] == ["Project Falcon"]
    assert await find(quiet, "falcon", B) == []
    assert (await quiet.call("entity_list", {}, B))["count"] == 1  # B's shared Zed Corp only
    [b_zed] = await find(quiet, "zed", B)
    [a_zed] = [i for i in await find(quiet, "zed", A) if i["id"] != b_zed["id"]]  # A sees both
    assert a_zed["scope"] == "agent" and b_zed["scope"] == "org"
    with pytest.raises(M3Error) as raised:
        await quiet.call("entity_get", {"id": a_zed["id"]}, B)
    assert raised.value.code == "not_found"
    seen = await quiet.call("entity_get", {"id": b_zed["id"]}, B)
    assert secret not in {m["memory_id"] for m in seen["mention_list"]}
    graph = await quiet.call("entity_graph", {"id": b_zed["id"], "depth": 3}, B)
    assert secret not in {e["memory_id"] for e in graph["edges"]}
    assert {n["name"] for n in graph["nodes"]} == {"Zed Corp"}
    relations = await quiet.call("entity_relations", {}, B)
    assert all(r["memory_id"] != secret for r in relations["items"])
    with pytest.raises(M3Error) as raised:
        await quiet.call("entity_merge", {"source_id": a_zed["id"], "target_id": b_zed["id"]}, B)
    assert raised.value.code == "not_found"


async def test_a_deleted_memory_drops_its_mentions_and_the_entities_only_it_named(quiet: Service) -> None:
    gone = await write(quiet, "Quentin Blake visited Oslo.", scope="org")
    await write(quiet, "It is cold in Oslo.", scope="org")
    await extract(quiet)
    await quiet.call("memory_delete", {"id": gone}, A)
    done = await extract(quiet)
    assert done["dropped_mentions"] == 2 and done["dropped_entities"] == 1
    assert await find(quiet, "quentin") == []
    [oslo] = await find(quiet, "oslo")
    assert oslo["mentions"] == 1


async def test_an_update_in_place_indexes_the_new_text_and_forgets_the_old_names(quiet: Service) -> None:
    kept = await write(quiet, "Quentin Blake works at Acme Corp.", scope="org")
    await extract(quiet)
    await quiet.call("memory_update", {"id": kept, "content": "Rosa Diaz works at Initech."}, A)
    done = await extract(quiet)
    assert (done["dropped_entities"], done["remaining"]) == (2, 0)
    assert await find(quiet, "quentin") == [] and await find(quiet, "acme") == []
    [rosa] = await find(quiet, "rosa")
    assert rosa["mentions"] == 1
    [fact] = (await quiet.call("entity_relations", {}, A))["items"]
    assert (fact["subject_name"], fact["predicate"], fact["object_name"]) == ("Rosa Diaz", "works_at", "Initech")


async def test_a_restored_memory_names_its_entities_again(quiet: Service) -> None:
    gone = await write(quiet, "Quentin Blake visited Oslo.", scope="org")
    await extract(quiet)
    await quiet.call("memory_delete", {"id": gone}, A)
    await extract(quiet)
    assert await find(quiet, "quentin") == []
    await quiet.call("memory_restore", {"id": gone}, A)
    done = await extract(quiet)
    assert (done["memories"], done["mentions"], done["remaining"]) == (1, 2, 0)
    [quentin] = await find(quiet, "quentin")
    assert quentin["mentions"] == 1


async def test_gdpr_forget_erases_the_entities_only_the_subject_mentioned(quiet: Service) -> None:
    await write(quiet, "Ursula Vance works at Yoyodyne.", A, scope="org")
    await write(quiet, "Yoyodyne moved to Austin.", B, scope="org")
    await write(quiet, "Private: Ursula Vance owes $5.", A)
    await extract(quiet)
    exported = await quiet.call("gdpr_export", {"agent_id": "agent-a"}, CallContext(agent_id=None))
    assert {m["surface"] for m in exported["entity_mentions"]} == {"Ursula Vance", "Yoyodyne", "$5"}
    assert [r["predicate"] for r in exported["entity_relations"]] == ["works_at"]
    done = await quiet.call("gdpr_forget", {"agent_id": "agent-a", "confirm": True},
                            CallContext(agent_id=None))
    assert done["counts"]["entities"] == 3  # shared Ursula Vance, private Ursula Vance and USD 5
    assert await find(quiet, "ursula", B) == []
    [yoyodyne] = await find(quiet, "yoyodyne", B)
    assert yoyodyne["mentions"] == 1
    assert [r["predicate"] for r in (await quiet.call("entity_relations", {}, B))["items"]] == ["moved_to"]


async def test_gdpr_forget_erases_the_entity_pass_notes_of_the_erased_memories(quiet: Service, config: Config
                                                                               ) -> None:
    mine = await write(quiet, "Ursula Vance works at Yoyodyne.", A)
    theirs = await write(quiet, "Yoyodyne moved to Austin.", B)
    for memory_id, ctx in ((mine, A), (theirs, B)):
        await quiet.call("memory_update", {"id": memory_id, "content": "Changed: Yoyodyne."}, ctx)
    await quiet.call("gdpr_forget", {"agent_id": "agent-a", "confirm": True}, CallContext(agent_id=None))
    engine = open_engine(StoreOptions(url=config["store.url"]), "reader")
    try:
        with engine.connect() as conn:
            assert list(conn.execute(select(entity_stale.c.memory_id)).scalars()) == [theirs]
    finally:
        engine.dispose()


async def test_extract_with_a_limit_leaves_the_rest_of_the_backlog_for_later(quiet: Service) -> None:
    for person in ("Alice Smith", "Bob Jones", "Carol White"):
        await write(quiet, f"We met {person} today.", scope="org")
    first = await quiet.call("entity_extract", {"limit": 2}, A)
    assert (first["memories"], first["remaining"]) == (2, 1)
    assert (await extract(quiet))["memories"] == 1


async def test_list_pages_by_mentions_and_filters_by_type(quiet: Service) -> None:
    await write(quiet, "We met Alice Smith on 2026-03-01.", scope="org")
    await write(quiet, "We met Alice Smith and Bob Jones on 2026-03-02.", scope="org")
    await extract(quiet)
    page = await quiet.call("entity_list", {"limit": 1}, A)
    assert [(i["name"], i["mentions"]) for i in page["items"]] == [("Alice Smith", 2)]
    rest = await quiet.call("entity_list", {"limit": 10, "offset": 1}, A)
    assert rest["count"] == 3
    dates = await quiet.call("entity_list", {"type": "date"}, A)
    assert sorted(i["name"] for i in dates["items"]) == ["2026-03-01", "2026-03-02"]


async def test_a_malformed_entity_type_setting_is_a_config_error(config: Config, embedder: MiniLMEmbedder) -> None:
    with pytest.raises(M3Error) as raised:
        ActorSystem(config.with_overrides(entities__types=["ticket=("]), embedder)
    assert raised.value.code == "config_error"


async def test_configured_types_are_extracted(config: Config, embedder: MiniLMEmbedder) -> None:
    settled = config.with_overrides(entities__enabled=False, entities__types=[r"ticket=\bOPS-\d+\b"])
    system = ActorSystem(settled, embedder).start()
    try:
        svc = Service(settled, system, default_registry())
        await write(svc, "OPS-17 is blocked on the vendor.", scope="org")
        await extract(svc)
        [ticket] = (await svc.call("entity_list", {"type": "ticket"}, A))["items"]
        assert ticket["name"] == "OPS-17"
    finally:
        system.stop()
