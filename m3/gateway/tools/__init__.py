"""Handlers of the tools that orchestrate, one module per domain; ``HANDLERS`` maps their tool names to them.

A tool whose spec names a request and an actor has no handler (see :mod:`m3.gateway.registry`).
"""

from m3.gateway.registry import Handler
from m3.gateway.tools import (
    admin,
    conversations,
    diagnostics,
    file_reads,
    files,
    governance,
    help,
    inbox,
    loop,
    memory_bulk,
    meta,
    sync,
)

HANDLERS: dict[str, Handler] = {handler.__name__: handler for handler in (
    meta.m3_call, meta.m3_index, meta.tools_list_domains, meta.tools_load_domain, meta.embedder_status,
    inbox.notifications_wait, inbox.agent_whoami, memory_bulk.memory_write_bulk,
    governance.audit_query, governance.gdpr_export, governance.gdpr_forget,
    conversations.conversations_search, conversations.conversations_summarise,
    diagnostics.diagnostics_store_status, diagnostics.diagnostics_actor_stats, diagnostics.diagnostics_config,
    files.files_index, files.files_reindex, files.files_status, files.files_forget, files.memory_write_from_file,
    file_reads.files_search, file_reads.files_get, file_reads.files_list, file_reads.files_stats,
    diagnostics.diagnostics_health, diagnostics.diagnostics_slow_calls, help.m3_help,
    admin.admin_export, admin.admin_import, admin.admin_export_inspect, admin.admin_verify, admin.admin_optimise,
    admin.admin_embedding_backlog, admin.admin_reembed, admin.admin_engine_status,
    loop.loop_status, loop.loop_run_once, loop.loop_pause, loop.loop_resume,
    sync.sync_now, sync.sync_status, sync.sync_log,
)}
