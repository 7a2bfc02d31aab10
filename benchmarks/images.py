"""What the two image budgets cost and save over a long episode, read off the requests a server receives.

One 30-turn episode per option in which every turn brings a screenshot (the budget's worst case), driven by
the real SDK client against the local wire-protocol server of the tests, which records each request body.
Per option:

- images per request (the target included) and input tokens sent, estimated as text characters / 4 plus
  IMAGE_TOKENS per image; `saved` is the share of input tokens not sent, against no pruning;
- `prefix kept`: the share of requests whose conversation begins with the whole previous one (the first N
  bytes equal the previous request's, N its length): the provider's prompt cache survived;
- `cache hit`: the share of input tokens inside the prefix shared with the previous request;
- `cost`: input cost against no pruning, cached tokens read at CACHE_READ of the input price.

All counts, no timings: the figures are the same on any machine.

    PYTHONPATH=. python benchmarks/images.py [--turns 30] [--api anthropic|openai|chat|all]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tests' stand-in server and env

from evalkit.providers import attempts, images  # noqa: E402
from evalkit.run.episode import run_episode  # noqa: E402
from evalkit.types import AgentOptions  # noqa: E402
from tests.providers.fakes import IMAGE_TYPES, FakeModelServer, Reply, conversation, prefix_hits  # noqa: E402
from tests.support.pictures import PictureEnv  # noqa: E402

IMAGE_TOKENS = 1_000
"""About what a 1024×768 screenshot costs in input tokens (Anthropic: w·h/750 ≈ 1,050)."""
CACHE_READ = 0.1
"""Price of a cached input token relative to an uncached one (Anthropic and OpenAI list 10%)."""

OPTIONS: dict[str, dict[str, Any]] = {
    "no budget": {},
    "--keep-images 1": {"keep_images": 1},
    "--keep-images 2": {"keep_images": 2},
    "--keep-images 4": {"keep_images": 4},
    "--keep-images 8": {"keep_images": 8},
    "--image-window 6,2": {"image_window": (6, 2)},
    "--image-window 10,4": {"image_window": (10, 4)},
    "--image-window 12,8": {"image_window": (12, 8)},
    "--image-window 5,4": {"image_window": (5, 4)},
}
APIS = {
    "anthropic": ("anthropic:claude-sonnet-5", "/v1/messages"),
    "openai": ("openai:gpt-6-sol", "/v1/responses"),
    "chat": ("vllm:qwen3-vl", "/v1/chat/completions"),
}


def units(body: dict) -> list[tuple[str, int]]:
    """The conversation as (content, estimated tokens) pieces in reading order: what a prefix cache sees."""
    out: list[tuple[str, int]] = []

    def walk(x: Any) -> None:
        if isinstance(x, dict):
            if x.get("type") in IMAGE_TYPES:
                out.append((json.dumps(x, sort_keys=True), IMAGE_TOKENS))
                return
            for k, v in x.items():
                if isinstance(v, str):
                    out.append((f"{k}={v}", max(1, len(v) // 4)))
                else:
                    walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)
        elif isinstance(x, str):
            out.append((x, max(1, len(x) // 4)))

    walk(conversation(body))
    return out


def measure(bodies: list[dict]) -> dict[str, float]:
    pieces = [units(b) for b in bodies]
    sent = cached = 0
    for i, cur in enumerate(pieces):
        total = sum(t for _, t in cur)
        shared = 0
        if i:
            for a, b in zip(pieces[i - 1], cur, strict=False):
                if a != b:
                    break
                shared += b[1]
        sent, cached = sent + total, cached + shared
    hits = prefix_hits(bodies)
    return {
        "images": sum(sum(1 for _, t in p if t == IMAGE_TOKENS) for p in pieces) / len(pieces),
        "tokens": sent / len(pieces),
        "prefix_kept": sum(hits) / len(hits),
        "cache_hit": cached / sent,
        "cost": (sent - cached) + CACHE_READ * cached,
    }


def run(server: FakeModelServer, spec: str, path: str, options: dict, turns: int) -> dict[str, float]:
    server.reset(default=Reply(calls=[("look", {})]))
    rec = run_episode(
        spec,
        lambda: PictureEnv(),
        max_turns=turns,
        frames=False,
        options=AgentOptions(max_retries=0, **options),
    )
    if rec.error_class:
        raise SystemExit(f"{spec} {options}: {rec.error}")
    bodies = server.bodies(path)
    assert len(bodies) == turns
    return measure(bodies)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, default=30)
    ap.add_argument("--api", choices=[*APIS, "all"], default="anthropic")
    a = ap.parse_args()
    server = FakeModelServer().start()
    for name, value in {
        "ANTHROPIC_API_KEY": "-", "OPENAI_API_KEY": "-", "ANTHROPIC_BASE_URL": server.url,
        "OPENAI_BASE_URL": server.url + "/v1", "VLLM_BASE_URL": server.url + "/v1",
    }.items():  # fmt: skip
        os.environ[name] = value
    attempts.sleep = lambda s: None
    try:
        for api in APIS if a.api == "all" else [a.api]:
            spec, path = APIS[api]
            rows = {label: run(server, spec, path, opts, a.turns) for label, opts in OPTIONS.items()}
            base = rows["no budget"]
            print(f"\n{spec}: {a.turns} turns, one screenshot a turn, {IMAGE_TOKENS} tokens an image")
            print(f"{'option':22} {'images':>7} {'tokens':>7} {'saved':>6} {'prefix kept':>12} "
                  f"{'cache hit':>10} {'cost':>6}  prefix stable for")  # fmt: skip
            for label, r in rows.items():
                b = images.budget(OPTIONS[label].get("keep_images"), OPTIONS[label].get("image_window"))
                stable = "every turn" if b is None else f"{b.most - b.keep + 1} turns"
                saved, cost = 1 - r["tokens"] / base["tokens"], r["cost"] / base["cost"]
                print(
                    f"{label:22} {r['images']:7.1f} {r['tokens']:7.0f} {saved:6.0%} "
                    f"{r['prefix_kept']:12.0%} {r['cache_hit']:10.0%} {cost:6.2f}  {stable}"
                )
    finally:
        server.stop()


if __name__ == "__main__":
    main()
