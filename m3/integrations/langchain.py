"""LangChain: a retriever over ``memory_search`` (extra ``m3-memory[langchain]``).

``M3Retriever(client=M3Client(service, "langchain"), k=4, filters={"type": "decision"})`` answers
``invoke(query)`` with one ``Document`` per memory m3 finds, best first: the memory's content as
``page_content``, its id as the document id, and its title, type, score, owner and times as metadata. The
filters are ``memory_search``'s own (type, agent_id, user_id, scope, conversation_id, as_of, valid_at);
an unknown one is m3's ``invalid_argument``. What the caller may see follows m3's isolation: another
agent's private memories are never found. The LangGraph store is :mod:`m3.integrations.langgraph_store`.
"""

from __future__ import annotations

from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import Field

from m3.integrations.client import M3Client

#: The fields of a search item copied into a document's metadata (content is the page, id the document id).
DOCUMENT_METADATA = ("title", "type", "score", "importance", "agent_id", "conversation_id", "valid_from",
                     "recorded_at", "metadata")


class M3Retriever(BaseRetriever):
    """The memories m3 finds for a query, as LangChain documents (see the module docstring)."""

    client: M3Client
    k: int = Field(8, ge=1, description="How many memories to return at most.")
    filters: dict[str, Any] = Field(default_factory=dict, description="memory_search filters, e.g. type.")

    def search_args(self, query: str) -> dict[str, Any]:
        return {**self.filters, "query": query, "k": self.k}

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        return documents(self.client.call("memory_search", self.search_args(query)))

    async def _aget_relevant_documents(self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
                                       ) -> list[Document]:
        return documents(await self.client.acall("memory_search", self.search_args(query)))


def documents(found: dict[str, Any]) -> list[Document]:
    """``memory_search``'s items as documents, in its order."""
    return [Document(page_content=item["content"], id=item["id"],
                     metadata={"id": item["id"], **{name: item.get(name) for name in DOCUMENT_METADATA}})
            for item in found["items"]]
