"""The canvas env over the real wire: uvicorn on a loopback port, OpenEnv's MCPToolClient over WebSocket."""

import base64
import io
import json
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest
from openenv.core.env_server.mcp_types import CallToolAction
from openenv.core.mcp_client import MCPToolClient
from PIL import Image

from evalkit.envs.embedded.canvas import task_from_id
from evalkit.envs.embedded.server import serve

TOOLS = {
    "get_document",
    "add_element",
    "update_element",
    "delete_element",
    "set_background",
    "view_canvas",
    "submit",
}


@pytest.fixture(scope="module")
def base_url():
    with serve("canvas", max_concurrent_envs=16) as server:
        yield server.base_url


@pytest.fixture
def client(base_url):
    with MCPToolClient(base_url, message_timeout_s=30).sync() as c:
        yield c


def call(c, name, **args):
    return c.step(CallToolAction(tool_name=name, arguments=args))


def text(result) -> str:
    assert result.observation.error is None, result.observation.error
    return result.observation.result["content"][0]["text"]


def get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def test_reset_metadata_in_reference_mode(client):
    meta = client.reset(task_id="canvas-test-0007").observation.metadata
    for key in ("task_id", "episode_id", "instructions", "surface", "mode", "tier", "difficulty_score",
                "prompt_version", "coordinates", "canvas", "max_steps"):  # fmt: skip
        assert key in meta, key
    assert meta["task_id"] == "canvas-test-0007" and meta["max_steps"] == 60
    assert meta["canvas"] == {"width": 800, "height": 600} and "800 x 600" in meta["instructions"]
    img = Image.open(io.BytesIO(base64.b64decode(meta["reference_jpeg_b64"])))
    assert img.format == "JPEG" and img.size == (800, 600)
    assert {t.name for t in client.list_tools()} == TOOLS


def test_the_opening_text_is_the_envs_own_per_surface_and_mode(client):
    from evalkit.envs.embedded.canvas.prompts import opening

    meta = client.reset(task_id="canvas-test-0007").observation.metadata
    assert meta["prompt"] == "The target is attached. Recreate it with your tools, then call submit."
    meta = client.reset(task_id="canvas-test-0007", mode="description").observation.metadata
    assert meta["prompt"] == opening("tools", "description") == opening("html", "description")
    # on gui the loop's screenshot of the editor follows the target: the text says which image is which
    assert opening("gui", "reference").startswith("The first image is the target; the second shows the")
    assert "in the editor" in opening("gui", "description") and "image" not in opening("gui", "description")


def test_description_mode_brief_lists_every_element(client):
    meta = client.reset(task_id="canvas-test-0001", mode="description").observation.metadata
    doc = task_from_id("canvas-test-0001").doc
    assert "reference_jpeg_b64" not in meta
    brief = meta["instructions"]
    assert doc.background in brief
    for i, el in enumerate(doc.elements, 1):
        assert f"\n{i}. {el.kind}" in brief
        assert (el.text if el.kind == "text" else f"x={int(el.x)}") in brief


@pytest.mark.parametrize(
    "kwargs",
    [
        {"task_id": "canvas-test-99x"},
        {"surface": "paint"},
        {"mode": "psychic"},
        {"coordinates": "polar"},
        {"surface": "gui", "skin": "neon"},
    ],
)
def test_bad_reset_arguments_reach_the_client_as_errors(client, kwargs):
    with pytest.raises(RuntimeError, match="Server error"):
        client.reset(**kwargs)
    assert client.reset(task_id="canvas-test-0002").observation.metadata["task_id"] == "canvas-test-0002"


def test_editing_tools_and_errors(client):
    client.reset(task_id="canvas-test-0003")
    assert json.loads(
        text(call(client, "add_element", kind="rect", x=10, y=20, width=30, height=40, fill="red"))
    )
    new = json.loads(text(call(client, "add_element", kind="text", x=5, y=5, width=0, height=0, text="Hi")))
    assert new == {"id": "e2"}
    updated = json.loads(text(call(client, "update_element", id="e1", x=15, stroke="#00f", stroke_width=3)))
    assert (updated["x"], updated["stroke"], updated["fill"]) == (15, "#0000ff", "#ff0000")
    text(call(client, "set_background", color="navy"))
    text(call(client, "delete_element", id="e2"))
    doc = json.loads(text(call(client, "get_document")))
    assert doc["background"] == "#000080" and [e["id"] for e in doc["elements"]] == ["e1"]
    image = call(client, "view_canvas").observation.result["content"][0]
    assert image["type"] == "image" and (image.get("mimeType") or image.get("mime_type")) == "image/png"
    assert Image.open(io.BytesIO(base64.b64decode(image["data"]))).size == (doc["width"], doc["height"])
    bad = {
        "kind": dict(kind="star", x=0, y=0, width=1, height=1),
        "not a colour": dict(kind="rect", x=0, y=0, width=1, height=1, fill="blurple"),
        "only lines": dict(kind="rect", x=0, y=0, width=-5, height=1),
        "valid number": dict(kind="rect", x="abc", y=0, width=1, height=1),
    }
    for needle, args in bad.items():
        r = call(client, "add_element", **args)
        assert r.observation.error is not None and needle in r.observation.error.message
        assert not r.done
    for name, args in (("update_element", {"id": "e9", "x": 1}), ("delete_element", {"id": "e9"})):
        assert "no element with id 'e9'" in call(client, name, **args).observation.error.message
    assert len(json.loads(text(call(client, "get_document")))["elements"]) == 1


def test_submit_ends_the_episode_with_the_grade(client, base_url):
    meta = client.reset(task_id="canvas-test-0004").observation.metadata
    call(client, "add_element", kind="rect", x=0, y=0, width=100, height=100, fill="#123456")
    r = call(client, "submit")
    grade = json.loads(text(r))
    assert r.done and r.reward == grade["total"]
    assert r.metadata["grade"] == grade and r.metadata["auto_submitted"] is False
    after = call(client, "get_document")
    assert after.observation.error.message == "episode is over" and after.done
    status, body = get(f"{base_url}/api/episodes/{meta['episode_id']}")
    assert status == 200 and json.loads(body)["grade"] == grade


def test_max_steps_auto_submits(client):
    client.reset(task_id="canvas-test-0005", max_steps=3)
    assert not call(client, "get_document").done
    assert not call(client, "set_background", color="bogus").done
    r = call(client, "get_document")
    assert r.done and r.metadata["auto_submitted"] is True and r.reward == r.metadata["grade"]["total"]


def test_rebuilding_the_target_over_the_wire_scores_full(client):
    task = task_from_id("canvas-test-0002")
    client.reset(task_id=task.task_id, max_steps=100)
    text(call(client, "set_background", color=task.doc.background))
    for el in task.doc.elements:
        fields = {k: v for k, v in el.to_dict().items() if k != "id" and v is not None}
        text(call(client, "add_element", **fields))
    r = call(client, "submit")
    assert r.done and r.reward >= 0.99


def test_normalized_coordinates(client, base_url):
    meta = client.reset(task_id="canvas-test-0007", coordinates="normalized").observation.metadata
    assert meta["coordinates"] == "normalized" and "0 to 1000" in meta["instructions"]
    call(client, "add_element", kind="rect", x=500, y=500, width=250, height=100)
    doc = json.loads(text(call(client, "get_document")))
    assert doc["elements"][0]["x"] == 500 and doc["elements"][0]["width"] == 250
    _, body = get(f"{base_url}/api/episodes/{meta['episode_id']}")
    pixels = json.loads(body)["elements"][0]  # the HTTP view is always in pixels; the canvas is 800 x 600
    assert (pixels["x"], pixels["y"], pixels["width"], pixels["height"]) == (400, 300, 200, 60)


def test_http_routes(client, base_url):
    meta = client.reset(task_id="canvas-test-0009").observation.metadata
    call(client, "add_element", kind="ellipse", x=10, y=10, width=50, height=50, fill="teal")
    eid, (w, h) = meta["episode_id"], (meta["canvas"]["width"], meta["canvas"]["height"])
    status, body = get(f"{base_url}/api/episodes/{eid}")
    assert status == 200 and json.loads(body)["elements"][0]["kind"] == "ellipse"
    status, body = get(f"{base_url}/api/episodes/{eid}/render.png?size=300")
    img = Image.open(io.BytesIO(body))
    assert status == 200 and img.format == "PNG" and max(img.size) == 300
    status, body = get(f"{base_url}/api/episodes/{eid}/render.png")
    assert Image.open(io.BytesIO(body)).size == (w, h)
    status, body = get(f"{base_url}/api/episodes/{eid}/reference.jpg?size=200")
    assert status == 200 and Image.open(io.BytesIO(body)).format == "JPEG"
    status, body = get(f"{base_url}/api/tasks/canvas-test-0009/target.png?size=128")
    assert status == 200 and max(Image.open(io.BytesIO(body)).size) == 128
    for path in ("/api/episodes/nope", "/api/episodes/nope/render.png", "/api/tasks/bogus/target.png"):
        assert get(base_url + path)[0] == 404
    assert get(base_url + "/health")[0] == 200


def test_concurrent_sessions_do_not_interfere(base_url):
    def session(i: int) -> tuple[str, list[str], float]:
        with MCPToolClient(base_url, message_timeout_s=30).sync() as c:
            task_id = f"canvas-test-{i:04d}"
            meta = c.reset(task_id=task_id).observation.metadata
            for k in range(i + 1):
                call(c, "add_element", kind="rect", x=k, y=k, width=10, height=10, fill="#000")
            ids = [e["id"] for e in json.loads(text(call(c, "get_document")))["elements"]]
            r = call(c, "submit")
            assert r.metadata["task_id"] == meta["task_id"] == task_id
            return task_id, ids, r.metadata["grade"]["n_submitted"]

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(session, range(4)))
    for i, (_, ids, n) in enumerate(results):
        assert len(ids) == n == i + 1


def request(url: str, method: str = "GET") -> tuple[int, str, bytes]:
    req = urllib.request.Request(url, method=method)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.headers["content-type"], r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers["content-type"], e.read()


def test_plain_picture_routes_come_first_and_answer_as_fastapi_does(client, base_url):
    """The document and frame a loop reads after every step are answered ahead of the app's other routes
    (`app.PlainGet`, without FastAPI's request handling) when asked plainly; with a query, or by another
    method, the FastAPI route of the same path answers and refuses as it did."""
    from evalkit.envs.embedded.canvas.app import PlainGet
    from evalkit.envs.embedded.server import build_app

    first = build_app("canvas").router.routes[:2]
    assert [type(r) for r in first] == [PlainGet, PlainGet]  # the old app matched ~20 routes before these
    meta = client.reset(task_id="canvas-test-0011").observation.metadata
    call(client, "add_element", kind="rect", x=10, y=10, width=80, height=40, fill="#cc3300")
    eid, side = meta["episode_id"], max(meta["canvas"]["width"], meta["canvas"]["height"])
    page = f"{base_url}/api/episodes/{eid}"
    plain, sized = request(f"{page}/render.png"), request(f"{page}/render.png?size={side}")
    assert plain == sized and plain[:2] == (200, "image/png")  # the same picture by both routes
    status, ctype, body = request(page)
    assert (status, ctype) == (200, "application/json")
    assert json.loads(body)["elements"][0]["fill"] == "#cc3300"
    unknown = {"detail": "unknown episode 'nope'"}
    for path in ("/api/episodes/nope", "/api/episodes/nope/render.png"):
        status, ctype, body = request(base_url + path)
        assert (status, ctype, json.loads(body)) == (404, "application/json", unknown)
    assert request(f"{page}/render.png?size=5")[0] == 422  # a query still goes through FastAPI's checks
    assert request(f"{page}/render.png", "HEAD")[0] == request(page, "POST")[0] == 405
