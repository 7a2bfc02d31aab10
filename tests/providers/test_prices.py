"""Prices: the table shipped inside the package, the user's file over it, unknown never guessed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from evalkit.providers import prices
from evalkit.types import Usage

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _no_user_prices(tmp_path, monkeypatch):
    """Whatever the machine's own price file says stays out of these tests."""
    monkeypatch.delenv(prices.OVERRIDE_VARIABLE, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    prices.price_table.cache_clear()
    yield
    prices.price_table.cache_clear()


def test_cost_from_price_table():
    usage = Usage(input=1_000_000, output=100_000, cache_read=2_000_000, cache_write=400_000)
    cost = prices.cost_usd("anthropic:claude-sonnet-5@low", usage)
    assert cost == pytest.approx(2.0 + 1.0 + 0.4 + 1.0)
    assert prices.cost_usd("openai:gpt-6-sol", Usage(output=1_000_000)) == pytest.approx(10.0)
    assert prices.cost_usd("anthropic:claude-sonnet-5-20260630", Usage(input=1_000_000)) == pytest.approx(2.0)


def test_unknown_model_has_no_price():
    assert prices.cost_usd("hf:org/unknown:prov-a|prov-b@off", Usage(input=10)) is None
    assert prices.cost_usd("vllm:my-model", Usage(input=10)) is None
    assert prices.model_id("hf:org/m:novita|together@low") == "org/m"


@pytest.fixture
def price_file(tmp_path, monkeypatch):
    """A price table at a path of the test's choosing, read afresh (and the real one again afterwards)."""
    path = tmp_path / "prices.json"
    monkeypatch.setattr(prices, "PRICES_PATH", path)
    prices.price_table.cache_clear()
    yield path
    prices.price_table.cache_clear()


@pytest.mark.parametrize(
    "content",
    [
        None,
        "{not json",
        "[1, 2]",
        '{"gpt-6-sol": {"input": "two", "output": 10.0}}',
        '{"gpt-6-sol": {"output": 10.0}}',
    ],
    ids=["missing", "not-json", "not-an-object", "not-a-number", "no-input-price"],
)
def test_unusable_price_table_warns_once_and_prices_nothing(price_file, content):
    if content is not None:
        price_file.write_text(content)
    with pytest.warns(RuntimeWarning, match="price table") as caught:
        for label in ("openai:gpt-6-sol", "anthropic:claude-sonnet-5", "vllm:m"):
            assert prices.cost_usd(label, Usage(input=1_000, output=1_000)) is None
    assert len([w for w in caught if "price table" in str(w.message)]) == 1


def test_price_table_at_another_path(price_file):
    price_file.write_text('{"_about": "x", "m-1": {"input": 1.0, "output": 2.0}}')
    assert prices.cost_usd("vllm:m-1", Usage(input=1_000_000, output=1_000_000)) == pytest.approx(3.0)


def test_a_users_file_adds_models_and_replaces_prices(tmp_path, monkeypatch):
    mine = tmp_path / "mine.json"
    mine.write_text(
        json.dumps({"org/vlm": {"input": 0.5, "output": 1.0}, "gpt-6-sol": {"input": 1, "output": 1}})
    )
    monkeypatch.setenv(prices.OVERRIDE_VARIABLE, str(mine))
    million = Usage(input=1_000_000, output=1_000_000)
    assert prices.cost_usd("hf:org/vlm:prov-a|prov-b@off", million) == pytest.approx(1.5)
    assert prices.cost_usd("openai:gpt-6-sol", million) == pytest.approx(2.0)
    assert prices.cost_usd("anthropic:claude-sonnet-5", million) == pytest.approx(12.0)  # shipped, untouched


def test_the_config_dir_file_is_read_when_present(tmp_path):
    path = tmp_path / "config" / "evalkit" / "prices.json"
    path.parent.mkdir(parents=True)
    path.write_text('{"my-model": {"input": 3.0, "output": 0}}')
    assert prices.override_path() == path
    assert prices.cost_usd("vllm:my-model", Usage(input=1_000_000)) == pytest.approx(3.0)


def test_a_named_file_that_is_missing_prices_nothing_rather_than_the_shipped_table(tmp_path, monkeypatch):
    monkeypatch.setenv(prices.OVERRIDE_VARIABLE, str(tmp_path / "typo.json"))
    with pytest.warns(RuntimeWarning, match="typo.json"):
        assert prices.cost_usd("openai:gpt-6-sol", Usage(input=1)) is None


def test_prices_ship_inside_the_package(tmp_path):
    """Build the package as a wheel would (setuptools' build_py, from pyproject.toml, in a clean copy of the
    sources), then price a model from the built tree alone: a table left out of the package data would leave
    every cost null."""
    import shutil

    src, build = tmp_path / "src", tmp_path / "build"
    shutil.copytree(ROOT / "evalkit", src / "evalkit", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    script = (
        "import os, sys; from setuptools.dist import Distribution; os.chdir(sys.argv[1]);"
        "d = Distribution({'script_name': 'setup.py'}); d.parse_config_files();"
        "c = d.get_command_obj('build_py'); c.build_lib = sys.argv[2]; c.compile = 0;"
        "d.run_command('build_py')"
    )
    subprocess.run([sys.executable, "-W", "ignore", "-c", script, str(src), str(build)], check=True,
                   capture_output=True)  # fmt: skip
    assert (build / "evalkit" / "data" / "prices.json").is_file()
    probe = (
        "import warnings; warnings.simplefilter('error');"
        "from evalkit.providers import prices; from evalkit.types import Usage;"
        "print(prices.__file__); print(prices.cost_usd('openai:gpt-6-sol', Usage(output=1_000_000)))"
    )
    env = {**os.environ, "PYTHONPATH": str(build), "XDG_CONFIG_HOME": str(tmp_path)}
    env.pop(prices.OVERRIDE_VARIABLE, None)
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, env=env, check=True, capture_output=True
    )
    where, cost = out.stdout.decode().split()
    assert where.startswith(str(build)) and float(cost) == pytest.approx(10.0)
