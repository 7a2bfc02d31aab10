"""The tracer on the canvas env's `html` surface: the shapes it found, written as one HTML page.

Each element becomes what the surface's instructions say reads back as it: an absolutely positioned
border-box `<div>` for a rect (rounded to 50% for an ellipse; a border for its outline), an SVG `<line>` in
a canvas-sized `<svg>` for a line, and a one-line `<div>` with `line-height: 1` for text, all in document
order so the page stacks them bottom to top.
"""

from __future__ import annotations

import html as htmlmod

from . import CanvasInfo, Plan, canvas_info


def _px(v: float) -> str:
    v = round(float(v), 2)
    return f"{int(v) if v == int(v) else v}px"


def element_html(el: dict, width: int, height: int) -> str:
    """One element (add_element arguments, in canvas pixels) as HTML."""
    kind = el["kind"]
    if kind == "line":
        x1, y1 = el["x"], el["y"]
        x2, y2 = x1 + el["width"], y1 + el["height"]
        stroke = el.get("stroke") or el.get("fill") or "#000000"
        return (
            f'<svg width="{width}" height="{height}" style="position:absolute;left:0;top:0;overflow:visible">'
            f'<line x1="{x1}" y1="{y1}" x2="{x2}" y2="{y2}" stroke="{stroke}" '
            f'stroke-width="{el.get("stroke_width") or 2}"/></svg>'
        )
    if kind == "text":
        style = (
            f"position:absolute;left:{_px(el['x'])};top:{_px(el['y'])};"
            f"font-size:{_px(el.get('font_size', 16))};line-height:1;white-space:pre;margin:0;"
            f"color:{el.get('fill') or '#000000'}"
        )
        return f'<div style="{style}">{htmlmod.escape(el.get("text") or "")}</div>'
    style = [
        f"position:absolute;left:{_px(el['x'])};top:{_px(el['y'])}",
        f"width:{_px(el['width'])};height:{_px(el['height'])};box-sizing:border-box",
        f"background:{el.get('fill') or 'transparent'}",
    ]
    if el.get("stroke") and el.get("stroke_width"):
        style.append(f"border:{_px(el['stroke_width'])} solid {el['stroke']}")
    if kind == "ellipse":
        style.append("border-radius:50%")
    elif el.get("radius"):
        style.append(f"border-radius:{_px(el['radius'])}")
    return f'<div style="{";".join(style)}"></div>'


def page(background: str | None, elements: list[dict], width: int, height: int) -> str:
    """A whole document drawing `elements` bottom to top on `background`."""
    body = "\n".join(element_html(el, width, height) for el in elements)
    bg = background or "#ffffff"
    return (
        f'<!doctype html>\n<html><head><meta charset="utf-8"><style>body{{background:{bg}}}</style></head>\n'
        f"<body>\n{body}\n</body></html>"
    )


def play(agent) -> Plan:
    """Write the page, look at it once, submit."""
    info = canvas_info(agent.system)
    canvas = CanvasInfo(info.width, info.height, normalized=False)
    bg, elements = agent.design(canvas, agent.images[0] if agent.images else None)
    yield (
        f"writing the {len(elements)} elements as HTML",
        [("set_html", {"html": page(bg, elements, canvas.width, canvas.height)})],
    )
    if "view_canvas" in agent.tool_names:
        yield "looking at the page", [("view_canvas", {})]
    if "submit" in agent.tool_names:
        yield "submitting", [("submit", {})]
