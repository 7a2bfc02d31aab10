"""Every output of the embedded canvas env, one line each: for a change that is meant to make the env faster
and nothing else, run this in the checkout before it and in the one after, and compare the two files byte for
byte (`cmp`).

    PYTHONPATH=. python benchmarks/canvas_outputs.py OUT.txt [--tasks 300] [--episodes 40]

It writes, for the first `--tasks` test tasks and a fifth as many train tasks: the task (its document,
difficulty and tier), the reference JPEG, PNG renders at five sizes, the text boxes of its elements, and the
grade (its JSON) of ten submissions against it — the target itself, an empty canvas, the target on another
background, jittered, recoloured, restacked, halved, with other texts and font sizes, another task's design,
and moved by fractions of a pixel — with their renders; colour similarities across the palette; then
`--episodes` episodes through the env's MCP tools in both coordinate spaces (each observation: listings,
results, error texts, images, the grade and what follows it). A picture or an observation is the start of its
sha256.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import random
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from evalkit.envs.embedded.server import import_openenv_server  # noqa: E402

import_openenv_server()

from openenv.core.env_server.mcp_types import CallToolAction, ListToolsAction  # noqa: E402

from evalkit.envs.embedded.canvas.env import CanvasEnv  # noqa: E402
from evalkit.envs.embedded.canvas.grade import colour_similarity, grade_doc  # noqa: E402
from evalkit.envs.embedded.canvas.model import Doc  # noqa: E402
from evalkit.envs.embedded.canvas.render import element_box, encode, jpeg_b64_of, png_of, render_doc  # noqa: E402
from evalkit.envs.embedded.canvas.tasks import PALETTE, WORDS, difficulty, generate_task  # noqa: E402

RECT = {"kind": "rect", "x": 10.5, "y": 5, "width": 200, "height": 120, "fill": "#112233"}
TEXT = {"kind": "text", "x": 30, "y": 40, "width": 0, "height": 0, "fill": "red", "text": "Hi\nthere",
        "font_size": 23}  # fmt: skip
ACTIONS = [
    ListToolsAction(),
    CallToolAction(tool_name="add_element", arguments=RECT),
    CallToolAction(tool_name="add_element", arguments=TEXT),
    CallToolAction(tool_name="add_element", arguments={"kind": "rect"}),
    CallToolAction(tool_name="add_element", arguments={**RECT, "kind": 3, "x": "left"}),
    CallToolAction(tool_name="add_element", arguments={**RECT, "colour": "red"}),
    CallToolAction(tool_name="update_element", arguments={"id": "e99", "x": 1}),
    CallToolAction(tool_name="update_element", arguments={"id": "e1", "x": 17.25, "radius": 9}),
    CallToolAction(tool_name="set_background", arguments={"color": "navy"}),
    CallToolAction(tool_name="get_document", arguments={}),
    CallToolAction(tool_name="no_such_tool", arguments={}),
    CallToolAction(tool_name="click", arguments={"x": 1, "y": 1}),
    CallToolAction(tool_name="view_canvas", arguments={}),
    ListToolsAction(),
    CallToolAction(tool_name="delete_element", arguments={"id": "e2"}),
    CallToolAction(tool_name="submit", arguments={}),
    CallToolAction(tool_name="submit", arguments={}),
]


def emit(out, *parts: object) -> None:
    out.write(" ".join(map(str, parts)) + "\n")


def digest(data: bytes | str) -> str:
    return hashlib.sha256(data if isinstance(data, bytes) else data.encode()).hexdigest()[:16]


def submissions(rng: random.Random, target: Doc, other: Doc) -> Iterator[tuple[str, Doc]]:
    def changed(**kw: object) -> Doc:
        doc = target.copy()
        for key, value in kw.items():
            setattr(doc, key, value)
        return doc

    yield "target", target.copy()
    yield "empty", Doc(target.width, target.height)
    yield "background", changed(background="#1e1e2e")
    jittered = changed()
    for e in jittered.elements:
        e.x, e.y = e.x + rng.uniform(-8, 8), e.y + rng.uniform(-8, 8)
    yield "jittered", jittered
    recoloured = changed()
    for e in recoloured.elements:
        e.fill = rng.choice(PALETTE) if e.fill else None
    yield "recoloured", recoloured
    restacked = changed()
    rng.shuffle(restacked.elements)
    yield "restacked", restacked
    yield "halved", changed(elements=[replace(e) for e in target.elements[: len(target.elements) // 2]])
    retexted = changed()
    for e in retexted.elements:
        if e.kind == "text":
            e.text, e.font_size = rng.choice(WORDS) + "\nx", rng.choice((9, 13.5, 33, 71))
    yield "retexted", retexted
    yield "other", Doc(target.width, target.height, other.background, [replace(e) for e in other.elements])
    fractional = changed()
    for e in fractional.elements:
        e.x, e.y, e.width = e.x + 0.37, e.y + 0.61, e.width * 1.013
    yield "fractional", fractional


def documents(out, n_tasks: int) -> None:
    rng = random.Random(7)
    tasks = [generate_task("test", i) for i in range(n_tasks)]
    tasks += [generate_task("train", i) for i in range(n_tasks // 5)]
    for n, task in enumerate(tasks):
        doc = task.doc
        about = (task.tier, task.difficulty_score, difficulty(doc))
        emit(out, task.task_id, *about, digest(json.dumps(doc.to_dict())))
        emit(out, " reference", digest(jpeg_b64_of(doc)), digest(encode(render_doc(doc), "JPEG")))
        for size in (None, 160, 256, 512, 77):
            emit(out, " render", size, digest(png_of(doc, size)), digest(render_doc(doc, size).tobytes()))
        for e in doc.elements:
            emit(out, " box", element_box(e))
        other = tasks[(7 * n + 3) % len(tasks)].doc
        for name, sub in submissions(rng, doc, other):
            grade = json.dumps(grade_doc(doc, sub), sort_keys=True)
            emit(out, " grade", name, grade, digest(png_of(sub)), digest(png_of(sub, 160)))
            grade = json.dumps(grade_doc(doc.to_dict(), sub.to_dict()), sort_keys=True)
            emit(out, " grade of dicts", name, grade)
    for a in (None, *PALETTE, "#000001", "#fefefe"):
        for b in (None, *PALETTE[:5], "#123456"):
            emit(out, "colour", a, b, repr(colour_similarity(a, b)))


async def episodes(out, n_episodes: int) -> None:
    env = CanvasEnv()
    for i in range(n_episodes):
        for coordinates in ("pixels", "normalized"):
            mode = ("reference", "description")[i % 2]
            episode = f"e{i}{coordinates}"
            obs = await env.reset_async(index=i, mode=mode, coordinates=coordinates, episode_id=episode)
            emit(out, "reset", i, coordinates, digest(obs.model_dump_json()))
            for action in ACTIONS:
                obs = await env.step_async(action)
                emit(out, " step", getattr(action, "tool_name", "(list)"), digest(obs.model_dump_json()))
            async with env.mcp_session() as client:
                listed = json.dumps([t.model_dump() for t in await client.list_tools()])
                emit(out, " listed", digest(listed))
    env.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", help="the file to write")
    parser.add_argument("--tasks", type=int, default=300)
    parser.add_argument("--episodes", type=int, default=40)
    args = parser.parse_args()
    with open(args.out, "w") as out:
        documents(out, args.tasks)
        asyncio.run(episodes(out, args.episodes))


if __name__ == "__main__":
    main()
