"""Handlers of the tools that orchestrate, one module per domain; ``HANDLERS`` maps their tool names to them.

A tool whose spec names a request and an actor has no handler (see :mod:`m3.gateway.registry`).
"""

from m3.gateway.registry import Handler
from m3.gateway.tools import inbox, meta, tasks

HANDLERS: dict[str, Handler] = {**meta.HANDLERS, **inbox.HANDLERS, **tasks.HANDLERS}
