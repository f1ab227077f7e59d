"""Every Python example of docs/integrations.md runs as written (each skips without its framework)."""

from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "integrations.md"
FRAMEWORKS = ("langchain_core", "langgraph", "pydantic_ai", "crewai")


def examples() -> list[tuple[str, str]]:
    """(the heading above it, code) for each ```python block of the page."""
    found, heading = [], "intro"
    for block in re.split(r"(?m)^(## .*|```python\n(?:.*\n)*?```)$", DOC.read_text(encoding="utf-8")):
        if block.startswith("## "):
            heading = block[3:].split(":")[0].strip().lower().replace(" ", "-")
        elif block.startswith("```python"):
            found.append((heading, block.removeprefix("```python\n").removesuffix("```")))
    return found


@pytest.mark.parametrize(("heading", "code"), examples(), ids=[h for h, _ in examples()])
def test_the_example_runs(heading: str, code: str, m3_home: Path) -> None:
    for framework in FRAMEWORKS:
        if re.search(rf"\b{framework.split('_')[0]}", code) and importlib.util.find_spec(framework) is None:
            pytest.skip(f"{framework} is not installed")
    os.environ.setdefault("CREWAI_TRACING_ENABLED", "false")  # see test_crewai.py
    os.environ.setdefault("CREWAI_DISABLE_TELEMETRY", "true")
    os.environ.setdefault("OTEL_SDK_DISABLED", "true")
    exec(compile(code, f"{DOC.name}:{heading}", "exec"), {"__name__": f"docs_example_{heading}"})
