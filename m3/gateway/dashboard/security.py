"""The dashboard's guard: Host (DNS rebinding), same origin and CSRF on every POST, the token off loopback, and the
security headers on every answer.

The rules (docs/dashboard.md, "Security"):

- ``Host`` must name the bound address or a loopback name with the bound port, else 400: a page of another site
  whose name was re-pointed at 127.0.0.1 sends its own name, so it cannot read or post here.
- A POST needs ``Origin`` (or, without it, ``Referer``) of this very origin, else 403, and a ``csrf`` form field
  equal to the HMAC of the browser's session cookie under a key of this process, else 403.
- Off loopback, every request needs the dashboard token as the password of HTTP Basic authentication (the only
  credential a browser sends without JavaScript), compared in constant time; without it 401.
"""

from __future__ import annotations

import base64
import ipaddress
from dataclasses import dataclass, field

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from m3.crypto.provider import keyed_digest, random_bytes, same_secret

SESSION_COOKIE = "m3_dashboard_session"
CSP = ("default-src 'none'; script-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; "
       "frame-ancestors 'none'; base-uri 'none'")
HEADERS = ((b"content-security-policy", CSP.encode()), (b"x-frame-options", b"DENY"),
           (b"x-content-type-options", b"nosniff"), (b"referrer-policy", b"same-origin"),
           (b"cache-control", b"no-store"))
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass
class Policy:
    """What the guard lets in: the bound host and port (set once listening), and the token off loopback."""

    host: str
    port: int = 0
    token: str | None = None
    key: bytes = field(default_factory=lambda: random_bytes(32))

    def host_ok(self, host: str) -> bool:
        """Whether a request's ``Host`` names this dashboard. On a wildcard bind (0.0.0.0, ::) the machine's names
        are unknown, so any name with the bound port is accepted there: the token (required off loopback) is then
        what keeps another site out, since a browser sends its Basic credentials only to the origin they were
        given for."""
        if self.host in ("0.0.0.0", "::"):
            return host.rsplit(":", 1)[-1] == str(self.port)
        return host in self.allowed_hosts()

    def allowed_hosts(self) -> set[str]:
        names = {self.host if ":" not in self.host else f"[{self.host}]"}
        if is_loopback(self.host):
            names.update(LOOPBACK_NAMES)
        return {f"{name}:{self.port}" for name in names}

    def csrf_for(self, session: str) -> str:
        return keyed_digest(self.key, session.encode()).hex()

    def csrf_ok(self, session: str | None, given: str | None) -> bool:
        if not session or not given:
            return False
        return same_secret(given.encode(), self.csrf_for(session).encode())

    def token_ok(self, authorization: str | None) -> bool:
        if self.token is None:
            return True
        if not authorization or not authorization.lower().startswith("basic "):
            return False
        try:
            _user, _, password = base64.b64decode(authorization[6:].strip()).decode().partition(":")
        except (ValueError, UnicodeDecodeError):
            return False
        return same_secret(password.encode(), self.token.encode())


class Guard:
    """ASGI middleware: refuses foreign hosts, cross-origin POSTs and (off loopback) requests without the token;
    adds the security headers and a session cookie to every answer."""

    def __init__(self, app: ASGIApp, policy: Policy):
        self.app = app
        self.policy = policy

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        refusal = self.refusal(request)
        session = request.cookies.get(SESSION_COOKIE)
        new_session = None if session else random_bytes(18).hex()
        scope.setdefault("state", {})["session"] = session or new_session

        async def secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", [])) + list(HEADERS)
                if new_session:
                    cookie = f"{SESSION_COOKIE}={new_session}; Path=/; HttpOnly; SameSite=Strict"
                    headers.append((b"set-cookie", cookie.encode()))
                message = {**message, "headers": headers}
            await send(message)

        if refusal is not None:
            await refusal(scope, receive, secured)
            return
        await self.app(scope, receive, secured)

    def refusal(self, request: Request) -> Response | None:
        host = request.headers.get("host", "")
        if not self.policy.host_ok(host):
            return PlainTextResponse("400: this Host is not the dashboard's address (DNS rebinding guard)", 400)
        if not self.policy.token_ok(request.headers.get("authorization")):
            return PlainTextResponse("401: the dashboard token is needed (the password of this login)", 401,
                                     headers={"www-authenticate": 'Basic realm="m3 dashboard"'})
        if request.method not in ("GET", "HEAD") and not same_origin(request, host):
            return PlainTextResponse("403: a change must come from a page of this dashboard (Origin check)", 403)
        return None


def same_origin(request: Request, host: str) -> bool:
    """``Origin`` (or, without it, ``Referer``) is this dashboard's own origin."""
    mine = f"{request.url.scheme}://{host}"
    origin = request.headers.get("origin")
    if origin is not None:
        return origin == mine
    referer = request.headers.get("referer")
    return referer is not None and (referer == mine or referer.startswith(mine + "/"))


class CsrfRefused(Exception):
    """A POST without the session's CSRF token."""


async def checked_form(request: Request, policy: Policy) -> FormData:
    """The POSTed form, once its ``csrf`` field matches the session (else :class:`CsrfRefused`)."""
    form = await request.form()
    given = form.get("csrf")
    if not policy.csrf_ok(request.cookies.get(SESSION_COOKIE), given if isinstance(given, str) else None):
        raise CsrfRefused()
    return form
