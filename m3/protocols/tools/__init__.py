"""Tool contracts: one module per domain, each declaring its tools' arguments and specs, and
``<domain>_results`` modules with the results (the actor requests name them as their replies).

Importing this package imports no domain, so that a message module may import a results module
while the domain module imports that message module; ``ALL_TOOLS`` lives in :mod:`.catalog`.
"""

from typing import Any


def __getattr__(name: str) -> Any:
    if name == "ALL_TOOLS":  # the former home of the catalog
        from m3.protocols.tools.catalog import ALL_TOOLS

        return ALL_TOOLS
    raise AttributeError(name)
