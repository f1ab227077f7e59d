"""Handlers of the governance tools: who may call them is decided here (docs/governance.md, "Who may call").

The local user (the CLI, MCP on stdio, any caller with no token) may query the whole read audit and export or
erase any subject. A caller bound to an agent by a bearer token sees only the audit records about its own data
and its own reads, may export only itself, and may not erase.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from m3.errors import Forbidden
from m3.protocols.messages.governance import ExportSubject, ForgetSubject, QueryAudit
from m3.protocols.messages.memory import Flush
from m3.protocols.tools import governance as p

if TYPE_CHECKING:
    from m3.gateway.service import CallContext, Service


async def audit_committed(svc: Service) -> None:
    """Reads made before now are committed: the AuditKeeper hands its records over, the Writer commits them."""
    await svc.ask(svc.system.audit_keeper, Flush())
    await svc.ask(svc.system.writer, Flush())


async def audit_query(svc: Service, a: p.AuditQueryArgs, ctx: CallContext) -> p.AuditQueryResult:
    await audit_committed(svc)
    confined = ctx.agent_id if ctx.bound else None
    return await svc.ask(svc.system.directory, QueryAudit(
        subject_agent=a.subject_agent, subject_user=a.subject_user, reader=a.reader, since=a.since, until=a.until,
        after=a.after, limit=a.limit, confined_to=confined))


async def gdpr_export(svc: Service, a: p.SubjectArgs, ctx: CallContext) -> p.GdprExportResult:
    subject = a.subject
    if ctx.bound and (subject.kind != "agent" or subject.id != ctx.agent_id):
        raise Forbidden(f"this caller acts as agent {ctx.agent_id!r} and may export only its own data",
                        hint="Export another agent or a user as the local user (the m3 CLI, no token).",
                        details={"agent_id": ctx.agent_id})
    await audit_committed(svc)
    return await svc.ask(svc.system.directory, ExportSubject(subject=subject))


async def gdpr_forget(svc: Service, a: p.GdprForgetArgs, ctx: CallContext) -> p.GdprForgetResult:
    if ctx.bound:
        raise Forbidden("only the local user may erase a subject, not a caller bound to an agent by a token",
                        hint="Run `m3 governance gdpr_forget … --confirm` on the machine that holds the store.",
                        details={"agent_id": ctx.agent_id})
    await audit_committed(svc)  # the records about the subject go too, not just those committed so far
    return await svc.ask(svc.system.writer, ForgetSubject(subject=a.subject, actor=ctx.agent_id))
