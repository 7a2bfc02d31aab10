"""Harbour Goods, the shop: catalogue, search, product pages, cart, checkout and orders, behind a login for
everything that touches the account."""

from __future__ import annotations

import datetime as dt

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from . import data
from .site import Session, esc, form, login_routes, page, signed_in

APP = "shop"


def _nav(session: Session) -> str:
    n = sum(session.cart.values())
    return (
        f'<a href="/shop/">Catalogue</a><a href="/shop/cart">Cart ({n})</a><a href="/shop/orders">Orders</a>'
    )


def _money(x: float) -> str:
    return f"${x:,.2f}"


def _grid(products: list[data.Product]) -> str:
    cards = "".join(
        f'<div class="card"><a href="/shop/product/{p.pid}">{esc(p.name)}</a>'
        f'<div class="price">{_money(p.price)}</div><div class="muted">{esc(p.category)}</div></div>'
        for p in products
    )
    return f'<div class="grid">{cards}</div>' if products else "<p>No products found.</p>"


def _search_box(q: str = "") -> str:
    return (
        '<form class="row" method="get" action="/shop/search" style="margin-bottom:14px">'
        f'<input type="search" id="q" name="q" placeholder="Search products" value="{esc(q)}"'
        ' style="max-width:360px">'
        '<button type="submit">Search</button></form>'
    )


def _render(title: str, body: str, request: Request) -> Response:
    s: Session = request.state.session
    return page(title, body, APP, s, _nav(s))


async def catalogue(request: Request) -> Response:
    cat = request.query_params.get("category", "")
    products = [p for p in data.PRODUCTS if not cat or p.category == cat]
    tabs = (
        '<p class="tabs"><a href="/shop/">All</a>'
        + "".join(f'<a href="/shop/?category={esc(c)}">{esc(c)}</a>' for c in data.CATEGORIES)
        + "</p>"
    )
    body = f"<h1>{esc(cat) or 'All products'}</h1>{_search_box()}{tabs}{_grid(products)}"
    return _render("Catalogue", body, request)


async def search(request: Request) -> Response:
    q = request.query_params.get("q", "").strip()
    words = q.lower().split()
    found = [p for p in data.PRODUCTS if all(w in f"{p.name} {p.category}".lower() for w in words)]
    body = (
        f'<h1>Results for "{esc(q)}"</h1>{_search_box(q)}<p class="muted">{len(found)} product(s)</p>'
        + _grid(found)
    )
    return _render("Search", body, request)


async def product(request: Request) -> Response:
    p = data.product(request.path_params["pid"])
    if p is None:
        return _render("Not found", "<h1>No such product</h1>", request)
    s: Session = request.state.session
    if s.logged_in[APP]:
        buy = (
            '<form method="post" action="/shop/cart/add" class="row">'
            f'<input type="hidden" name="pid" value="{p.pid}">'
            '<label for="qty" style="margin:0">Quantity</label>'
            '<input type="number" id="qty" name="qty" value="1" min="1" style="width:80px">'
            '<button type="submit">Add to cart</button></form>'
        )
    else:
        buy = f'<a class="button" href="/shop/login?next=/shop/product/{p.pid}">Log in to buy</a>'
    body = (
        f'<div class="card"><h1>{esc(p.name)}</h1><p class="price">{_money(p.price)}</p>'
        f"<p>{esc(p.blurb)}</p><p class=muted>Category: {esc(p.category)} · Rating: {p.rating} / 5 · "
        f"In stock: {p.stock}</p>{buy}</div>"
    )
    return _render(p.name, body, request)


def _qty(text: str) -> int | None:
    try:
        n = int(text.strip())
    except (ValueError, AttributeError):
        return None
    return n if 1 <= n <= 99 else None


@signed_in(APP)
async def cart_add(request: Request, s: Session) -> Response:
    f = await form(request)
    p, n = data.product(f.get("pid", "")), _qty(f.get("qty", "1"))
    if p is None or n is None:
        return _render("Cart", '<p class="error">Choose a quantity from 1 to 99.</p>', request)
    with s.lock:
        s.cart[p.pid] = min(99, s.cart.get(p.pid, 0) + n)
    s.note(APP, "cart_add", product=p.pid, name=p.name, qty=n)
    return RedirectResponse("/shop/cart", status_code=303)


@signed_in(APP)
async def cart_remove(request: Request, s: Session) -> Response:
    pid = (await form(request)).get("pid", "")
    with s.lock:
        removed = s.cart.pop(pid, None)
    if removed:
        s.note(APP, "cart_remove", product=pid, qty=removed)
    return RedirectResponse("/shop/cart", status_code=303)


def _lines(items: dict[str, int]) -> tuple[str, float]:
    rows, subtotal = [], 0.0
    for pid, qty in items.items():
        p = data.product(pid)
        if p is None:
            continue
        subtotal += p.price * qty
        rows.append((p, qty))
    return rows, round(subtotal, 2)


@signed_in(APP)
async def cart(request: Request, s: Session) -> Response:
    rows, subtotal = _lines(dict(s.cart))
    if not rows:
        return _render("Cart", "<h1>Your cart</h1><p>Your cart is empty.</p>", request)
    trs = "".join(
        f"<tr><td>{esc(p.name)}</td><td>{q}</td><td>{_money(p.price)}</td><td>{_money(p.price * q)}</td>"
        '<td><form method="post" action="/shop/cart/remove">'
        f'<input type="hidden" name="pid" value="{p.pid}"><button class="secondary">Remove</button></form>'
        "</td></tr>"
        for p, q in rows
    )
    body = (
        "<h1>Your cart</h1><table><tr><th>Product</th><th>Qty</th><th>Price</th><th>Total</th><th></th></tr>"
        f'{trs}</table><p>Subtotal: <span class="price" id="subtotal">{_money(subtotal)}</span></p>'
        '<a class="button" href="/shop/checkout">Proceed to checkout</a>'
    )
    return _render("Cart", body, request)


@signed_in(APP)
async def checkout(request: Request, s: Session) -> Response:
    error = ""
    if request.method == "POST":
        f = await form(request)
        name, address = f.get("name", "").strip(), f.get("address", "").strip()
        shipping = f.get("shipping", "standard")
        with s.lock:
            items = dict(s.cart)
        if not items:
            error = "Your cart is empty."
        elif not name or not address or shipping not in data.SHIPPING:
            error = "Fill in your name and address and choose a shipping option."
        else:
            with s.lock:
                oid = str(1001 + len(s.orders))
                order = {
                    "order": oid,
                    "date": dt.date(2026, 11, 30).isoformat(),
                    "items": items,
                    "shipping": shipping,
                    "name": name,
                    "address": address,
                    "status": "Processing",
                }
                s.orders.append(order)
                s.cart.clear()
            s.note(
                APP,
                "order_placed",
                order=oid,
                items=items,
                shipping=shipping,
                name=name,
                address=address,
                total=data.order_total(items, shipping),
            )
            return RedirectResponse(f"/shop/orders/{oid}?placed=1", status_code=303)
    rows, subtotal = _lines(dict(s.cart))
    summary = "".join(f"<li>{q} × {esc(p.name)}</li>" for p, q in rows) or "<li>(empty)</li>"
    radios = "".join(
        f'<div class="row"><input type="radio" id="ship-{k}" name="shipping" value="{k}"'
        f"{' checked' if k == 'standard' else ''}>"
        f'<label for="ship-{k}" style="margin:4px 0;font-weight:normal">'
        f"{esc(label)} — {_money(fee)}</label></div>"
        for k, (label, fee) in data.SHIPPING.items()
    )
    body = (
        f'<h1>Checkout</h1>{f"<p class=error>{error}</p>" if error else ""}<div class="card">'
        f"<ul>{summary}</ul>"
        f"<p>Items: {_money(subtotal)} (standard shipping is free from {_money(data.FREE_SHIPPING_OVER)})</p>"
        '<form method="post" action="/shop/checkout"><label for="name">Full name</label>'
        '<input type="text" id="name" name="name"><label for="address">Address</label>'
        f'<input type="text" id="address" name="address"><label>Shipping</label>{radios}'
        '<p><button type="submit">Place order</button></p></form></div>'
    )
    return _render("Checkout", body, request)


@signed_in(APP)
async def orders(request: Request, s: Session) -> Response:
    trs = "".join(
        f'<tr><td><a href="/shop/orders/{o["order"]}">#{o["order"]}</a></td><td>{o["date"]}</td>'
        f"<td>{sum(o['items'].values())}</td><td>{_money(data.order_total(o['items'], o['shipping']))}</td>"
        f"<td>{o['status']}</td></tr>"
        for o in reversed(s.orders)
    )
    head = "<tr><th>Order</th><th>Date</th><th>Items</th><th>Total</th><th>Status</th></tr>"
    body = f"<h1>Your orders</h1><table>{head}{trs}</table>"
    return _render("Orders", body, request)


@signed_in(APP)
async def order(request: Request, s: Session) -> Response:
    o = next((o for o in s.orders if o["order"] == request.path_params["oid"]), None)
    if o is None:
        return _render("Order", "<h1>No such order</h1>", request)
    rows, subtotal = _lines(o["items"])
    lines = "".join(
        f"<tr><td>{esc(p.name)}</td><td>{q}</td><td>{_money(p.price * q)}</td></tr>" for p, q in rows
    )
    thanks = (
        '<p class="ok">Thank you! Your order has been placed.</p>'
        if request.query_params.get("placed")
        else ""
    )
    total = data.order_total(o["items"], o["shipping"])
    body = (
        f"<h1>Order #{o['order']}</h1>{thanks}<div class=card><p>Placed on {o['date']} · Status: "
        f"{o['status']}</p><table><tr><th>Product</th><th>Qty</th><th>Total</th></tr>{lines}</table>"
        f"<p>Shipping: {esc(data.SHIPPING[o['shipping']][0])}</p>"
        f'<p>Order total: <span class="price" id="order-total">{_money(total)}</span></p>'
        f"<p>Ship to: {esc(o['name'])}, {esc(o['address'])}</p></div>"
    )
    return _render(f"Order #{o['order']}", body, request)


def routes() -> list[Route]:
    return [
        Route("/shop/", catalogue),
        Route("/shop/search", search),
        Route("/shop/product/{pid}", product),
        Route("/shop/cart", cart),
        Route("/shop/cart/add", cart_add, methods=["POST"]),
        Route("/shop/cart/remove", cart_remove, methods=["POST"]),
        Route("/shop/checkout", checkout, methods=["GET", "POST"]),
        Route("/shop/orders", orders),
        Route("/shop/orders/{oid}", order),
        *login_routes(APP, "/shop/", '<a href="/shop/">Catalogue</a>'),
    ]
