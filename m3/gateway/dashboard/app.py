"""The dashboard's Starlette app: routes to the pages, every POST through the CSRF check, all behind the Guard."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from m3.gateway.dashboard import admin, memories, views
from m3.gateway.dashboard.calls import Caller
from m3.gateway.dashboard.html import STYLE
from m3.gateway.dashboard.security import CsrfRefused, Guard, Policy
from m3.gateway.dashboard.view import View

Page = Callable[[View], Awaitable[Response]]
MEMORY_VERBS = ("pin", "unpin", "update", "supersede", "delete", "restore")


def build_app(caller: Caller, policy: Policy) -> Guard:
    """The whole dashboard for ``caller`` (whose agent every action runs as), guarded by ``policy``."""

    def page(render: Page) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            try:
                return await render(View(request, caller, policy))
            except CsrfRefused:
                return PlainTextResponse("403: the form's CSRF token is missing or wrong; reload the page", 403)
        return endpoint

    def memory(request_view: View) -> Awaitable[Response]:
        return memories.memory_page(request_view, request_view.request.path_params["id"])

    def memory_action(request_view: View) -> Awaitable[Response]:
        params = request_view.request.path_params
        if params["verb"] not in MEMORY_VERBS:
            return _not_found()
        return memories.memory_action(request_view, params["id"], params["verb"])

    def resolve(request_view: View) -> Awaitable[Response]:
        return views.resolve(request_view, request_view.request.path_params["id"])

    async def style(_request: Request) -> Response:
        return PlainTextResponse(STYLE, media_type="text/css")

    routes = [
        Route("/", page(memories.browse)),
        Route("/memory/{id}", page(memory)),
        Route("/memory/{id}/{verb}", page(memory_action), methods=["POST"]),
        Route("/search", page(views.search)),
        Route("/agents", page(views.agents)),
        Route("/tasks", page(views.tasks)),
        Route("/graph", page(views.graph)),
        Route("/conflicts", page(views.conflicts)),
        Route("/conflicts/{id}/resolve", page(resolve), methods=["POST"]),
        Route("/audit", page(admin.audit)),
        Route("/gdpr/export", page(admin.gdpr_export), methods=["POST"]),
        Route("/gdpr/forget", page(admin.gdpr_forget), methods=["POST"]),
        Route("/health", page(admin.health)),
        Route("/style.css", style),
    ]
    return Guard(Starlette(routes=routes), policy)


async def _not_found() -> Response:
    return PlainTextResponse("404: no such action", 404)
