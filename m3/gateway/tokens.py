"""Bearer tokens for remote MCP: ``m3 token create|list|revoke``.

A token is 256 random bits (``secrets``), shown once at creation; the
store keeps only its SHA-256, so a copy of the database does not hand out
access. Creating a token registers its agent if needed. These are
administration commands, not tools: no agent can mint itself a token.
"""

from __future__ import annotations

import argparse
from typing import Any

from m3.config import Config
from m3.crypto.provider import new_token as crypto_token
from m3.errors import InvalidArgument
from m3.gateway.runtime import running
from m3.protocols.messages.coordination import CreateToken, ListTokens, RevokeTokens
from m3.protocols.tools.fields import format_time

TOKEN_PREFIX = "m3_"
MAX_AGENT_CHARS = 200


def new_token() -> str:
    return crypto_token(TOKEN_PREFIX)


def _agent_name(raw: str) -> str:
    name = raw.strip()
    if not name or len(name) > MAX_AGENT_CHARS:
        raise InvalidArgument(f"--agent must be 1 to {MAX_AGENT_CHARS} characters")
    return name


def _public(row: dict[str, Any]) -> dict[str, Any]:
    return {k: format_time(v) if hasattr(v, "tzinfo") else v for k, v in row.items()}


def _ask(config: Config, actor: str, message: Any) -> Any:
    """One request to one actor of a started m3 (these commands write no memories: no embeddings to finish)."""
    with running(config, drain_embeddings=False) as svc:
        return getattr(svc.system, actor).ask(message, svc.timeout)


def create(config: Config, ns: argparse.Namespace) -> dict[str, Any]:
    from m3.store.agents import hash_token

    agent = _agent_name(ns.agent)
    token = new_token()
    row = _ask(config, "writer", CreateToken(agent_id=agent, token_hash=hash_token(token), label=ns.label))
    return {"token": token, "agent_id": agent, "id": row["id"]}


def list_tokens(config: Config, ns: argparse.Namespace) -> dict[str, Any]:
    return {"tokens": [_public(r) for r in _ask(config, "directory", ListTokens(agent_id=ns.agent))]}


def revoke(config: Config, ns: argparse.Namespace) -> dict[str, Any]:
    if (ns.id is None) == (ns.agent is None):
        raise InvalidArgument("give a token id or --agent, not both or neither",
                              hint="`m3 token list` shows the token ids.")
    return {"revoked": _ask(config, "writer", RevokeTokens(token_id=ns.id, agent_id=ns.agent))}
