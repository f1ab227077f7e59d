"""``m3 setup``: wire m3 into the agent clients installed here (docs/setup.md).

``clients`` is the table of clients (where each keeps its MCP servers and how it spells one),
``jsonedit`` and ``tomledit`` change one entry of a file and nothing else, ``edit`` picks the right one
for a client, and ``run`` plans, backs up, writes and reports.
"""
