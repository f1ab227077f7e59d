"""PydanticAI on m3: the toolset of registry tools and the recall history processor, driven by PydanticAI's
own FunctionModel (no network, no key), on each store."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

pytest.importorskip("pydantic_ai")

from pydantic_ai import Agent, AgentRunResult
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, SystemPromptPart, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from m3.gateway.service import Service
from m3.integrations.client import M3Client
from m3.integrations.pydantic_ai import DEFAULT_TOOLS, RECALL_HEADER, M3Recall, M3Toolset


@pytest.fixture
def client(service: Service) -> M3Client:
    return M3Client(service, "pydantic-ai")


def run(agent: Agent[None, str], prompt: str, **options: Any) -> AgentRunResult[str]:
    """One run on a fresh asyncio loop (``run_sync`` leaves its loop open, a ResourceWarning later)."""
    return asyncio.run(agent.run(prompt, **options))


def scripted(*calls: tuple[str, dict[str, Any]]) -> FunctionModel:
    """A model that makes these tool calls one per turn, then answers with the last tool output it saw."""
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        turn = sum(isinstance(m, ModelResponse) for m in messages)
        if turn < len(calls):
            name, args = calls[turn]
            return ModelResponse(parts=[ToolCallPart(name, args)])
        returned = [p for p in messages[-1].parts if p.part_kind in ("tool-return", "retry-prompt", "retry-feedback")]
        content = returned[-1].content if returned else ""
        return ModelResponse(parts=[TextPart(content if isinstance(content, str) else json.dumps(content))])
    return FunctionModel(respond)


def test_the_toolset_lists_registry_tools_with_their_descriptions_and_json_schemas(client: M3Client) -> None:
    seen: dict[str, Any] = {}

    def look(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.update({tool.name: tool for tool in info.function_tools})
        return ModelResponse(parts=[TextPart("ok")])

    run(Agent(FunctionModel(look), toolsets=[M3Toolset(client)]), "hello")
    assert sorted(seen) == sorted(DEFAULT_TOOLS)
    write = client.service.registry.get("memory_write")
    assert seen["memory_write"].description == write.spec.description
    assert seen["memory_write"].parameters_json_schema == write.input_schema
    assert seen["memory_write"].metadata["destructive"] is False
    domain = M3Toolset(client, domains=["task"])
    assert set(domain.tools) == {tool.spec.name for tool in client.service.registry.domain("task")}


def test_a_model_writes_and_finds_a_memory_through_the_toolset_as_its_agent(client: M3Client) -> None:
    model = scripted(("memory_write", {"content": "The ibis colony moved to the east pond", "type": "fact"}),
                     ("memory_search", {"query": "where is the ibis colony"}))
    answer = run(Agent(model, toolsets=[M3Toolset(client)]), "remember and recall the ibis")
    found = json.loads(answer.output)
    assert found["items"][0]["content"] == "The ibis colony moved to the east pond"
    assert found["items"][0]["agent_id"] == "pydantic-ai"


def test_an_m3_error_goes_back_to_the_model_as_a_retry_with_its_code(client: M3Client) -> None:
    model = scripted(("memory_get", {"id": "00000000-0000-4000-8000-000000000000"}))
    answer = run(Agent(model, toolsets=[M3Toolset(client)]), "get it")
    assert '"code": "not_found"' in answer.output
    model = scripted(("memory_write", {"content": "x", "type": "gossip"}))
    answer = run(Agent(model, toolsets=[M3Toolset(client)]), "write it")
    assert '"code": "unknown_memory_type"' in answer.output
    assert client.call("memory_search", {"query": "x"})["count"] == 0


def prompts_seen(messages: list[ModelMessage], into: list[list[Any]]) -> None:
    request = messages[-1]
    assert isinstance(request, ModelRequest)
    into.append(list(request.parts))


def test_recall_puts_the_relevant_memories_before_the_user_prompt_once(client: M3Client) -> None:
    client.call("memory_write", {"content": "Ada prefers green tea in the afternoon", "type": "preference"})
    client.call("memory_write", {"content": "The server room is on the third floor"})
    requests: list[list[Any]] = []

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        prompts_seen(messages, requests)
        return ModelResponse(parts=[TextPart("noted")])

    agent = Agent(FunctionModel(answer), capabilities=[ProcessHistory(M3Recall(client, k=1))])
    first = run(agent, "what tea does Ada like?")
    run(agent, "and which floor is the server room on?", message_history=first.all_messages())
    recall, prompt = requests[0][-2:]
    assert isinstance(recall, SystemPromptPart) and recall.content.startswith(RECALL_HEADER)
    assert "Ada prefers green tea" in recall.content and "server room" not in recall.content
    assert prompt.content == "what tea does Ada like?"
    second = [p.content for p in requests[1] if RECALL_HEADER in str(p.content)]
    assert len(second) == 1 and "third floor" in second[0] and "green tea" not in second[0]


def test_recall_shows_no_private_memory_of_another_agent(client: M3Client) -> None:
    client.as_agent("langchain").call("memory_write", {"content": "The langchain agent's heron password is 55"})
    client.as_agent("langchain").call("memory_write", {"content": "The heron feeding time is noon", "scope": "org"})
    requests: list[list[Any]] = []

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        prompts_seen(messages, requests)
        return ModelResponse(parts=[TextPart("ok")])

    run(Agent(FunctionModel(answer), capabilities=[ProcessHistory(M3Recall(client))]), "tell me about the heron")
    recall = requests[0][-2]
    assert "feeding time is noon" in recall.content and "password" not in recall.content
