"""`baseline:tracer`: rebuild the target from the reference image (or the written brief), check, correct,
submit.

Reference mode: `vision.segment` turns the target into shapes; they are added bottom to top in batches,
then the tracer looks at `view_canvas`, measures for each element where its colour shows in the render and in
the target, and moves / resizes the elements whose extents disagree (this absorbs any convention it got wrong:
stroke placement, text baseline, line caps). Two such rounds, then `submit`.

The same shapes go through the other surfaces of the canvas env as a model would send them: as an HTML page
(`html_policy`) or by operating the editor with the mouse and keyboard (`gui_policy`).
"""

from __future__ import annotations

import json
import re
from functools import lru_cache

import numpy as np
from PIL import ImageFont

from . import CanvasInfo, Plan, ScriptedAgent, canvas_info, gui_policy, html_policy
from .brief import parse_brief
from .vision import Shape, segment

BATCH = 8
PLACEHOLDER = "Text"


@lru_cache(maxsize=128)
def _font(size: int):
    return ImageFont.load_default(size=max(1, size))


def text_fit(text: str, box: tuple[float, float, float, float]) -> tuple[float, float, int]:
    """(x, y, font size) that puts `text`'s glyphs in `box` with the renderer's default font."""
    x0, y0, x1, y1 = box
    h = max(1.0, y1 - y0)
    best = None
    for size in range(4, 260):
        left, top, right, bottom = _font(size).getbbox(text)
        err = abs((bottom - top) - h) + 0.25 * abs((right - left) - (x1 - x0))
        if best is None or err < best[0]:
            best = (err, size, left, top)
        if bottom - top > 2 * h + 4:
            break
    _, size, left, top = best
    return x0 - left, y0 - top, size


def _placeholder(shape: Shape) -> str:
    """Words of unknown content: as many letters as glyphs were found, so the width comes out about right."""
    n = max(1, shape.glyphs or 4)
    base = "Text sample words here"
    return base[:n].strip() or PLACEHOLDER


def shape_args(s: Shape, scale: tuple[float, float], canvas: CanvasInfo) -> dict:
    """add_element arguments for a shape found in an image that is `scale` times the canvas size."""
    sx, sy = scale
    if s.kind == "line":
        x, y = canvas.to_tool(s.x0 * sx, s.y0 * sy)
        w, h = canvas.to_tool((s.x1 - s.x0) * sx, (s.y1 - s.y0) * sy)
        return {
            "kind": "line",
            "x": _r(x),
            "y": _r(y),
            "width": _r(w),
            "height": _r(h),
            "stroke": s.stroke,
            "stroke_width": max(1, round(s.stroke_width * sx)),
        }
    if s.kind == "text":
        text = s.text or _placeholder(s)
        bx = (s.x0 * sx, s.y0 * sy, s.x1 * sx, s.y1 * sy)
        px, py, size = text_fit(text, bx)
        x, y = canvas.to_tool(px, py)
        w, h = canvas.to_tool(bx[2] - bx[0], bx[3] - bx[1])
        return {
            "kind": "text",
            "x": _r(x),
            "y": _r(y),
            "width": _r(w),
            "height": _r(h),
            "fill": s.fill,
            "text": text,
            "font_size": size,
        }
    # PIL boxes include their far edge, so a shape covering n pixels is n - 1 wide.
    x, y = canvas.to_tool(s.x0 * sx, s.y0 * sy)
    w, h = canvas.to_tool(max(1.0, (s.x1 - s.x0) * sx - 1), max(1.0, (s.y1 - s.y0) * sy - 1))
    args = {"kind": s.kind, "x": _r(x), "y": _r(y), "width": _r(w), "height": _r(h), "fill": s.fill}
    if s.stroke:
        args.update(stroke=s.stroke, stroke_width=max(1, round(s.stroke_width * sx)))
    if s.kind == "rect" and s.radius:
        args["radius"] = round(s.radius * sx)
    return args


def _r(v: float) -> float:
    return round(float(v), 1)


def _rgb(image) -> np.ndarray:
    return np.asarray(image.to_pil().convert("RGB"))


def _extent(
    img: np.ndarray, colour: str, window: tuple[int, int, int, int]
) -> tuple[int, int, int, int] | None:
    """Box of the pixels close to `colour` inside `window` (x0, y0, x1, y1), or None."""
    x0, y0, x1, y1 = window
    rgb = np.array([int(colour[i : i + 2], 16) for i in (1, 3, 5)], np.int16)
    near = np.abs(img[y0:y1, x0:x1].astype(np.int16) - rgb).max(-1) < 40
    ys, xs = np.nonzero(near)
    if len(xs) < 3:
        return None
    return x0 + int(xs.min()), y0 + int(ys.min()), x0 + int(xs.max()) + 1, y0 + int(ys.max()) + 1


class TracerAgent(ScriptedAgent):
    name = "tracer"

    def policy(self) -> Plan:
        if "add_element" in self.tool_names:
            yield from self._tools()
        elif "set_html" in self.tool_names:
            yield from html_policy.play(self)
        elif gui_policy.usable(self.tool_names, self.system):
            yield from gui_policy.play(self)
        elif "submit" in self.tool_names:
            # Not a canvas: nothing to trace. Finish cleanly rather than call tools that do not exist.
            yield "no canvas tools here; submitting", [("submit", {})]

    def design(self, canvas: CanvasInfo, target=None) -> tuple[str | None, list[dict]]:
        """The target as (background, add_element arguments bottom to top in `canvas`'s space): read from
        the written brief when the instructions carry one, else segmented from `target` (an Image)."""
        if "Target design" in self.system or target is None:
            return parse_brief(self.system, canvas)
        pixels = _rgb(target)
        H, W = pixels.shape[:2]
        bg, shapes = segment(pixels)
        return bg, [shape_args(s, (canvas.width / W, canvas.height / H), canvas) for s in shapes]

    def _tools(self) -> Plan:
        canvas = canvas_info(self.system)
        if not self.images:
            yield from self._from_brief(canvas)
            return
        budget = _step_budget(self.system) - 1  # keep one call for submit
        target = _rgb(self.images[0])
        H, W = target.shape[:2]
        scale = (canvas.width / W, canvas.height / H)
        bg, shapes = segment(target)
        added: list[tuple[Shape, dict, str | None]] = []
        batches = [shapes[i : i + BATCH] for i in range(0, len(shapes), BATCH)] or [[]]
        for n, batch in enumerate(batches):
            calls = [("set_background", {"color": bg})] if n == 0 else []
            args = [shape_args(s, scale, canvas) for s in batch]
            calls += [("add_element", a) for a in args]
            calls = calls[: max(0, budget)]
            if not calls:
                break
            budget -= len(calls)
            done = len(added) + len(batch)
            pairs = yield f"adding {len(batch)} shapes ({done}/{len(shapes)} found in the reference)", calls
            outcomes = [o for c, o in pairs or [] if c.name == "add_element"]
            for s, a, o in zip(batch, args, outcomes, strict=False):
                added.append((s, a, None if o.is_error else _id_of(o.text)))
        if "view_canvas" in self.tool_names:
            for round_ in range(2):
                if budget < 3:
                    break
                budget -= 1
                pairs = yield (
                    f"checking the render against the reference (round {round_ + 1})",
                    [("view_canvas", {})],
                )
                render = next((o.images[0] for _, o in pairs or [] if o.images), None)
                if render is None:
                    break
                raised = self._buried(target, render, added)
                fixes = self._corrections(target, render, added, scale, canvas)
                fixed = {call[1]["id"] for call in fixes}
                for i in raised:
                    s, args, eid = added[i]
                    fixes = [f for f in fixes if f[1].get("id") != eid]
                    fixes += [("delete_element", {"id": eid}), ("add_element", args)]
                fixes = fixes[: max(0, budget - 1)]  # and one for a last look
                budget -= len(fixes)
                if not fixes:
                    break
                what = f"correcting {len(fixed - {added[i][2] for i in raised})} elements"
                if raised:
                    what += f", re-adding {len(raised)} on top where the reference shows them above others"
                pairs = yield what, fixes
                new_ids = [
                    _id_of(o.text) for c, o in pairs or [] if c.name == "add_element" and not o.is_error
                ]
                for i, eid in zip(raised, new_ids, strict=False):
                    added[i] = (added[i][0], added[i][1], eid)
        if "submit" in self.tool_names:
            yield "submitting", [("submit", {})]

    def _buried(self, target: np.ndarray, render_img, added, limit: int = 3) -> list[int]:
        """Elements the reference shows but the render hides under something else: stacked too low. Deleting
        and re-adding one puts it on top, the only reordering the tools allow."""
        render = _same_size(render_img, target)
        out = []
        for i, (s, args, eid) in enumerate(added):
            colour = args.get("stroke") if s.kind == "line" else args.get("fill")
            if not eid or not colour or s.mask is None or s.mask.sum() < 30:
                continue
            rgb = np.array([int(colour[k : k + 2], 16) for k in (1, 3, 5)], np.int16)
            shown = float((np.abs(render[s.mask].astype(np.int16) - rgb).max(-1) < 40).mean())
            if shown < 0.5:
                out.append((shown, i))
        return [i for _, i in sorted(out)[:limit]]

    def _corrections(self, target: np.ndarray, render_img, added, scale, canvas: CanvasInfo) -> list:
        """update_element calls moving each element whose colour extent in the render differs from the
        target's."""
        H, W = target.shape[:2]
        render = _same_size(render_img, target)
        diff = np.abs(render.astype(np.int16) - target.astype(np.int16)).max(-1)
        scored = []
        for i, (s, _args, eid) in enumerate(added):
            if not eid or s.mask is None or not s.mask.any():
                continue
            scored.append((float(diff[s.mask].mean()), i))
        fixes = []
        for err, i in sorted(scored, reverse=True):
            if err < 12:
                break
            s, args, eid = added[i]
            colour = args.get("stroke") if s.kind == "line" else args.get("fill")
            if not colour:
                continue
            x0, y0, x1, y1 = s.box
            pad = max(6, int(0.25 * max(x1 - x0, y1 - y0)))
            win = (max(0, int(x0) - pad), max(0, int(y0) - pad), min(W, int(x1) + pad), min(H, int(y1) + pad))
            t, r = _extent(target, colour, win), _extent(render, colour, win)
            if not t or not r:
                continue
            d = [t[k] - r[k] for k in range(4)]
            size = max(x1 - x0, y1 - y0)
            if max(map(abs, d)) < 1 or max(map(abs, d)) > max(4, 0.2 * size):
                continue
            new = dict(args)
            sx, sy = scale
            if s.kind == "text":
                ratio = (t[3] - t[1]) / max(1, r[3] - r[1])
                new["font_size"] = max(1, round(args["font_size"] * ratio))
                dx, dy = canvas.to_tool(d[0] * sx, d[1] * sy)
                new["x"], new["y"] = _r(args["x"] + dx), _r(args["y"] + dy)
            elif s.kind == "line":
                dx, dy = canvas.to_tool((d[0] + d[2]) / 2 * sx, (d[1] + d[3]) / 2 * sy)
                new["x"], new["y"] = _r(args["x"] + dx), _r(args["y"] + dy)
            else:
                dx0, dy0 = canvas.to_tool(d[0] * sx, d[1] * sy)
                dx1, dy1 = canvas.to_tool(d[2] * sx, d[3] * sy)
                new["x"], new["y"] = _r(args["x"] + dx0), _r(args["y"] + dy0)
                new["width"] = _r(max(1, args["width"] + dx1 - dx0))
                new["height"] = _r(max(1, args["height"] + dy1 - dy0))
            if new == args:
                continue
            added[i] = (s, new, eid)
            changes = {k: v for k, v in new.items() if k != "kind" and v != args.get(k)}
            fixes.append(("update_element", {"id": eid, **changes}))
        return fixes

    def _from_brief(self, canvas: CanvasInfo) -> Plan:
        bg, elements = parse_brief(self.system, canvas)
        calls = [("set_background", {"color": bg})] if bg else []
        calls += [("add_element", e) for e in elements]
        for n in range(0, len(calls), BATCH):
            batch = calls[n : n + BATCH]
            yield f"building {len(batch)} elements from the brief", batch
        if "submit" in self.tool_names:
            yield "submitting", [("submit", {})]


def _step_budget(system: str, default: int = 60) -> int:
    """The tool-call limit the instructions state ("at most N tool calls")."""
    m = re.search(r"at most (\d+) tool calls", system or "")
    return int(m.group(1)) if m else default


def _same_size(image, target: np.ndarray) -> np.ndarray:
    pil = image.to_pil().convert("RGB")
    H, W = target.shape[:2]
    return np.asarray(pil if pil.size == (W, H) else pil.resize((W, H)))


def _id_of(text: str) -> str | None:
    try:
        data = json.loads(text)
    except (TypeError, ValueError):
        return None
    return data.get("id") if isinstance(data, dict) else None
