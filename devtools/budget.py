"""The context budget of m3's tool catalog: how many tokens a model reads for the tools listed to it.

Counted with OpenAI's ``cl100k_base`` encoding (the ``bpe-openai`` package carries its tables, so the count
runs offline and is the same on every machine). Two measures per set of tools: the descriptions alone, and
the whole MCP ``tools/list`` entries (name, description, input and output JSON Schemas, annotations) as
compact JSON — what a client puts into the model's context when the tools are listed.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from m3.gateway.mcp_server import mcp_tool
from m3.gateway.registry import Registry, Tool

ENCODING = "cl100k_base"


@cache
def _encoding() -> Any:
    # bpe-openai 0.1.4 reads its tables (on import and per encoding) with importlib.resources.open_binary,
    # deprecated since 3.11; the warning is about its code, not ours, and the suite runs with warnings as errors.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "open_binary is deprecated", DeprecationWarning)
        # A development dependency ([dev]): the docs generator needs it, m3 itself does not.
        import bpe_openai  # type: ignore[import-untyped]

        return bpe_openai.get_encoding(ENCODING)


def tokens(text: str) -> int:
    return len(_encoding().encode(text))


@dataclass(frozen=True)
class Budget:
    label: str
    tools: int
    description_tokens: int
    listing_tokens: int


def measure(label: str, tools: Sequence[Tool]) -> Budget:
    entries = [mcp_tool(t).model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools]
    return Budget(label, len(tools), sum(tokens(t.spec.description) for t in tools),
                  tokens(json.dumps(entries, separators=(",", ":"), ensure_ascii=False)))


def budgets(registry: Registry) -> list[Budget]:
    """The startup set, each domain loaded on top of nothing, and the whole catalog."""
    every = list(registry)
    rows = [measure("listed at startup", [t for t in every if t.spec.startup])]
    rows += [measure(f"domain `{name}`", tools) for name, tools in registry.domains().items()]
    rows.append(measure("every tool", every))
    return rows


#: The budget the catalog must fit, in ``tools/list`` tokens (tests/devtools/test_budget.py holds it to them):
#: what the six startup tools cost a session that never loads a domain, and what every tool costs at most.
STARTUP_BUDGET = 4_000
CATALOG_BUDGET = 60_000
