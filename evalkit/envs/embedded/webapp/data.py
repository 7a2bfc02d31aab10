"""The seed data every session starts from: the shop's catalogue and past orders, the mailbox, the users.

Fixed and ordered, so a page lays out the same way in every session and a task's answer never drifts.
"""

from __future__ import annotations

from dataclasses import dataclass

USERS = {"shop": ("alex", "orchid-42"), "mail": ("alex", "lantern-7")}
"""(username, password) per app; tasks that start logged out give these in their prompt."""


@dataclass(frozen=True)
class Product:
    pid: str
    name: str
    category: str
    price: float
    stock: int
    rating: float
    blurb: str


PRODUCTS = [
    Product("P01", "Walnut Desk Lamp", "Home", 39.90, 12, 4.5, "A warm LED lamp with a solid walnut base."),
    Product("P02", "Linen Throw Blanket", "Home", 54.00, 7, 4.2, "Stonewashed linen, 130 x 170 cm."),
    Product("P03", "Ceramic Pour-Over Set", "Kitchen", 32.50, 20, 4.7, "Dripper, carafe and two cups."),
    Product("P04", "Cast Iron Skillet", "Kitchen", 45.00, 9, 4.8, "Pre-seasoned 26 cm skillet."),
    Product("P05", "Chef's Knife 20 cm", "Kitchen", 89.00, 4, 4.6, "High-carbon steel, full tang."),
    Product(
        "P06", "Bamboo Cutting Board", "Kitchen", 18.75, 31, 4.1, "Reversible board with a juice groove."
    ),
    Product("P07", "Trail Running Shoes", "Outdoor", 119.00, 6, 4.4, "Grippy lugs, 8 mm drop."),
    Product("P08", "Insulated Water Bottle", "Outdoor", 24.00, 40, 4.3, "Keeps drinks cold for 24 hours."),
    Product("P09", "Two-Person Tent", "Outdoor", 210.00, 3, 4.5, "Freestanding, 2.1 kg packed."),
    Product("P10", "Headlamp 400 lm", "Outdoor", 29.95, 15, 4.0, "Rechargeable, red night mode."),
    Product("P11", "Noise-Cancelling Headphones", "Electronics", 249.00, 5, 4.6, "30 hours of battery."),
    Product("P12", "USB-C Charger 65 W", "Electronics", 42.00, 22, 4.4, "Two ports, folding plug."),
    Product("P13", "Mechanical Keyboard", "Electronics", 134.00, 8, 4.7, "Hot-swappable tactile switches."),
    Product("P14", "Wireless Mouse", "Electronics", 35.00, 18, 4.2, "Silent clicks, 70-day battery."),
    Product("P15", "Paperback Notebook A5", "Stationery", 9.50, 60, 4.5, "Dotted grid, 192 pages."),
    Product("P16", "Fountain Pen", "Stationery", 27.00, 11, 4.3, "Steel nib, converter included."),
    Product("P17", "Desk Organizer", "Stationery", 21.00, 14, 3.9, "Five compartments, recycled felt."),
    Product("P18", "Wool Beanie", "Apparel", 22.00, 25, 4.4, "Merino wool, one size."),
    Product("P19", "Rain Jacket", "Apparel", 98.00, 10, 4.1, "Waterproof, packs into its pocket."),
    Product("P20", "Cotton Socks (3 pairs)", "Apparel", 14.00, 50, 4.6, "Cushioned soles."),
]
CATEGORIES = sorted({p.category for p in PRODUCTS})
SHIPPING = {"standard": ("Standard (5-7 days)", 4.99), "express": ("Express (1-2 days)", 14.99)}
FREE_SHIPPING_OVER = 100.0
"""Standard shipping is free for an order whose items cost at least this much."""

PAST_ORDERS = [
    {
        "order": "1001",
        "date": "2026-09-14",
        "items": {"P03": 1, "P15": 2},
        "shipping": "standard",
        "name": "Alex Morgan",
        "address": "12 Quay Street, Harbourton",
        "status": "Delivered",
    },
    {
        "order": "1002",
        "date": "2026-10-02",
        "items": {"P12": 1, "P14": 1},
        "shipping": "express",
        "name": "Alex Morgan",
        "address": "12 Quay Street, Harbourton",
        "status": "Shipped",
    },
]


@dataclass(frozen=True)
class Message:
    mid: str
    sender: str
    address: str
    subject: str
    date: str
    body: str


MESSAGES = [
    Message(
        "M01",
        "Priya Natarajan",
        "priya@northwind.test",
        "Quarterly budget review",
        "2026-10-20",
        "Hi Alex,\n\nThe quarterly budget review moved to Thursday at 14:00 in room Falcon. Please bring "
        "the travel figures.\n\nPriya",
    ),
    Message(
        "M02",
        "Tom Becker",
        "tom@northwind.test",
        "Lunch on Friday?",
        "2026-10-19",
        "Shall we try the new noodle place on Friday? I can book a table for 12:30.\n\nTom",
    ),
    Message(
        "M03",
        "IT Helpdesk",
        "helpdesk@northwind.test",
        "Password expiry notice",
        "2026-10-18",
        "Your password expires in 5 days. Ticket number for reference: HD-4471.",
    ),
    Message(
        "M04",
        "Lena Okafor",
        "lena@northwind.test",
        "Conference badge pickup",
        "2026-10-17",
        "Badges can be picked up at desk 3 from 08:00. Your badge code is ZX-208.",
    ),
    Message(
        "M05",
        "Priya Natarajan",
        "priya@northwind.test",
        "Travel figures template",
        "2026-10-16",
        "Attached is the template for the travel figures. Totals go in column F.",
    ),
    Message(
        "M06",
        "Shipping Notifications",
        "noreply@parcel.test",
        "Your parcel is on its way",
        "2026-10-15",
        "Parcel 88-1320-77 will arrive on Tuesday between 9 and 12.",
    ),
    Message(
        "M07",
        "Marco Silva",
        "marco@northwind.test",
        "Design review notes",
        "2026-10-14",
        "Notes from the design review: ship the blue variant, drop the dark mode toggle for now.",
    ),
    Message(
        "M08",
        "Newsletter",
        "news@weekly.test",
        "This week in gardening",
        "2026-10-13",
        "Ten autumn bulbs to plant before the first frost.",
    ),
    Message(
        "M09",
        "Tom Becker",
        "tom@northwind.test",
        "Re: team offsite",
        "2026-10-12",
        "The offsite venue is Larch Hall. Coaches leave at 08:15 from the north entrance.",
    ),
    Message(
        "M10",
        "Lena Okafor",
        "lena@northwind.test",
        "Invoice 2026-311",
        "2026-10-11",
        "Invoice 2026-311 for 1,240.00 EUR is due on 31 October.",
    ),
]


def product(pid: str) -> Product | None:
    return next((p for p in PRODUCTS if p.pid == pid), None)


def order_total(items: dict[str, int], shipping: str) -> float:
    """Items plus shipping; standard shipping is free at FREE_SHIPPING_OVER."""
    subtotal = sum(product(pid).price * qty for pid, qty in items.items() if product(pid))
    fee = SHIPPING[shipping][1]
    if shipping == "standard" and subtotal >= FREE_SHIPPING_OVER:
        fee = 0.0
    return round(subtotal + fee, 2)
