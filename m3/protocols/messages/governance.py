"""Messages of the read audit and of GDPR export and erasure (issue 17)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Literal

from m3.protocols.base import Message, Request

if TYPE_CHECKING:
    from m3.protocols.tools import governance  # noqa: F401  (the replies' types, named as strings)

#: What a read audit record is about: a memory row or a chat-log row.
RefKind = Literal["memory", "chat"]


class Subject(Message):
    """A data subject: an agent (its memories, chat rows, tasks, inbox …) or a user (memories about them)."""

    kind: Literal["agent", "user"]
    id: str


class RecordReads(Message):
    """Rows a tool showed to ``reader`` (fire and forget, to the AuditKeeper, which batches them)."""

    reader: str | None
    tool: str
    at: datetime
    refs: tuple[tuple[RefKind, str], ...]


class RecordAudit(Message):
    """The reads the AuditKeeper collected, for the Writer to commit in its next transaction."""

    reads: tuple[RecordReads, ...]


class PruneAudit(Request[int]):
    """Delete read-audit records older than ``before``; replies how many went."""

    before: datetime


class QueryAudit(Request["governance.AuditQueryResult"]):
    subject_agent: str | None = None
    subject_user: str | None = None
    reader: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    after: int = 0
    limit: int = 100
    #: Set for a token-bound caller: only records whose subject (or reader) is this agent.
    confined_to: str | None = None


class ExportSubject(Request["governance.GdprExportResult"]):
    subject: Subject


class ForgetSubject(Request["governance.GdprForgetResult"]):
    subject: Subject
    actor: str | None = None
