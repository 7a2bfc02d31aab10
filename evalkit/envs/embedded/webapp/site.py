"""The web apps' server: a shop and a mailbox on one origin, per-browser sessions, and the admin endpoints.

Every browser context gets its own session (a cookie), so many tasks can share one server without seeing
each other's carts or mail. What a session changes is kept as a record of entries that the grader reads;
the admin endpoints that serve it answer only requests carrying the server's admin key in a header, which a
page cannot add to its own navigations, so an agent never sees them:

- `GET /_admin/session-flags[?logout=1]` starts a fresh session for the calling context (logged in to both
  apps, or logged out),
- `GET /_admin/record` the state changes the session made, as `{"entries": [...]}`,
- `GET /_admin/log` the requests it made.
"""

from __future__ import annotations

import functools
import html
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, quote

from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from . import data

ADMIN_HEADER = "x-webapp-admin"
COOKIE = "wsid"
MAX_SESSIONS = 4096
MAX_LOG = 2000


@dataclass
class Session:
    """One browser context's state in both apps."""

    sid: str
    logged_in: dict[str, bool] = field(default_factory=lambda: {"shop": True, "mail": True})
    cart: dict[str, int] = field(default_factory=dict)
    orders: list[dict] = field(default_factory=lambda: [dict(o) for o in data.PAST_ORDERS])
    folders: dict[str, str] = field(default_factory=lambda: {m.mid: "inbox" for m in data.MESSAGES})
    starred: set[str] = field(default_factory=set)
    read: set[str] = field(default_factory=set)
    sent: list[dict] = field(default_factory=list)
    record: list[dict] = field(default_factory=list)
    log: list[dict] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def note(self, app: str, kind: str, **fields: Any) -> None:
        """Add a state change to the record the grader reads."""
        with self.lock:
            entry = {"seq": len(self.record) + 1, "app": app, "type": kind, **fields}
            entry["t"] = round(time.monotonic() - self.started, 3)
            self.record.append(entry)


class Sessions:
    """sid → Session, the newest MAX_SESSIONS kept."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_sid: OrderedDict[str, Session] = OrderedDict()

    def new(self, logged_in: bool = True) -> Session:
        s = Session(uuid.uuid4().hex)
        s.logged_in = {"shop": logged_in, "mail": logged_in}
        with self._lock:
            self._by_sid[s.sid] = s
            while len(self._by_sid) > MAX_SESSIONS:
                self._by_sid.popitem(last=False)
        return s

    def get(self, sid: str | None) -> Session | None:
        with self._lock:
            return self._by_sid.get(sid) if sid else None


async def form(request: Request) -> dict[str, str]:
    """An urlencoded form body (the apps' forms post nothing else)."""
    body = (await request.body()).decode("utf-8", "replace")
    return {k: v[-1] for k, v in parse_qs(body, keep_blank_values=True).items()}


def esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


STYLE = """
*{box-sizing:border-box}
body{margin:0;font:15px/1.45 "DejaVu Sans",Arial,sans-serif;color:#1d2430;background:#f4f5f7}
header{display:flex;align-items:center;gap:22px;padding:0 24px;height:56px;background:#23395d;color:#fff}
header .brand{font-weight:bold;font-size:19px;margin-right:12px}
header a{color:#dfe8f7;text-decoration:none} header .right{margin-left:auto}
main{max-width:980px;margin:22px auto;padding:0 20px} a{color:#1f5fbf}
h1{font-size:23px;margin:4px 0 14px}
.card{background:#fff;border:1px solid #d9dde3;border-radius:6px;padding:16px;margin-bottom:14px}
.grid{display:grid;grid-template-columns:repeat(4,1fr);gap:12px} .grid .card{margin:0;padding:12px}
.price{font-weight:bold;color:#0b6b3a} .muted{color:#667085;font-size:13px}
button,.button{display:inline-block;background:#1f5fbf;color:#fff;border:0;border-radius:5px;padding:8px 16px;
  font-size:15px;cursor:pointer;text-decoration:none}
button.secondary{background:#8a94a6} button.danger{background:#b42318}
input[type=text],input[type=password],input[type=number],input[type=search],textarea{font:inherit;
  padding:7px 9px;border:1px solid #b8c0cc;border-radius:4px;width:100%}
textarea{height:120px} label{display:block;margin:10px 0 4px;font-weight:bold}
table{width:100%;border-collapse:collapse;background:#fff}
td,th{text-align:left;padding:8px 10px;border-bottom:1px solid #e4e7ec}
.error{color:#b42318;font-weight:bold} .ok{color:#0b6b3a;font-weight:bold}
.row{display:flex;gap:10px;align-items:center} .unread td{font-weight:bold} .tabs a{margin-right:14px}
"""


def page(title: str, body: str, app: str, session: Session | None, nav: str = "") -> HTMLResponse:
    brand = {"shop": "Harbour Goods", "mail": "Northwind Mail"}.get(app, "Web apps")
    who = ""
    if app in ("shop", "mail") and session is not None:
        who = (
            f'<span class="right">Signed in as {data.USERS[app][0]} · <a href="/{app}/logout">Log out</a>'
            "</span>"
            if session.logged_in[app]
            else f'<a class="right" href="/{app}/login">Log in</a>'
        )
    doc = (
        f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{esc(title)} · {brand}</title>"
        f"<style>{STYLE}</style></head><body><header><span class=brand>{brand}</span>"
        f"<a href='/'>Apps</a>{nav}{who}</header>"
        f"<main>{body}</main></body></html>"
    )
    return HTMLResponse(doc)


def login_wall(request: Request, app: str) -> Response | None:
    """A redirect to the app's login page when the session is logged out of `app`."""
    session: Session = request.state.session
    if session.logged_in[app]:
        return None
    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return RedirectResponse(f"/{app}/login?next={quote(target)}", status_code=303)


def signed_in(
    app: str,
) -> Callable[[Callable[..., Awaitable[Response]]], Callable[[Request], Awaitable[Response]]]:
    """A page of `app` for a logged-in user: the handler is called with the request and its session; a
    logged-out session gets the way to the login page (`login_wall`)."""

    def wrap(handler: Callable[..., Awaitable[Response]]) -> Callable[[Request], Awaitable[Response]]:
        @functools.wraps(handler)
        async def guarded(request: Request) -> Response:
            wall = login_wall(request, app)
            return wall if wall is not None else await handler(request, request.state.session)

        return guarded

    return wrap


def login_routes(app: str, home: str, nav: str) -> list[Route]:
    """GET/POST /{app}/login and /{app}/logout."""

    async def login(request: Request) -> Response:
        session: Session = request.state.session
        nxt = request.query_params.get("next") or home
        if not nxt.startswith(f"/{app}/"):
            nxt = home
        error = ""
        if request.method == "POST":
            f = await form(request)
            if (f.get("username", "").strip(), f.get("password", "")) == data.USERS[app]:
                session.logged_in[app] = True
                session.note(app, "login", user=data.USERS[app][0])
                return RedirectResponse(nxt, status_code=303)
            session.note(app, "login_failed", user=f.get("username", ""))
            error = '<p class="error">Wrong username or password.</p>'
        body = (
            f'<div class="card" style="max-width:420px"><h1>Log in</h1>{error}'
            f'<form method="post" action="/{app}/login?next={quote(nxt)}">'
            '<label for="username">Username</label><input type="text" id="username" name="username">'
            '<label for="password">Password</label><input type="password" id="password" name="password">'
            '<p><button type="submit">Log in</button></p></form></div>'
        )
        return page("Log in", body, app, session, nav)

    async def logout(request: Request) -> Response:
        session: Session = request.state.session
        if session.logged_in[app]:
            session.logged_in[app] = False
            session.note(app, "logout")
        return RedirectResponse(f"/{app}/login", status_code=303)

    return [
        Route(f"/{app}/login", login, methods=["GET", "POST"]),
        Route(f"/{app}/logout", logout),
    ]
