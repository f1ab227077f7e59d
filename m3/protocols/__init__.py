"""Contracts shared by every layer: tool declarations (``tools``) and actor messages (``messages``)."""
