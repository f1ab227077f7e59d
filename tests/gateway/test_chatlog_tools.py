"""The chatlog tools beyond write and search, through the service and the command line, on each store:
chatlog_write_bulk appends many messages in one transaction, all or none."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from m3.actors.supervisor import ActorHandle
from m3.actors.system import ActorSystem
from m3.config import Config
from m3.embed.minilm import MiniLMEmbedder
from m3.errors import M3Error
from m3.gateway.registry import default_registry
from m3.gateway.service import CallContext, Service
from m3.protocols.messages.memory import ChatEntry, WriteChats
from m3.protocols.tools.chatlog import MAX_CHAT_BULK
from tests.actors.conftest import WAIT_S
from tests.gateway.outcomes import Run

A, B = CallContext(agent_id="agent-a"), CallContext(agent_id="agent-b")


@pytest.fixture
def store_cli(env: dict[str, str], cli: Run, monkeypatch: pytest.MonkeyPatch) -> Run:
    """The in-process ``m3`` on the store under test."""
    monkeypatch.setenv("M3_STORE_URL", env["M3_STORE_URL"])
    return cli


def said(*contents: str, **extra: Any) -> list[dict[str, Any]]:
    return [{"conversation_id": "c1", "role": "user" if i % 2 == 0 else "assistant", "content": c, **extra}
            for i, c in enumerate(contents)]


@pytest.mark.anyio
async def test_bulk_appends_in_order_with_the_next_turns_and_search_finds_them(service: Service) -> None:
    await service.call("chatlog_write", {"conversation_id": "c1", "role": "user", "content": "first words"}, A)
    done = await service.call("chatlog_write_bulk", {"messages": said("the zebra", "the quokka", "the ibis")}, A)
    assert done["count"] == 3
    assert [item["turn"] for item in done["items"]] == [1, 2, 3]
    assert len({item["id"] for item in done["items"]}) == 3
    found = await service.call("chatlog_search", {"query": "quokka"}, A)
    assert [item["id"] for item in found["items"]] == [done["items"][1]["id"]]
    assert found["items"][0]["agent_id"] == "agent-a"


@pytest.mark.anyio
async def test_bulk_is_all_or_nothing_and_bounded(service: Service) -> None:
    bad = [*said("kept out okapi"), {"conversation_id": "c1", "role": "user", "content": "x", "turn": -1}]
    with pytest.raises(M3Error) as raised:
        await service.call("chatlog_write_bulk", {"messages": bad}, A)
    assert raised.value.code == "invalid_argument"
    too_many = said(*(f"m{i}" for i in range(MAX_CHAT_BULK + 1)))
    with pytest.raises(M3Error) as raised:
        await service.call("chatlog_write_bulk", {"messages": too_many}, A)
    assert raised.value.code == "field_too_large"
    with pytest.raises(M3Error) as raised:
        await service.call("chatlog_write_bulk", {"messages": []}, A)
    assert raised.value.code == "invalid_argument"
    assert (await service.call("chatlog_search", {"query": "okapi"}, A))["count"] == 0


@pytest.mark.anyio
async def test_bulk_private_messages_stay_private_under_isolation(service: Service) -> None:
    await service.call("chatlog_write_bulk", {"messages": said("a secret walrus")}, A)
    with pytest.raises(M3Error) as raised:
        await service.call("chatlog_write_bulk", {"messages": said("x"), "agent_id": "agent-a"},
                           CallContext(agent_id="agent-b", bound=True))
    assert raised.value.code == "forbidden"
    assert (await service.call("chatlog_search", {"query": "walrus"}, B))["count"] == 0  # isolation is on by default


def test_bulk_on_the_command_line(store_cli: Run) -> None:
    messages = json.dumps(said("one pelican", "two pelicans"))
    done = store_cli("chatlog", "write_bulk", "--messages", messages, "--agent-id", "agent-a").document()
    assert [item["turn"] for item in done["items"]] == [0, 1]
    again = store_cli("chatlog", "chatlog_write_bulk", "--messages", json.dumps(said("three")), "--agent-id", "agent-a")
    assert again.document()["items"][0]["turn"] == 2
    assert store_cli("chatlog", "write_bulk", "--messages", "[]").error()["code"] == "invalid_argument"


# -- chatlog_list ---------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_list_pages_one_conversation_in_turn_order(service: Service) -> None:
    written = (await service.call("chatlog_write_bulk", {"messages": said(*(f"m{i}" for i in range(5)))}, A))["items"]
    first = await service.call("chatlog_list", {"conversation_id": "c1", "limit": 2}, A)
    assert [item["content"] for item in first["items"]] == ["m0", "m1"]
    assert first["next_after_turn"] == 1 and first["conversations"] == []
    rest = await service.call("chatlog_list", {"conversation_id": "c1", "after_turn": 1, "limit": 10}, A)
    assert [item["id"] for item in rest["items"]] == [w["id"] for w in written[2:]]
    assert rest["next_after_turn"] is None
    assert (await service.call("chatlog_list", {"conversation_id": "nowhere"}, A))["count"] == 0


@pytest.mark.anyio
async def test_list_conversations_counts_only_what_the_caller_may_read(service: Service) -> None:
    await service.call("chatlog_write_bulk", {"messages": said("a1", "a2")}, A)
    await service.call("chatlog_write_bulk", {"messages": [
        {"conversation_id": "c2", "role": "user", "content": "b private"},
        {"conversation_id": "c1", "role": "user", "content": "b shared", "scope": "user"}]}, B)
    mine = {c["conversation_id"]: c for c in (await service.call("chatlog_list", {}, A))["conversations"]}
    assert set(mine) == {"c1"} and mine["c1"]["messages"] == 3
    assert mine["c1"]["first_at"] <= mine["c1"]["last_at"]
    theirs = {c["conversation_id"]: c["messages"] for c in (await service.call("chatlog_list", {}, B))["conversations"]}
    assert theirs == {"c1": 1, "c2": 1}
    seen = await service.call("chatlog_list", {"conversation_id": "c1"}, B)
    assert [item["content"] for item in seen["items"]] == ["b shared"]


def test_list_on_the_command_line(store_cli: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("M3_IDENTITY_AGENT_ID", "agent-a")
    store_cli("chatlog", "write_bulk", "--messages", json.dumps(said("p0", "p1", "p2")))
    page = store_cli("chatlog", "list", "--conversation-id", "c1", "--after-turn", "0")
    assert [item["content"] for item in page.document()["items"]] == ["p1", "p2"]
    assert store_cli("chatlog", "list", "--limit", "0").error()["code"] == "invalid_argument"


# -- chatlog_redact -------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_redact_replaces_the_text_keeps_the_record_and_search_forgets_the_words(service: Service) -> None:
    done = (await service.call("chatlog_write_bulk", {"messages": said("my password is hunter2 xylophone",
                                                                        "unrelated xylophone talk")}, A))["items"]
    with pytest.raises(M3Error) as raised:
        await service.call("chatlog_redact", {"id": done[0]["id"]}, A)
    assert raised.value.code == "confirmation_required"
    redacted = await service.call("chatlog_redact", {"id": done[0]["id"], "reason": "a secret", "confirm": True}, A)
    assert (redacted["redacted_by"], redacted["reason"], redacted["turn"]) == ("agent-a", "a secret", 0)
    assert (await service.call("chatlog_search", {"query": "hunter2"}, A))["count"] == 0
    left = await service.call("chatlog_search", {"query": "xylophone"}, A)
    assert [item["id"] for item in left["items"]] == [done[1]["id"]]
    listed = (await service.call("chatlog_list", {"conversation_id": "c1"}, A))["items"]
    assert listed[0]["content"] == "[redacted]" and listed[0]["redacted_at"] is not None
    assert listed[1]["redacted_at"] is None


@pytest.mark.anyio
async def test_only_the_author_may_redact_others_get_not_found(service: Service) -> None:
    private, shared = (await service.call("chatlog_write_bulk", {"messages": [
        {"conversation_id": "c1", "role": "user", "content": "private penguin"},
        {"conversation_id": "c1", "role": "user", "content": "shared penguin", "scope": "org"}]}, A))["items"]
    for chat_id in (private["id"], shared["id"], "00000000-0000-4000-8000-000000000000"):
        with pytest.raises(M3Error) as raised:
            await service.call("chatlog_redact", {"id": chat_id, "confirm": True}, B)
        assert raised.value.code == "not_found"
    assert (await service.call("chatlog_search", {"query": "penguin"}, A))["count"] == 2


def test_redact_on_the_command_line(store_cli: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("M3_IDENTITY_AGENT_ID", "agent-a")
    [written] = store_cli("chatlog", "write_bulk", "--messages", json.dumps(said("the gannet"))).document()["items"]
    done = store_cli("chatlog", "redact", "--id", written["id"], "--confirm", "--reason", "typo").document()
    assert done["reason"] == "typo"
    assert store_cli("chatlog", "search", "--query", "gannet").document()["count"] == 0
    monkeypatch.setenv("M3_IDENTITY_AGENT_ID", "agent-b")
    assert store_cli("chatlog", "redact", "--id", written["id"], "--confirm").error()["code"] == "not_found"


# -- the semantic leg of chatlog_search ---------------------------------------------------------------

DEPLOY = "The deployment to production failed because the database migration timed out"
#: Shares no word with DEPLOY, only its meaning.
PARAPHRASE = "release broke when schema upgrade took too long"


async def write_and_embed(service: Service, messages: list[dict[str, Any]], ctx: CallContext) -> list[str]:
    done = await service.call("chatlog_write_bulk", {"messages": messages}, ctx)
    service.system.wait_embedded()
    return [item["id"] for item in done["items"]]


@pytest.mark.anyio
async def test_a_paraphrase_sharing_no_word_finds_the_message_by_meaning(service: Service) -> None:
    deploy, _, _ = await write_and_embed(service, said(DEPLOY, "I had pasta for lunch today",
                                                       "Remember to water the plants on Friday"), A)
    found = await service.call("chatlog_search", {"query": PARAPHRASE, "explain": True}, A)
    assert [item["id"] for item in found["items"]] == [deploy]  # the unrelated lines stay below the floor
    [hit] = found["items"]
    assert hit["bm25_score"] == 0 and hit["dense_score"] > 0.3
    assert hit["explanation"]["legs"] == ["dense"]
    assert hit["explanation"]["signals"]["dense"]["value"] == pytest.approx(hit["dense_score"], abs=1e-6)
    by_word = await service.call("chatlog_search", {"query": "migration"}, A)
    assert by_word["items"][0]["id"] == deploy and by_word["items"][0]["bm25_score"] > 0
    assert by_word["items"][0]["dense_score"] is not None  # both legs fused for a keyword hit
    stats = await service.call("chatlog_stats", {}, A)
    assert (stats["messages"], stats["embedded"], stats["pending"]) == (3, 3, 0)


@pytest.mark.anyio
async def test_redaction_drops_the_vector_so_meaning_no_longer_finds_the_text(service: Service) -> None:
    [deploy] = await write_and_embed(service, said(DEPLOY), A)
    assert (await service.call("chatlog_search", {"query": PARAPHRASE}, A))["count"] == 1
    await service.call("chatlog_redact", {"id": deploy, "confirm": True}, A)
    service.system.wait_embedded()  # the redacted row is not embedded again
    assert (await service.call("chatlog_search", {"query": PARAPHRASE}, A))["count"] == 0
    stats = await service.call("chatlog_stats", {}, A)
    assert (stats["redacted"], stats["embedded"], stats["pending"]) == (1, 0, 0)


@pytest.mark.anyio
async def test_the_semantic_leg_and_the_new_reads_keep_private_messages_private(service: Service) -> None:
    [private] = await write_and_embed(service, said(DEPLOY), B)
    assert (await service.call("chatlog_search", {"query": PARAPHRASE}, A))["count"] == 0
    assert (await service.call("chatlog_search", {"query": PARAPHRASE}, B))["count"] == 1
    for args in ({"id": private}, {"conversation_id": "c1", "turn": 0}):
        with pytest.raises(M3Error) as raised:
            await service.call("chatlog_get", args, A)
        assert raised.value.code == "not_found"
    with pytest.raises(M3Error) as raised:
        await service.call("chatlog_context", {"id": private}, A)
    assert raised.value.code == "not_found"
    assert (await service.call("chatlog_stats", {}, A))["messages"] == 0
    assert (await service.call("chatlog_stats", {}, B))["messages"] == 1


@pytest.mark.anyio
async def test_get_reads_one_message_and_context_the_ones_around_it(service: Service) -> None:
    ids = (await service.call("chatlog_write_bulk", {"messages": said(*(f"line {i}" for i in range(6)))}, A))["items"]
    by_id = await service.call("chatlog_get", {"id": ids[2]["id"]}, A)
    by_turn = await service.call("chatlog_get", {"conversation_id": "c1", "turn": 2}, A)
    assert by_id == by_turn and by_id["message"]["content"] == "line 2"
    with pytest.raises(M3Error) as raised:
        await service.call("chatlog_get", {"conversation_id": "c1"}, A)
    assert raised.value.code == "invalid_argument"
    around = await service.call("chatlog_context", {"id": ids[2]["id"], "before": 1, "after": 2}, A)
    assert [item["content"] for item in around["items"]] == ["line 1", "line 2", "line 3", "line 4"]
    edge = await service.call("chatlog_context", {"id": ids[0]["id"], "before": 5, "after": 0}, A)
    assert [item["content"] for item in edge["items"]] == ["line 0"]
    stats = await service.call("chatlog_stats", {}, A)
    assert stats["by_role"] == {"assistant": 3, "user": 3} and stats["conversations"] == 1


@pytest.mark.anyio
async def test_messages_written_while_no_embedder_ran_get_their_vectors_from_the_backlog(
        start_writer: Callable[..., ActorHandle], config: Config, embedder: MiniLMEmbedder) -> None:
    writer = start_writer()
    writer.ask(WriteChats(messages=(ChatEntry(conversation_id="old", role="user", content=DEPLOY),),
                          agent_id="agent-a"), WAIT_S)
    writer.stop(timeout=WAIT_S)
    system = ActorSystem(config, embedder).start()
    try:
        service = Service(config, system, default_registry())
        system.wait_embedded()  # (the backlog may be under way already: nothing is asserted before)
        stats = await service.call("chatlog_stats", {}, A)
        assert (stats["embedded"], stats["pending"]) == (1, 0)
        found = await service.call("chatlog_search", {"query": PARAPHRASE}, A)
        assert [item["conversation_id"] for item in found["items"]] == ["old"]
    finally:
        system.stop()
