"""The memory tools are all declared in their specs (see :mod:`m3.gateway.registry`): no handler."""

from m3.gateway.registry import Handler, owner

HANDLERS: dict[str, Handler] = {}

__all__ = ["HANDLERS", "owner"]  # owner: the coordination handlers import it from here
