"""The chat log's single-row reads and counts: chatlog_get, chatlog_context, chatlog_stats (domain ``chatlog``)."""

from __future__ import annotations

from pydantic import Field, model_validator

from m3.errors import InvalidArgument
from m3.protocols.base import ToolArgs, ToolResult, ToolSpec
from m3.protocols.messages import conversations as msg
from m3.protocols.tools.chatlog import ChatMessage
from m3.protocols.tools.fields import MAX_STORE_INT, Identifier, Scope, Timestamp

#: The most neighbours chatlog_context shows on each side.
MAX_CONTEXT = 50


class ChatlogGetArgs(ToolArgs):
    id: Identifier | None = Field(None, description="The message's id (from chatlog_write, chatlog_search ...).")
    conversation_id: Identifier | None = Field(None, description="With turn, instead of id.")
    turn: int | None = Field(None, ge=0, le=MAX_STORE_INT, description="With conversation_id: the message at it.")

    @model_validator(mode="after")
    def _one_way(self) -> ChatlogGetArgs:
        if (self.id is None) == (self.conversation_id is None or self.turn is None):
            raise InvalidArgument("chatlog_get needs either id, or conversation_id and turn",
                                  hint="chatlog_get id=<id>, or conversation_id=<c> turn=<n>.")
        return self


class ChatlogGetResult(ToolResult):
    message: ChatMessage


CHATLOG_GET = ToolSpec(
    name="chatlog_get", domain="chatlog", args=ChatlogGetArgs, result=ChatlogGetResult,
    message=msg.GetChat, actor="searcher", read_only=True,
    description=(
        "Read one message of the verbatim log by its id, or by conversation and turn, e.g. to quote a search hit "
        "exactly or check whether it was redacted. A message you may not see is not_found."
    ),
    audit=lambda res: [('chat', res.message.id)],
)


class ChatlogContextArgs(ToolArgs):
    id: Identifier = Field(description="The message in the middle (e.g. a chatlog_search hit).")
    before: int = Field(3, ge=0, le=MAX_CONTEXT, description=f"Messages before it; at most {MAX_CONTEXT}.")
    after: int = Field(3, ge=0, le=MAX_CONTEXT, description=f"Messages after it; at most {MAX_CONTEXT}.")


class ChatlogContextResult(ToolResult):
    conversation_id: str
    id: str = Field(description="The message asked about (one of items).")
    count: int
    items: list[ChatMessage] = Field(description="In turn order: the earlier messages, it, the later ones.")


CHATLOG_CONTEXT = ToolSpec(
    name="chatlog_context", domain="chatlog", args=ChatlogContextArgs, result=ChatlogContextResult,
    message=msg.ChatContext, actor="searcher", read_only=True,
    description=(
        "Show the messages around one message of the verbatim log (a few before and after it in its "
        "conversation), e.g. to read what led to a chatlog_search hit without replaying the whole conversation."
    ),
    audit=lambda res: (('chat', item.id) for item in res.items),
)


class ChatlogStatsArgs(ToolArgs):
    scope: Scope | None = Field(None, description="Only messages of this scope.")


class ChatlogStatsResult(ToolResult):
    messages: int
    conversations: int
    by_role: dict[str, int]
    by_scope: dict[str, int]
    agents: int = Field(description="How many agents wrote the messages counted.")
    redacted: int
    embedded: int = Field(description="Messages with a vector of the model search uses (the semantic leg).")
    pending: int = Field(description="Unredacted messages still waiting for that vector.")
    model: str | None = Field(description="The model whose vectors chatlog_search compares.")
    first_at: Timestamp | None
    last_at: Timestamp | None


CHATLOG_STATS = ToolSpec(
    name="chatlog_stats", domain="chatlog", args=ChatlogStatsArgs, result=ChatlogStatsResult,
    message=msg.ChatStats, actor="searcher", read_only=True,
    description=(
        "Count the verbatim log you can see: messages, conversations, per role and scope, redacted ones, and how "
        "many have a vector for chatlog_search's semantic leg (and how many still wait for one), e.g. to check "
        "that an import was embedded before searching it by meaning."
    ),
)

CHAT_READ_TOOLS: tuple[ToolSpec, ...] = (CHATLOG_GET, CHATLOG_CONTEXT, CHATLOG_STATS)
