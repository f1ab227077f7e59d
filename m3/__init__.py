"""m3: a persistent, local-first memory and coordination layer for AI agents."""

__version__ = "2026.11.30.0"
