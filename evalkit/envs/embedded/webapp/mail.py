"""Northwind Mail: inbox, archive and sent folders, reading, starring, archiving, deleting, composing and
replying, all behind a login."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from . import data
from .site import Session, esc, form, login_routes, page, signed_in

APP = "mail"
NAV = (
    '<a href="/mail/">Inbox</a><a href="/mail/?folder=archive">Archive</a><a href="/mail/sent">Sent</a>'
    + '<a href="/mail/compose">Compose</a>'
)
FOLDERS = ("inbox", "archive")


def _render(title: str, body: str, request: Request) -> Response:
    return page(title, body, APP, request.state.session, NAV)


def _message(mid: str) -> data.Message | None:
    return next((m for m in data.MESSAGES if m.mid == mid), None)


@signed_in(APP)
async def inbox(request: Request, s: Session) -> Response:
    folder = request.query_params.get("folder", "inbox")
    folder = folder if folder in FOLDERS else "inbox"
    rows = "".join(
        f'<tr class="{"" if m.mid in s.read else "unread"}"><td>{"★" if m.mid in s.starred else ""}</td>'
        f'<td>{esc(m.sender)}</td><td><a href="/mail/message/{m.mid}">{esc(m.subject)}</a></td>'
        f"<td>{m.date}</td></tr>"
        for m in data.MESSAGES
        if s.folders.get(m.mid) == folder
    )
    table = f"<table><tr><th></th><th>From</th><th>Subject</th><th>Date</th></tr>{rows}</table>"
    body = f"<h1>{folder.title()}</h1>" + (table if rows else "<p>No messages.</p>")
    return _render(folder.title(), body, request)


@signed_in(APP)
async def message(request: Request, s: Session) -> Response:
    m = _message(request.path_params["mid"])
    if m is None or s.folders.get(m.mid) == "trash":
        return _render("Message", "<h1>No such message</h1>", request)
    with s.lock:
        s.read.add(m.mid)
    star = "Unstar" if m.mid in s.starred else "Star"
    buttons = "".join(
        f'<form method="post" action="/mail/message/{m.mid}/{act}"><button class="{cls}">{label}</button>'
        "</form>"
        for act, label, cls in (
            ("star", star, "secondary"),
            ("archive", "Archive", "secondary"),
            ("delete", "Delete", "danger"),
        )
    )
    paragraphs = "".join(f"<p>{esc(p)}</p>" for p in m.body.split("\n\n"))
    body = (
        f'<div class="card"><h1>{esc(m.subject)}</h1><p class="muted">From {esc(m.sender)} '
        f"&lt;{esc(m.address)}&gt; · {m.date}</p>{paragraphs}"
        f'<div class="row"><a class="button" href="/mail/compose?reply={m.mid}">Reply</a>{buttons}</div>'
        "</div>"
    )
    return _render(m.subject, body, request)


def _action(kind: str):
    @signed_in(APP)
    async def act(request: Request, s: Session) -> Response:
        m = _message(request.path_params["mid"])
        if m is None or s.folders.get(m.mid) == "trash":
            return RedirectResponse("/mail/", status_code=303)
        if kind == "star":
            with s.lock:
                on = m.mid not in s.starred
                (s.starred.add if on else s.starred.discard)(m.mid)
            s.note(APP, "mail_starred" if on else "mail_unstarred", message=m.mid, subject=m.subject)
            return RedirectResponse(f"/mail/message/{m.mid}", status_code=303)
        with s.lock:
            s.folders[m.mid] = "archive" if kind == "archive" else "trash"
        s.note(
            APP, f"mail_{'archived' if kind == 'archive' else 'deleted'}", message=m.mid, subject=m.subject
        )
        return RedirectResponse("/mail/", status_code=303)

    return act


@signed_in(APP)
async def compose(request: Request, s: Session) -> Response:
    error = ""
    reply = _message(request.query_params.get("reply", ""))
    to, subject, text = "", "", ""
    if reply is not None:
        to, subject = reply.address, f"Re: {reply.subject}"
    if request.method == "POST":
        f = await form(request)
        to, subject, text = f.get("to", "").strip(), f.get("subject", "").strip(), f.get("body", "")
        if "@" not in to or not subject:
            error = "A message needs a recipient address and a subject."
        else:
            sent = {
                "to": to,
                "subject": subject,
                "body": text.strip(),
                "reply_to": reply.mid if reply else None,
            }
            with s.lock:
                s.sent.append(sent)
            s.note(APP, "mail_sent", **sent)
            return RedirectResponse("/mail/sent?sent=1", status_code=303)
    action = "/mail/compose" + (f"?reply={reply.mid}" if reply else "")
    body = (
        f"<h1>{'Reply' if reply else 'New message'}</h1>{f'<p class=error>{error}</p>' if error else ''}"
        f'<div class="card"><form method="post" action="{action}"><label for="to">To</label>'
        f'<input type="text" id="to" name="to" value="{esc(to)}"><label for="subject">Subject</label>'
        f'<input type="text" id="subject" name="subject" value="{esc(subject)}">'
        '<label for="body">Message</label>'
        f'<textarea id="body" name="body">{esc(text)}</textarea><p><button type="submit">Send</button></p>'
        "</form></div>"
    )
    return _render("Compose", body, request)


@signed_in(APP)
async def sent(request: Request, s: Session) -> Response:
    note = '<p class="ok">Message sent.</p>' if request.query_params.get("sent") else ""
    rows = "".join(f"<tr><td>{esc(m['to'])}</td><td>{esc(m['subject'])}</td></tr>" for m in reversed(s.sent))
    body = f"<h1>Sent</h1>{note}" + (
        f"<table><tr><th>To</th><th>Subject</th></tr>{rows}</table>" if rows else "<p>No sent messages.</p>"
    )
    return _render("Sent", body, request)


def routes() -> list[Route]:
    return [
        Route("/mail/", inbox),
        Route("/mail/message/{mid}", message),
        Route("/mail/message/{mid}/star", _action("star"), methods=["POST"]),
        Route("/mail/message/{mid}/archive", _action("archive"), methods=["POST"]),
        Route("/mail/message/{mid}/delete", _action("delete"), methods=["POST"]),
        Route("/mail/compose", compose, methods=["GET", "POST"]),
        Route("/mail/sent", sent),
        *login_routes(APP, "/mail/", NAV),
    ]
