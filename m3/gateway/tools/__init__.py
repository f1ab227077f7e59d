"""Tool handlers, one module per domain; ``HANDLERS`` maps every tool name to its handler."""

from m3.gateway.registry import Handler
from m3.gateway.tools import chatlog, memory, meta

HANDLERS: dict[str, Handler] = {**memory.HANDLERS, **chatlog.HANDLERS, **meta.HANDLERS}
