"""Framework integrations (LangChain/LangGraph, CrewAI, PydanticAI): an entry-point layer like the gateway.

Each module talks to m3 through :class:`m3.integrations.client.M3Client`, the in-process ``Service``
(embedded mode, chosen explicitly) seen as one agent. The framework packages are optional extras
(``m3-memory[langchain]``, ``[crewai]``, ``[pydantic-ai]``); a module imports its framework at import time,
so import it only with the extra installed. Nothing in m3 imports this package (tests/test_layers.py).
"""
