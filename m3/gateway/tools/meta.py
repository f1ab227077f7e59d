"""Handlers of the tools about tools (m3_call, m3_index, domains) and embedder_status."""

from __future__ import annotations

from typing import TYPE_CHECKING

from m3.errors import InvalidArgument
from m3.protocols.messages.memory import EmbedderInfo, EmbeddingStats
from m3.protocols.tools import meta as p

if TYPE_CHECKING:
    from m3.gateway.service import CallContext, Service


async def m3_call(svc: Service, a: p.M3CallArgs, ctx: CallContext) -> p.M3CallResult:
    if a.tool == "m3_call":
        raise InvalidArgument("m3_call cannot call itself", hint="Name the tool you want directly.")
    result = await svc.call(a.tool, a.args, ctx)
    return p.M3CallResult(tool=a.tool, result=result)


async def m3_index(svc: Service, a: p.M3IndexArgs, ctx: CallContext) -> p.M3IndexResult:
    tools = svc.registry.domain(a.domain) if a.domain else list(svc.registry)
    return p.M3IndexResult(tools=[
        p.ToolEntry(name=t.spec.name, domain=t.spec.domain, description=t.spec.description,
                    destructive=t.spec.destructive, arguments=t.input_schema)
        for t in tools
    ])


async def tools_list_domains(svc: Service, a: p.NoArgs, ctx: CallContext) -> p.ToolsListDomainsResult:
    return p.ToolsListDomainsResult(domains=[
        p.DomainEntry(domain=name, tools=[t.spec.name for t in tools])
        for name, tools in svc.registry.domains().items()
    ])


async def tools_load_domain(svc: Service, a: p.ToolsLoadDomainArgs, ctx: CallContext) -> p.ToolsLoadDomainResult:
    svc.registry.domain(a.domain)  # an unknown domain is unknown_domain on every surface
    # Surfaces without a tool list (CLI, HTTP routes) reach every tool already.
    registered = [] if ctx.load_domain is None else await ctx.load_domain(a.domain)
    return p.ToolsLoadDomainResult(domain=a.domain, registered=registered)


async def embedder_status(svc: Service, a: p.NoArgs, ctx: CallContext) -> p.EmbedderStatusResult:
    info = await svc.ask(svc.system.embedder, EmbedderInfo())
    stats = await svc.ask(svc.system.searcher, EmbeddingStats(model=info["model"]))
    backend = svc.system.embedder_backend
    return p.EmbedderStatusResult(
        backend=info["backend"], model=info["model"], dim=info["dim"],
        loaded=bool(getattr(backend, "loaded", False)), pending=stats["pending"],
        vectors_by_model=stats["vectors_by_model"], memories=stats["memories"],
        active_model=stats["active_model"] or info["model"],
        reembedding=(stats["active_model"] or info["model"]) != info["model"],
        queued=info["queued"], last_error=info["last_error"], server=info["server"],
    )
