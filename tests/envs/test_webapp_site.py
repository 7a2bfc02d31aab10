"""The web apps over real HTTP: per-context sessions, logins, the record and log the grader reads, and admin
endpoints that answer only with the server's key."""

from __future__ import annotations

import httpx
import pytest

from evalkit.envs.embedded.webapp.serve import SiteServer


@pytest.fixture(scope="module")
def site():
    with SiteServer() as s:
        yield s


def client(site, logout: bool = False) -> httpx.Client:
    c = httpx.Client(base_url=site.base, follow_redirects=True, timeout=10)
    r = c.get("/_admin/session-flags" + ("?logout=1" if logout else ""), headers=site.admin_headers)
    assert r.status_code == 200
    return c


def record(site, c: httpx.Client) -> list[dict]:
    return c.get("/_admin/record", headers=site.admin_headers).json()["entries"]


def test_admin_endpoints_need_the_key(site):
    c = httpx.Client(base_url=site.base)
    for path in ("/_admin/session-flags", "/_admin/record", "/_admin/log"):
        assert c.get(path).status_code == 404
        assert c.get(path, headers={"x-webapp-admin": "guess"}).status_code == 404
    assert c.get("/_admin/record", headers=site.admin_headers).status_code == 200


def test_shop_flow_is_recorded_and_sessions_are_isolated(site):
    a, b = client(site), client(site)
    assert "Cast Iron Skillet" in a.get("/shop/search", params={"q": "skillet"}).text
    a.post("/shop/cart/add", data={"pid": "P04", "qty": "2"})
    a.post("/shop/cart/add", data={"pid": "P08", "qty": "1"})
    a.post("/shop/cart/remove", data={"pid": "P08"})
    page = a.post(
        "/shop/checkout", data={"name": "Alex Morgan", "address": "12 Quay Street", "shipping": "express"}
    )
    assert "Thank you" in page.text and "$104.99" in page.text  # 2 × 45.00 + 14.99 express
    kinds = [e["type"] for e in record(site, a)]
    assert kinds == ["cart_add", "cart_add", "cart_remove", "order_placed"]
    order = record(site, a)[-1]
    assert order["items"] == {"P04": 2} and order["shipping"] == "express" and order["total"] == 104.99
    assert record(site, b) == [] and "empty" in b.get("/shop/cart").text
    log = a.get("/_admin/log", headers=site.admin_headers).json()["entries"]
    assert [e["path"] for e in log][:2] == ["/shop/search", "/shop/cart/add"]
    assert not any(e["path"].startswith("/_admin") for e in log)


def test_bad_shop_input_changes_nothing(site):
    c = client(site)
    assert "1 to 99" in c.post("/shop/cart/add", data={"pid": "P04", "qty": "0"}).text
    assert "1 to 99" in c.post("/shop/cart/add", data={"pid": "P99", "qty": "1"}).text
    assert "Your cart is empty" in c.post("/shop/checkout", data={"name": "A", "address": "B"}).text
    c.post("/shop/cart/add", data={"pid": "P01", "qty": "1"})
    assert "Fill in your name" in c.post("/shop/checkout", data={"name": "", "address": "B"}).text
    assert [e["type"] for e in record(site, c)] == ["cart_add"]


def test_logged_out_sessions_must_log_in(site):
    c = client(site, logout=True)
    r = c.get("/mail/")
    assert r.url.path == "/mail/login" and "next=/mail/" in str(r.url)
    assert "Log in to buy" in c.get("/shop/product/P01").text
    bad = c.post("/mail/login?next=/mail/", data={"username": "alex", "password": "wrong"})
    assert "Wrong username or password" in bad.text
    ok = c.post("/mail/login?next=/mail/message/M03", data={"username": "alex", "password": "lantern-7"})
    assert ok.url.path == "/mail/message/M03" and "HD-4471" in ok.text
    assert c.get("/shop/cart").url.path == "/shop/login"  # one app's login is not the other's
    assert [e["type"] for e in record(site, c)] == ["login_failed", "login"]


def test_mail_actions_are_recorded(site):
    c = client(site)
    c.post("/mail/message/M02/star")
    c.post("/mail/message/M08/archive")
    c.post("/mail/message/M06/delete")
    assert "Your parcel" not in c.get("/mail/").text
    assert "This week in gardening" in c.get("/mail/", params={"folder": "archive"}).text
    reply = c.get("/mail/compose", params={"reply": "M02"}).text
    assert 'value="tom@northwind.test"' in reply and 'value="Re: Lunch on Friday?"' in reply
    assert "needs a recipient" in c.post("/mail/compose", data={"to": "nobody", "subject": "x"}).text
    c.post(
        "/mail/compose?reply=M02",
        data={"to": "tom@northwind.test", "subject": "Re: Lunch", "body": "12:30 ok"},
    )
    entries = record(site, c)
    assert [e["type"] for e in entries] == ["mail_starred", "mail_archived", "mail_deleted", "mail_sent"]
    assert entries[-1]["reply_to"] == "M02" and entries[-1]["body"] == "12:30 ok"
    assert [e["seq"] for e in entries] == [1, 2, 3, 4]


def test_a_page_cannot_inject_markup(site):
    c = client(site)
    assert "<script>" not in c.get("/shop/search", params={"q": "<script>x</script>"}).text
