"""The Directory: reads of agents, inboxes, notifications, tokens, conflicts, the read audit and GDPR exports.

Each request runs in its own read transaction, so a read sent after a write's reply sees that write.
Apart from the Searcher, so that token checks and inbox polls never queue behind a search.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from m3.actors.reader import StoreReader
from m3.protocols.base import Message
from m3.protocols.messages.conflicts import ListConflicts
from m3.protocols.messages.coordination import (
    GetAgent,
    ListAgents,
    ListTokens,
    LookupToken,
    PollNotifications,
    ReadInbox,
)
from m3.protocols.messages.governance import ExportSubject, QueryAudit
from m3.protocols.tools.agents import AgentDetails, AgentListResult, AgentRecord
from m3.protocols.tools.conflicts import ConflictRecord, ConflictsListResult
from m3.protocols.tools.governance import AuditQueryResult, AuditRecord, GdprExportResult
from m3.protocols.tools.inbox import InboxItem, MemoryInboxResult, Notification, NotificationsResult
from m3.store import agents, audit, conflicts, inbox, subjects
from m3.store.engine import StoreOptions
from m3.store.filters import isolation_clause


class Directory(StoreReader):
    def __init__(self, options: StoreOptions, *, liveness: agents.Liveness, **base: Any):
        super().__init__(options, **base)
        self._liveness = liveness

    def handlers(self) -> dict[type[Message], Callable[[Any], Any]]:
        return {
            GetAgent: self.get_agent, ListAgents: self.list_agents, ReadInbox: self.read_inbox,
            PollNotifications: self.poll, LookupToken: self.lookup_token, ListTokens: self.list_tokens,
            ListConflicts: self.list_conflicts,
            QueryAudit: self.query_audit, ExportSubject: self.export_subject,
        }

    def get_agent(self, msg: GetAgent) -> AgentDetails:
        row = agents.require(self.conn, msg.id)
        return AgentDetails(**agents.public(row, self._liveness.status(row, datetime.now(UTC))),
                            **inbox.unread_counts(self.conn, row["id"]))

    def list_agents(self, msg: ListAgents) -> AgentListResult:
        found = agents.list_agents(self.conn, self._liveness, datetime.now(UTC), msg.status, msg.role)
        return AgentListResult(count=len(found), agents=[AgentRecord(**row) for row in found])

    def read_inbox(self, msg: ReadInbox) -> MemoryInboxResult:
        items = inbox.read_inbox(self.conn, msg.agent_id, msg.unread_only, msg.limit, isolation_clause(msg.filter))
        return MemoryInboxResult(count=len(items), items=[InboxItem(**item) for item in items])

    def poll(self, msg: PollNotifications) -> NotificationsResult:
        items = inbox.poll_notifications(self.conn, msg.agent_id, msg.limit)
        return NotificationsResult(count=len(items), items=[Notification(**item) for item in items])

    def lookup_token(self, msg: LookupToken) -> str | None:
        return agents.token_agent(self.conn, msg.token_hash)

    def list_tokens(self, msg: ListTokens) -> list[dict[str, Any]]:
        return agents.list_tokens(self.conn, msg.agent_id)

    def list_conflicts(self, msg: ListConflicts) -> ConflictsListResult:
        found = conflicts.list_conflicts(self.conn, msg)
        return ConflictsListResult(count=len(found), items=[ConflictRecord(**row) for row in found])

    def query_audit(self, msg: QueryAudit) -> AuditQueryResult:
        found, next_after = audit.query(self.conn, msg)
        return AuditQueryResult(count=len(found), items=[AuditRecord(**row) for row in found], next_after=next_after)

    def export_subject(self, msg: ExportSubject) -> GdprExportResult:
        """Everything about one subject, read in one snapshot."""
        return GdprExportResult(subject={"kind": msg.subject.kind, "id": msg.subject.id},
                                exported_at=datetime.now(UTC), **subjects.export(self.conn, msg.subject))
