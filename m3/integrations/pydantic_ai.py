"""PydanticAI: m3's tools as a toolset, and recall of relevant memories (extra ``m3-memory[pydantic-ai]``).

- :class:`M3Toolset` is an ``AbstractToolset`` of m3 tools taken from the registry: each keeps its name,
  its description (the text the model reads) and its arguments' JSON Schema, and runs through
  ``Service.call`` as the client's agent. An error the model can act on (m3's 4xx codes: a bad argument,
  an unknown id, a refusal) goes back to it as a retry carrying m3's ``{code, message, hint}``; anything
  else raises.
- :class:`M3Recall` is a history processor (``capabilities=[ProcessHistory(M3Recall(client))]``): before a
  model request that answers a user prompt it searches m3 for that prompt and puts the memories found, as
  one system prompt part, just before it (PydanticAI sends a system part after the first request as user
  text in ``<system>`` tags). It runs once per user prompt.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from pydantic_ai import ModelRetry
from pydantic_ai.messages import ModelMessage, ModelRequest, SystemPromptPart, UserPromptPart
from pydantic_ai.tools import AgentDepsT, RunContext, ToolDefinition
from pydantic_ai.toolsets import AbstractToolset, ToolsetTool
from pydantic_core import SchemaValidator, core_schema

from m3.errors import M3Error
from m3.gateway.registry import Tool
from m3.integrations.client import M3Client

#: The tools an agent gets by default: the memory tools MCP lists at start (m3_call aside).
DEFAULT_TOOLS = ("memory_write", "memory_search", "memory_get", "memory_supersede", "chatlog_search")

#: Arguments are validated by m3 (its coded errors); here only "a JSON object".
_ANY_OBJECT = SchemaValidator(core_schema.dict_schema(core_schema.str_schema(), core_schema.any_schema()))

#: The first line of the part recall adds; a request holding it has had its recall.
RECALL_HEADER = "Memories from m3 that may be relevant to the user's message:"


class M3Toolset(AbstractToolset[AgentDepsT]):
    """m3 tools for a PydanticAI agent: ``tools`` by name, and every tool of ``domains`` (default: DEFAULT_TOOLS)."""

    def __init__(self, client: M3Client, tools: Iterable[str] | None = None, *, domains: Iterable[str] = (),
                 id: str | None = "m3", max_retries: int = 1):
        registry = client.service.registry
        names = list(tools) if tools is not None else ([] if domains else list(DEFAULT_TOOLS))
        chosen = [registry.get(name) for name in names] + [t for d in domains for t in registry.domain(d)]
        self.client = client
        self.tools: dict[str, Tool] = {tool.spec.name: tool for tool in chosen}
        self._id = id
        self.max_retries = max_retries

    @property
    def id(self) -> str | None:
        return self._id

    async def get_tools(self, ctx: RunContext[AgentDepsT]) -> dict[str, ToolsetTool[AgentDepsT]]:
        return {name: ToolsetTool(toolset=self, tool_def=definition(tool), max_retries=self.max_retries,
                                  args_validator=_ANY_OBJECT)
                for name, tool in self.tools.items()}

    async def call_tool(self, name: str, tool_args: dict[str, Any], ctx: RunContext[AgentDepsT],
                        tool: ToolsetTool[AgentDepsT]) -> Any:
        try:
            return await self.client.acall(name, tool_args)
        except M3Error as exc:
            if exc.http_status >= 500:
                raise
            raise ModelRetry(json.dumps(exc.to_dict())) from exc


def definition(tool: Tool) -> ToolDefinition:
    """A PydanticAI tool definition from an m3 registry tool (name, description, argument schema, flags)."""
    spec = tool.spec
    return ToolDefinition(name=spec.name, description=spec.description, parameters_json_schema=tool.input_schema,
                          metadata={"m3_domain": spec.domain, "read_only": spec.read_only,
                                    "destructive": spec.destructive})


@dataclass(frozen=True)
class M3Recall:
    """Put the memories m3 finds for the latest user prompt before it (see the module docstring).

    ``k`` memories at most, of score ``min_score`` or more; ``filters`` are memory_search's (type, scope …).
    """

    client: M3Client
    k: int = 5
    min_score: float = 0.0
    filters: dict[str, Any] | None = None

    async def __call__(self, messages: list[ModelMessage]) -> list[ModelMessage]:
        if not messages or not isinstance(messages[-1], ModelRequest):
            return messages
        request = messages[-1]
        prompt = _prompt_text(request.parts)
        if prompt is None or any(_is_recall(part) for part in request.parts):
            return messages
        # A query is bounded like any text argument of m3; the start of a long prompt says what it is about.
        query = prompt[:self.client.service.config["limits.max_text_chars"]]
        found = await self.client.acall("memory_search", {**(self.filters or {}), "query": query, "k": self.k})
        lines = [f"- {item['content']}" for item in found["items"] if item["score"] >= self.min_score]
        if not lines:
            return messages
        recall = SystemPromptPart(content="\n".join([RECALL_HEADER, *lines]))
        at = max(i for i, part in enumerate(request.parts) if isinstance(part, UserPromptPart) and not _is_recall(part))
        parts = [*request.parts[:at], recall, *request.parts[at:]]
        return [*messages[:-1], replace(request, parts=parts)]


def _prompt_text(parts: Sequence[Any]) -> str | None:
    """The text of the request's last user prompt (its text pieces, for a multimodal one), or None."""
    prompts = [part for part in parts if isinstance(part, UserPromptPart) and not _is_recall(part)]
    if not prompts:
        return None
    content = prompts[-1].content
    text = content if isinstance(content, str) else " ".join(c for c in content if isinstance(c, str))
    return text.strip() or None


def _is_recall(part: Any) -> bool:
    # PydanticAI sends a system part that is not at the start of the conversation as a user part wrapped in
    # <system> tags, and keeps it so in the history: both forms are a recall.
    return isinstance(part, SystemPromptPart | UserPromptPart) and isinstance(part.content, str) \
        and RECALL_HEADER in part.content
