"""Arguments, results and declarations of the governance tools: the read audit, GDPR export and erasure.

Who may call them is decided by their handlers (m3.gateway.tools.governance) and written in docs/governance.md.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

from m3.errors import ConfirmationRequired
from m3.protocols.base import ToolArgs, ToolResult, ToolSpec
from m3.protocols.messages.governance import Subject
from m3.protocols.tools.fields import Identifier, Timestamp


class AuditQueryArgs(ToolArgs):
    subject_agent: Identifier | None = Field(None, description="Records about this agent's data.")
    subject_user: Identifier | None = Field(None, description="Records about this user's data.")
    reader: Identifier | None = Field(None, description="Records of reads by this agent.")
    since: Timestamp | None = Field(None, description="Reads at or after this time.")
    until: Timestamp | None = Field(None, description="Reads before this time.")
    after: int = Field(0, ge=0, description="Page on: the next_after of the previous page.")
    limit: int = Field(100, ge=1, le=1000)


class AuditRecord(ToolResult):
    seq: int
    at: Timestamp
    reader: str | None = Field(description="The agent that read (None: a caller with no identity).")
    subject_agent: str | None = Field(description="The agent whose row it was when read.")
    subject_user: str | None = Field(description="The user the row was about when read.")
    kind: str = Field(description="memory or chat.")
    ref_id: str = Field(description="The memory id or chat-row id.")
    tool: str


class AuditQueryResult(ToolResult):
    count: int
    items: list[AuditRecord] = Field(description="Oldest first.")
    next_after: int | None = Field(description="Pass as after for the next page; None when this was the last.")


class SubjectArgs(ToolArgs):
    agent_id: Identifier | None = Field(None, description="The agent whose data it is (give this or user_id).")
    user_id: Identifier | None = Field(None, description="The user whose data it is (give this or agent_id).")

    @model_validator(mode="after")
    def _one_subject(self) -> SubjectArgs:
        if (self.agent_id is None) == (self.user_id is None):
            raise ValueError("name exactly one subject: agent_id or user_id")
        return self

    @property
    def subject(self) -> Subject:
        if self.agent_id is not None:
            return Subject(kind="agent", id=self.agent_id)
        assert self.user_id is not None
        return Subject(kind="user", id=self.user_id)


class GdprExportResult(ToolResult):
    subject: dict[str, str]
    exported_at: Timestamp
    memories: list[dict[str, Any]] = Field(description="Every version of every memory of the subject, retired too.")
    history: list[dict[str, Any]] = Field(description="The events of those memories, and events the subject caused.")
    relationships: list[dict[str, Any]]
    grants: list[dict[str, Any]] = Field(description="Who the subject's private memories are shared with, and "
                                                     "what was shared with the subject.")
    vectors: list[dict[str, Any]] = Field(description="One entry per stored vector: memory id, model, dim and "
                                                      "time; not the floats.")
    conflicts: list[dict[str, Any]]
    entity_mentions: list[dict[str, Any]] = Field(description="Where those memories name an entity, as written.")
    entity_relations: list[dict[str, Any]] = Field(description="Relations between entities those memories state.")
    chat: list[dict[str, Any]]
    agent: dict[str, Any] | None = Field(description="The agent's registration (agent subjects).")
    tokens: list[dict[str, Any]] = Field(description="The agent's tokens: id, label, times; never the hashes.")
    tasks: list[dict[str, Any]] = Field(description="Tasks the agent created or owns.")
    task_events: list[dict[str, Any]]
    inbox: list[dict[str, Any]] = Field(description="Handoffs to or from the agent.")
    notifications: list[dict[str, Any]]
    audit: list[dict[str, Any]] = Field(description="Read-audit records about the subject's data or reads by it.")
    erasures: list[dict[str, Any]] = Field(description="Earlier erasures of this subject (counts only).")


class GdprForgetArgs(SubjectArgs):
    confirm: bool = Field(False, description="Must be true: the erasure is permanent.")

    @model_validator(mode="after")
    def _confirmed(self) -> GdprForgetArgs:
        if not self.confirm:
            raise ConfirmationRequired(f"gdpr_forget of {self.subject.kind} {self.subject.id!r} needs confirm=true",
                                       hint="Erasure is permanent and cannot be undone; gdpr_export first if you "
                                            "need a copy, then repeat with confirm=true.")
        return self


class GdprForgetResult(ToolResult):
    subject_hash: str = Field(description="SHA-256 of '<kind>:<id>', kept in the erasure record.")
    erased_at: Timestamp
    counts: dict[str, int] = Field(description="Rows erased (or scrubbed of the subject's name) per table.")


AUDIT_QUERY = ToolSpec(
    name="audit_query", domain="governance", args=AuditQueryArgs, result=AuditQueryResult, read_only=True,
    description=(
        "Read-audit records: who read which memory or chat row of whose, through which tool and when, oldest "
        "first and paged (after/next_after). Filter by subject_agent, subject_user, reader and a time range. An "
        "agent calling through a token sees only records about its own data and its own reads; the local user "
        "sees all. Records are kept audit.retention_days (90)."
    ),
)
GDPR_EXPORT = ToolSpec(
    name="gdpr_export", domain="governance", args=SubjectArgs, result=GdprExportResult, read_only=True,
    description=(
        "Everything m3 holds about one agent or user as one JSON document: memories with every version, "
        "history, links, shares, vector metadata (model, dim; not the floats), chat log, registration and "
        "tokens, tasks, handoffs and notifications, read-audit records. A caller bound to an agent by a token may "
        "export only itself; the CLI writes a zip of JSON files with --zip FILE."
    ),
    audit=lambda res: [*(("memory", m["id"]) for m in res.memories), *(("chat", c["id"]) for c in res.chat)],
)
GDPR_FORGET = ToolSpec(
    name="gdpr_forget", domain="governance", args=GdprForgetArgs, result=GdprForgetResult, destructive=True,
    description=(
        "Erase one agent or user everywhere m3 holds it: memories and their versions, full-text index entries, "
        "vectors, history, links, chat rows, tasks it created, handoffs and notifications, its registration and "
        "tokens, and the read-audit records about it; then scrub the freed database pages. Keeps only a record "
        "that an erasure happened (SHA-256 of the subject, time, counts). Needs confirm=true; only the local "
        "user (no token) may call it."
    ),
)

GOVERNANCE_TOOLS: tuple[ToolSpec, ...] = (AUDIT_QUERY, GDPR_EXPORT, GDPR_FORGET)
