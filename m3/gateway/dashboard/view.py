"""One request's view: the caller, the CSRF token of its session, rendering and the answers of actions."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from m3.gateway.dashboard import html
from m3.gateway.dashboard.calls import Caller, CallFailed
from m3.gateway.dashboard.security import Policy, checked_form


class View:
    def __init__(self, request: Request, caller: Caller, policy: Policy):
        self.request = request
        self.caller = caller
        self.policy = policy
        self.csrf = policy.csrf_for(request.state.session)
        self.errors: list[dict[str, Any]] = []

    def arg(self, name: str) -> str:
        value = self.request.query_params.get(name, "")
        return value.strip()

    async def call(self, name: str, args: dict[str, Any]) -> dict[str, Any] | None:
        """The tool's result, or None with its error kept for the page (a GET shows what it could)."""
        try:
            return await self.caller(name, {k: v for k, v in args.items() if v not in (None, "")})
        except CallFailed as failed:
            self.errors.append(failed.error)
            return None

    def render(self, title: str, path: str, body: str, status: int = 200) -> HTMLResponse:
        done = self.arg("done")
        top = html.notice(f"Done: {done}" if done else None) + "".join(html.notice(None, err) for err in self.errors)
        code = 400 if self.errors and status == 200 else status
        return HTMLResponse(html.page(title, path, top + body, agent=self.caller.agent), status_code=code)

    async def form(self) -> dict[str, str]:
        """The POSTed form's text fields, once its CSRF token checked out."""
        form = await checked_form(self.request, self.policy)
        return {k: v.strip() for k, v in form.items() if isinstance(v, str)}

    async def act(self, name: str, args: dict[str, Any], then: str, done: str) -> Response:
        """Run a change; on success see ``then`` (303) with ``done``, else the error page (its status)."""
        try:
            await self.caller(name, {k: v for k, v in args.items() if v not in (None, "")})
        except CallFailed as failed:
            self.errors.append(failed.error)
            back = f'<p><a href="{html.e(then)}">back</a></p>'
            return self.render(f"{name} failed", "", back, status=failed.status if failed.status >= 400 else 400)
        sep = "&" if "?" in then else "?"
        return RedirectResponse(f"{then}{sep}done={done}", status_code=303)


def memory_types() -> tuple[str, ...]:
    """The memory types for the filters, imported on first use: the tool contracts take seconds to import, which
    ``m3 dashboard`` should not spend before it refuses a bad start or prints its address."""
    from m3.protocols.tools.fields import MEMORY_TYPES

    return MEMORY_TYPES


def iso_of(epoch: str) -> str | None:
    """An ``as_of`` slider's value (seconds since the epoch) as an ISO time, None when it is not a number."""
    try:
        return datetime.fromtimestamp(float(epoch), UTC).isoformat().replace("+00:00", "Z")
    except (ValueError, OverflowError, OSError):
        return None


def epoch_of(iso: str | None) -> int | None:
    if not iso:
        return None
    try:
        return int(datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp())
    except ValueError:
        return None
