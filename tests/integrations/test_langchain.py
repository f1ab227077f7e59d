"""LangChain's retriever and LangGraph's store on m3, with the real framework packages, on each store."""

from __future__ import annotations

import asyncio
from typing import Any, TypedDict

import pytest

pytest.importorskip("langchain_core")
pytest.importorskip("langgraph")

from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore, InvalidNamespaceError, ListNamespacesOp, MatchCondition, PutOp

from m3.errors import M3Error
from m3.gateway.service import Service
from m3.integrations.client import M3Client
from m3.integrations.langchain import M3Retriever
from m3.integrations.langgraph_store import M3Store


@pytest.fixture
def langchain(service: Service) -> M3Client:
    return M3Client(service, "langchain")


def remember(client: M3Client, content: str, **extra: Any) -> str:
    return str(client.call("memory_write", {"content": content, **extra})["id"])


def test_the_retriever_answers_with_the_memories_m3_finds_as_documents(langchain: M3Client) -> None:
    kept = remember(langchain, "The deploy window is Tuesday at 14:00 UTC", type="decision", title="deploy window")
    remember(langchain, "The office plant needs water on Fridays")
    docs = M3Retriever(client=langchain, k=1).invoke("when is the deploy window")
    assert [d.id for d in docs] == [kept]
    assert docs[0].page_content == "The deploy window is Tuesday at 14:00 UTC"
    assert docs[0].metadata["type"] == "decision" and docs[0].metadata["title"] == "deploy window"
    assert docs[0].metadata["agent_id"] == "langchain" and docs[0].metadata["score"] > 0


def test_the_retrievers_filters_are_memory_searchs_and_a_bad_one_is_a_coded_error(langchain: M3Client) -> None:
    remember(langchain, "Tabs are preferred over spaces in the build scripts", type="preference")
    note = remember(langchain, "Spaces are used in the build scripts today", type="note")
    docs = M3Retriever(client=langchain, filters={"type": "note"}).invoke("spaces in the build scripts")
    assert [d.id for d in docs] == [note]
    with pytest.raises(M3Error) as raised:
        M3Retriever(client=langchain, filters={"colour": "red"}).invoke("spaces")
    assert raised.value.code == "invalid_argument"


def test_the_retriever_never_finds_another_agents_private_memory(langchain: M3Client) -> None:
    other = langchain.as_agent("crewai-researcher")
    remember(other, "The private okapi budget is 400 euros")
    shared = remember(other, "The shared okapi budget is 900 euros", scope="org")
    docs = M3Retriever(client=langchain).invoke("okapi budget")
    assert [d.id for d in docs] == [shared]


def test_asynchronous_retrieval_finds_what_synchronous_retrieval_finds(langchain: M3Client) -> None:
    kept = remember(langchain, "The quokka enclosure opens at nine")
    docs = asyncio.run(M3Retriever(client=langchain).ainvoke("quokka enclosure"))
    assert [d.id for d in docs] == [kept]


def test_the_store_puts_gets_replaces_and_deletes_items_keeping_each_version(langchain: M3Client) -> None:
    store = M3Store(langchain)
    store.put(("users", "ada"), "prefs", {"food": "pizza", "level": 3})
    store.put(("users", "bob"), "prefs", {"food": "pizza", "level": 3})  # equal value, other key: its own item
    first = store.get(("users", "ada"), "prefs")
    assert first is not None and first.value == {"food": "pizza", "level": 3}
    assert first.namespace == ("users", "ada") and first.key == "prefs"
    store.put(("users", "ada"), "prefs", {"food": "sushi", "level": 3})
    second = store.get(("users", "ada"), "prefs")
    assert second is not None and second.value["food"] == "sushi"
    assert second.created_at == first.created_at and second.updated_at > first.updated_at
    found = langchain.call("memory_search", {"query": "sushi"})["items"]
    history = langchain.call("memory_history", {"id": found[0]["id"]})
    assert len(history["versions"]) == 2  # the old value stays in m3's history
    store.delete(("users", "ada"), "prefs")
    assert store.get(("users", "ada"), "prefs") is None
    assert store.get(("users", "bob"), "prefs") is not None
    assert store.get(("users",), "prefs") is None


def test_store_search_stays_under_the_prefix_applies_filters_and_pages(langchain: M3Client) -> None:
    store = M3Store(langchain)
    store.put(("docs", "a"), "1", {"text": "the ibis nests by the river", "status": "draft", "n": 1})
    store.put(("docs", "a"), "2", {"text": "the ibis eats frogs", "status": "final", "n": 2})
    store.put(("docs", "b"), "3", {"text": "the ibis migrates south", "status": "final", "n": 3})
    store.put(("notes",), "4", {"text": "the ibis is a bird", "status": "final", "n": 4})
    assert {i.key for i in store.search(("docs",), query="ibis")} == {"1", "2", "3"}
    assert {i.key for i in store.search(("docs", "a"))} == {"1", "2"}
    assert [i.key for i in store.search(("docs",), filter={"status": "final", "n": {"$gt": 2}})] == ["3"]
    hits = store.search((), query="frogs", limit=1)
    assert [i.key for i in hits] == ["2"] and hits[0].score is not None
    assert len(store.search(("docs",), limit=2)) == 2
    assert len(store.search(("docs",), limit=2, offset=2)) == 1


def test_store_lists_namespaces_by_prefix_suffix_and_depth(langchain: M3Client) -> None:
    store = M3Store(langchain)
    for namespace in [("users", "ada", "prefs"), ("users", "bob", "prefs"), ("teams", "core", "v1")]:
        store.put(namespace, "k", {"x": 1})
    assert store.list_namespaces() == [("teams", "core", "v1"), ("users", "ada", "prefs"), ("users", "bob", "prefs")]
    assert store.list_namespaces(prefix=("users",)) == [("users", "ada", "prefs"), ("users", "bob", "prefs")]
    assert store.list_namespaces(suffix=("v1",)) == [("teams", "core", "v1")]
    assert store.list_namespaces(prefix=("users", "*", "prefs"), max_depth=2) == [("users", "ada"), ("users", "bob")]
    assert store.batch([store_op("users")]) == [[("users", "ada", "prefs"), ("users", "bob", "prefs")]]


def store_op(prefix: str) -> ListNamespacesOp:
    return ListNamespacesOp(match_conditions=(MatchCondition("prefix", (prefix,)),))


def test_the_store_is_private_to_its_agent(langchain: M3Client) -> None:
    M3Store(langchain).put(("shared",), "k", {"secret": "the heron code is 77"})
    other = M3Store(langchain.as_agent("someone-else"))
    assert other.get(("shared",), "k") is None
    assert other.search(("shared",)) == []
    assert langchain.as_agent("someone-else").call("memory_search", {"query": "heron code"})["count"] == 0


def test_the_asynchronous_store_methods_run_the_same_operations(langchain: M3Client) -> None:
    store = M3Store(langchain)

    async def scenario() -> Any:
        await store.aput(("a",), "k", {"v": "egret"})
        item = await store.aget(("a",), "k")
        found = await store.asearch(("a",), query="egret")
        await store.adelete(("a",), "k")
        return item, found, await store.aget(("a",), "k")

    item, found, gone = asyncio.run(scenario())
    assert item is not None and item.value == {"v": "egret"}
    assert [i.key for i in found] == ["k"] and gone is None


class Turn(TypedDict):
    user: str
    reply: str


def test_a_compiled_langgraph_graph_remembers_through_the_store(langchain: M3Client) -> None:
    def remember_node(state: Turn, *, store: BaseStore) -> dict[str, str]:
        store.put(("memories", "ada"), "latest", {"text": state["user"]})
        return {}

    def recall_node(state: Turn, *, store: BaseStore) -> dict[str, str]:
        hits = store.search(("memories", "ada"), query="favourite colour")
        return {"reply": hits[0].value["text"] if hits else "nothing"}

    graph = StateGraph(Turn)
    graph.add_node("remember", remember_node)
    graph.add_node("recall", recall_node)
    graph.add_edge(START, "remember")
    graph.add_edge("remember", "recall")
    graph.add_edge("recall", END)
    app = graph.compile(store=M3Store(langchain))
    assert app.invoke({"user": "my favourite colour is teal", "reply": ""})["reply"] == "my favourite colour is teal"


def test_a_value_m3_refuses_is_a_coded_error_and_nothing_is_stored(langchain: M3Client) -> None:
    store = M3Store(langchain)
    huge = "x" * (langchain.service.config["limits.max_content_chars"] + 1)
    with pytest.raises(M3Error) as raised:
        store.put(("a",), "k", {"text": huge})
    assert raised.value.code == "content_too_large"
    assert store.get(("a",), "k") is None
    with pytest.raises(InvalidNamespaceError):
        store.batch([PutOp(("a.b",), "k", {"x": 1})])
    assert store.list_namespaces() == []
