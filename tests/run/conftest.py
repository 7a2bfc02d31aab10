"""Fixtures of the loop's and the batch's tests."""

from __future__ import annotations

import pytest

from evalkit.providers import prices
from evalkit.providers.standin import StandIn


@pytest.fixture
def priced_standin(monkeypatch):
    """The stand-in model (`evalkit.providers.standin`: the Anthropic wire served on loopback) with its price
    file as the user's (`EVALKIT_PRICES`), so that its episodes have a cost."""
    with StandIn() as s:
        for k, v in s.environ().items():
            monkeypatch.setenv(k, v)
        prices.price_table.cache_clear()
        yield s
    prices.price_table.cache_clear()
