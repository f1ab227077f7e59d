"""The tool catalog fits the context budget docs/tools.md publishes, and six tools are listed at startup."""

from __future__ import annotations

from devtools.budget import CATALOG_BUDGET, STARTUP_BUDGET, budgets, tokens
from m3.gateway.registry import default_registry


def test_the_startup_set_is_six_tools_within_its_budget() -> None:
    startup = budgets(default_registry())[0]
    assert startup.tools == 6
    assert startup.listing_tokens <= STARTUP_BUDGET


def test_every_tool_listed_at_once_fits_the_catalog_budget() -> None:
    catalog = budgets(default_registry())[-1]
    assert catalog.tools == len(list(default_registry()))
    assert catalog.listing_tokens <= CATALOG_BUDGET
    assert catalog.description_tokens < catalog.listing_tokens


def test_tokens_are_counted_with_a_real_encoding() -> None:
    assert tokens("Hello world, this is a test of the tokenizer.") == 11
