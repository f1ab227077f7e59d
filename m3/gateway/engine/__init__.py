"""The engine: one long-lived process per store hosting the actors, and the thin front-ends that relay to it.

``paths`` (where its socket, locks and log live), ``client`` (HTTP over the Unix socket, standard library
only, for the quick CLI path), ``spawn`` (start on first use under a lock, version check), ``server`` (the
engine process), ``relay`` (bare ``m3``: MCP on stdio relayed to the engine), ``manifest`` (the tool list
front-ends build their command line and MCP list from without importing the registry).
See docs/architecture.md, "The engine".
"""
