"""Search tokens that let an integration ask m3 for exactly its rows of one path.

m3's keyword leg matches single words, in the title as in the content (the title is searched, not scored,
on SQLite). A token is a fixed prefix and 20 hex digits of the SHA-256 of the path's parts as JSON: one
word both for FTS5 and for PostgreSQL's parser, never a word of real text. Not a secret.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from m3.store.memories import content_hash


def path_token(prefix: str, parts: Sequence[Any]) -> str:
    """``prefix`` + the path's digest; equal paths give equal tokens, in every process."""
    return prefix + content_hash(json.dumps(list(parts), ensure_ascii=False))[:20]


def prefix_tokens(prefix: str, parts: Sequence[Any]) -> list[str]:
    """One token per prefix of ``parts``, the empty one first: a row carrying them is found under each."""
    return [path_token(prefix, parts[:n]) for n in range(len(parts) + 1)]
