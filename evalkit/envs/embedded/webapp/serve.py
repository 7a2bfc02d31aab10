"""The two web apps assembled into one ASGI app, with the admin endpoints no agent sees, served on a loopback
port. Apart from `site` so that the apps import the shared page helpers from `site` and this module imports
the apps, never the other way round."""

from __future__ import annotations

import secrets
import time
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from evalkit.serving import ThreadedServer

from .mail import routes as mail_routes
from .shop import routes as shop_routes
from .site import ADMIN_HEADER, COOKIE, MAX_LOG, Session, Sessions, page


def build_site(admin_key: str | None = None) -> Starlette:
    """The ASGI app serving both web apps; `app.state.admin_key` is the key the admin endpoints want."""
    sessions = Sessions()
    key = admin_key or secrets.token_hex(16)
    routes = [
        Route("/", _home),
        Route("/health", _health),
        *_admin_routes(sessions, key),
        *shop_routes(),
        *mail_routes(),
    ]
    session_of = Middleware(BaseHTTPMiddleware, dispatch=_with_session(sessions))
    site = Starlette(routes=routes, middleware=[session_of])
    site.state.admin_key = key
    return site


async def _home(request: Request) -> Response:
    body = (
        '<div class="card"><h1>Web apps</h1><p><a href="/shop/">Harbour Goods</a> — the shop</p>'
        '<p><a href="/mail/">Northwind Mail</a> — your mailbox</p></div>'
    )
    return page("Home", body, "", request.state.session)


async def _health(request: Request) -> Response:
    return JSONResponse({"status": "healthy"})


def _admin_routes(sessions: Sessions, key: str) -> list[Route]:
    """The endpoints no agent sees (a 404 without the admin key): a new session with its flags, and a
    session's record and request log."""

    def admin(request: Request) -> bool:
        return secrets.compare_digest(request.headers.get(ADMIN_HEADER, ""), key)

    async def session_flags(request: Request) -> Response:
        if not admin(request):
            return PlainTextResponse("Not Found", status_code=404)
        s = sessions.new(logged_in=request.query_params.get("logout") not in ("1", "true", "yes"))
        request.state.session = s
        resp = JSONResponse({"session": s.sid, "logged_in": s.logged_in})
        resp.set_cookie(COOKIE, s.sid, path="/", httponly=True, samesite="lax")
        return resp

    def admin_list(attr: str):
        async def endpoint(request: Request) -> Response:
            if not admin(request):
                return PlainTextResponse("Not Found", status_code=404)
            s: Session = request.state.session
            with s.lock:
                return JSONResponse({"session": s.sid, "entries": list(getattr(s, attr))})

        return endpoint

    return [
        Route("/_admin/session-flags", session_flags),
        Route("/_admin/record", admin_list("record")),
        Route("/_admin/log", admin_list("log")),
    ]


def _with_session(sessions: Sessions) -> Any:
    """The middleware giving each request its cookie's session (a new one without), and logging what an
    agent asked of the apps."""

    async def with_session(request: Request, call_next: Any) -> Response:
        s = sessions.get(request.cookies.get(COOKIE))
        fresh = s is None
        if fresh:
            s = sessions.new()
        request.state.session = s
        response = await call_next(request)
        s = request.state.session  # session-flags replaces it
        if fresh and COOKIE not in response.headers.get("set-cookie", ""):
            response.set_cookie(COOKIE, s.sid, path="/", httponly=True, samesite="lax")
        path = request.url.path
        if not path.startswith(("/_admin", "/health", "/favicon")):
            with s.lock:
                if len(s.log) < MAX_LOG:
                    s.log.append(
                        {
                            "t": round(time.monotonic() - s.started, 3),
                            "method": request.method,
                            "path": path,
                            "query": request.url.query,
                            "status": response.status_code,
                        }
                    )
        return response

    return with_session


class SiteServer(ThreadedServer):
    """The web apps served in a background thread on a loopback port; a context manager."""

    def __init__(self, port: int | None = None, host: str = "127.0.0.1", admin_key: str | None = None):
        self.app = build_site(admin_key)
        self.admin_key: str = self.app.state.admin_key
        super().__init__(self.app, port=port, host=host, name="webapp", access_log=False)
        self.base = self.base_url

    @property
    def admin_headers(self) -> dict[str, str]:
        return {ADMIN_HEADER: self.admin_key}

    def __repr__(self) -> str:
        return f"SiteServer({self.base})"
