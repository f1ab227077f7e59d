"""Handlers of the tools that orchestrate, one module per domain; ``HANDLERS`` maps their tool names to them.

A tool whose spec names a request and an actor has no handler (see :mod:`m3.gateway.registry`).
"""

from m3.gateway.registry import Handler, by_name
from m3.gateway.tools import governance, inbox, meta, tasks

HANDLERS: dict[str, Handler] = by_name(
    meta.m3_call, meta.m3_index, meta.tools_list_domains, meta.tools_load_domain, meta.embedder_status,
    inbox.memory_handoff, inbox.memory_inbox, inbox.notify, inbox.notifications_wait,
    tasks.task_set_result, tasks.task_claim, tasks.task_heartbeat,
    governance.audit_query, governance.gdpr_export, governance.gdpr_forget,
)
