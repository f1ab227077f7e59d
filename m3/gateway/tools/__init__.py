"""Tool handlers, one module per domain; ``HANDLERS`` maps every tool name to its handler."""

from m3.gateway.registry import Handler
from m3.gateway.tools import agents, chatlog, conflicts, inbox, memory, meta, sharing, tasks  # coordination (issue 5)

HANDLERS: dict[str, Handler] = {**memory.HANDLERS, **chatlog.HANDLERS, **meta.HANDLERS}
HANDLERS |= {**agents.HANDLERS, **inbox.HANDLERS, **tasks.HANDLERS, **conflicts.HANDLERS}
HANDLERS |= sharing.HANDLERS  # isolation on by default (issue 12)
