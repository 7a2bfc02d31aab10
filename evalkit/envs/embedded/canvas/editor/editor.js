// The canvas editor: a document of rect / ellipse / line / text elements (the canvas env's model, in canvas
// pixels, bottom to top), drawn in an SVG scaled to fit the stage, edited with the mouse, the keyboard and a
// properties panel. The env reads the document back with window.__canvasDocument().
(() => {
  "use strict";
  const CONFIG = JSON.parse(document.getElementById("config").textContent);
  const SVGNS = "http://www.w3.org/2000/svg";
  const KINDS = { rect: "Rectangle", ellipse: "Ellipse", line: "Line", text: "Text" };
  const FIELDS = {
    rect: ["geom", "size", "fill", "stroke", "radius"],
    ellipse: ["geom", "size", "fill", "stroke"],
    line: ["geom", "size", "stroke"],
    text: ["geom", "text", "fill"],
  };
  const DEFAULTS = {
    rect: { fill: "#c8c8c8", stroke: null, stroke_width: 0, radius: 0 },
    ellipse: { fill: "#c8c8c8", stroke: null, stroke_width: 0, radius: 0 },
    line: { fill: null, stroke: "#000000", stroke_width: 2, radius: 0 },
    text: { fill: "#000000", stroke: null, stroke_width: 0, radius: 0, text: "Text", font_size: 24 },
  };
  const TEXT_FONT = '"DejaVu Sans", "Liberation Sans", sans-serif';
  const MAX_HISTORY = 200;

  const doc = { width: CONFIG.width, height: CONFIG.height, background: "#ffffff", elements: [] };
  let selected = null;
  let tool = "select";
  let zoom = 1;
  let drag = null;
  const history = [];
  const future = [];

  const $ = (sel) => document.querySelector(sel);
  const svg = $("#canvas");
  const shapes = $("#shapes");
  const overlay = $("#overlay");
  const paper = $("#paper");
  const inputs = {};
  document.querySelectorAll("[data-field]").forEach((el) => { inputs[el.dataset.field] = el; });

  // ------------------------------------------------------------------ values

  const probe = document.createElement("canvas").getContext("2d");
  function colour(value, allowNone) {
    const v = String(value).trim();
    if (allowNone && (v === "" || v.toLowerCase() === "none")) return null;
    if (!v) throw new Error("give a colour such as #1f77b4");
    probe.fillStyle = "#010203";
    probe.fillStyle = v;
    const first = probe.fillStyle;
    probe.fillStyle = "#030201";
    probe.fillStyle = v;
    if (first !== probe.fillStyle || !first.startsWith("#")) {
      throw new Error(`'${v}' is not an opaque colour: use #rrggbb, #rgb or a colour name`);
    }
    return first;
  }
  function number(value, name, lo, hi) {
    const v = Number(String(value).trim());
    if (String(value).trim() === "" || !Number.isFinite(v)) throw new Error(`${name} must be a number`);
    if ((lo !== undefined && v < lo) || (hi !== undefined && v > hi)) {
      throw new Error(`${name} must be between ${lo} and ${hi}`);
    }
    return Math.round(v * 100) / 100;
  }
  const fmt = (v) => (v === null || v === undefined ? "none" : String(Math.round(v * 100) / 100));

  // ------------------------------------------------------------------ history

  function change(fn) {
    const before = JSON.stringify({ doc, selected });
    try {
      fn();
    } catch (e) {
      message(e.message, true);
      render();
      return false;
    }
    history.push(before);
    if (history.length > MAX_HISTORY) history.shift();
    future.length = 0;
    render();
    return true;
  }
  function restore(from, to) {
    if (!from.length) return message("nothing to " + (from === history ? "undo" : "redo"));
    to.push(JSON.stringify({ doc, selected }));
    const state = JSON.parse(from.pop());
    Object.assign(doc, state.doc);
    selected = state.selected;
    render();
  }

  // ------------------------------------------------------------------ elements

  function nextId() {
    const used = new Set(doc.elements.map((e) => e.id));
    let n = doc.elements.length + 1;
    while (used.has("e" + n)) n += 1;
    return "e" + n;
  }
  const byId = (id) => doc.elements.find((e) => e.id === id) || null;
  const current = () => (selected ? byId(selected) : null);

  function create(kind, x, y, w, h) {
    const el = { id: nextId(), kind, x, y, width: w, height: h, text: "", font_size: 16,
                 ...DEFAULTS[kind] };
    doc.elements.push(el);
    selected = el.id;
    return el;
  }

  function draw(el) {
    let node;
    const sw = el.stroke ? el.stroke_width : 0;
    if (el.kind === "rect" || el.kind === "ellipse") {
      // The canvas draws an outline inside its box; an SVG stroke straddles the path, so inset by half.
      const x = el.x + sw / 2, y = el.y + sw / 2;
      const w = Math.max(0, el.width - sw), h = Math.max(0, el.height - sw);
      if (el.kind === "rect") {
        node = document.createElementNS(SVGNS, "rect");
        const r = Math.max(0, Math.min(el.radius - sw / 2, w / 2, h / 2));
        Object.entries({ x, y, width: w, height: h, rx: r, ry: r }).forEach(([k, v]) => node.setAttribute(k, v));
      } else {
        node = document.createElementNS(SVGNS, "ellipse");
        Object.entries({ cx: x + w / 2, cy: y + h / 2, rx: w / 2, ry: h / 2 })
          .forEach(([k, v]) => node.setAttribute(k, v));
      }
      node.setAttribute("fill", el.fill || "none");
      if (sw > 0) {
        node.setAttribute("stroke", el.stroke);
        node.setAttribute("stroke-width", sw);
      }
    } else if (el.kind === "line") {
      node = document.createElementNS(SVGNS, "g");
      const ends = { x1: el.x, y1: el.y, x2: el.x + el.width, y2: el.y + el.height };
      const seen = document.createElementNS(SVGNS, "line");
      Object.entries(ends).forEach(([k, v]) => seen.setAttribute(k, v));
      seen.setAttribute("stroke", el.stroke || el.fill || "#000000");
      seen.setAttribute("stroke-width", Math.max(1, el.stroke_width));
      // A thin line is hard to hit: a wide transparent twin takes the clicks.
      const hit = seen.cloneNode();
      hit.setAttribute("stroke", "transparent");
      hit.setAttribute("stroke-width", Math.max(10, el.stroke_width + 8) / zoom);
      node.append(seen, hit);
    } else {
      node = document.createElementNS(SVGNS, "text");
      node.setAttribute("x", el.x);
      node.setAttribute("y", el.y);
      node.setAttribute("dominant-baseline", "text-before-edge");
      node.setAttribute("font-size", el.font_size);
      node.setAttribute("font-family", TEXT_FONT);
      node.setAttribute("fill", el.fill || "#000000");
      node.textContent = el.text;
    }
    node.dataset.id = el.id;
    return node;
  }

  function box(el) {
    if (el.kind === "text") {
      const node = shapes.querySelector(`[data-id="${el.id}"]`);
      if (node) {
        const b = node.getBBox();
        return { x: b.x, y: b.y, w: b.width, h: b.height };
      }
    }
    const x0 = Math.min(el.x, el.x + el.width), y0 = Math.min(el.y, el.y + el.height);
    return { x: x0, y: y0, w: Math.abs(el.width), h: Math.abs(el.height) };
  }

  // ------------------------------------------------------------------ rendering

  function fit() {
    const stage = $("#stage").getBoundingClientRect();
    zoom = Math.min(1, (stage.width - 48) / doc.width, (stage.height - 48) / doc.height);
    svg.setAttribute("viewBox", `0 0 ${doc.width} ${doc.height}`);
    svg.setAttribute("width", Math.round(doc.width * zoom));
    svg.setAttribute("height", Math.round(doc.height * zoom));
    $("#status-zoom").textContent = `Zoom ${Math.round(zoom * 100)}%`;
  }

  function render() {
    const backdrop = $("#backdrop");
    Object.entries({ x: 0, y: 0, width: doc.width, height: doc.height, fill: doc.background })
      .forEach(([k, v]) => backdrop.setAttribute(k, v));
    shapes.replaceChildren(...doc.elements.map(draw));
    doc.elements.filter((e) => e.kind === "text").forEach((e) => {
      const b = box(e);
      e.width = Math.round(b.w * 100) / 100;
      e.height = Math.round(b.h * 100) / 100;
    });
    if (selected && !byId(selected)) selected = null;
    drawSelection();
    panel();
    layers();
    document.querySelectorAll("[data-tool]").forEach((b) => b.classList.toggle("active", b.dataset.tool === tool));
    $("#status-tool").textContent = `Tool: ${tool === "select" ? "Select" : KINDS[tool]}`;
  }

  function drawSelection() {
    overlay.replaceChildren();
    const el = current();
    if (!el) return;
    const b = box(el);
    const pad = 3 / zoom;
    const rect = document.createElementNS(SVGNS, "rect");
    Object.entries({ x: b.x - pad, y: b.y - pad, width: b.w + 2 * pad, height: b.h + 2 * pad,
                     "stroke-width": 1.5 / zoom, class: "sel-box" })
      .forEach(([k, v]) => rect.setAttribute(k, v));
    overlay.append(rect);
    if (el.kind === "text") return;
    const hx = el.kind === "line" ? el.x + el.width : b.x + b.w;
    const hy = el.kind === "line" ? el.y + el.height : b.y + b.h;
    const size = 9 / zoom;
    const handle = document.createElementNS(SVGNS, "rect");
    Object.entries({ x: hx - size / 2, y: hy - size / 2, width: size, height: size,
                     "stroke-width": 1.5 / zoom, class: "handle" })
      .forEach(([k, v]) => handle.setAttribute(k, v));
    handle.dataset.handle = el.id;
    overlay.append(handle);
  }

  function panel(all = false) {
    const el = current();
    const show = el ? new Set(FIELDS[el.kind]) : new Set(["canvas"]);
    document.querySelectorAll(".field").forEach((f) => { f.hidden = !show.has(f.dataset.for); });
    $("#props-title").textContent = el ? `${KINDS[el.kind]} ${el.id}` : `Canvas ${doc.width} × ${doc.height}`;
    const values = el ? el : { background: doc.background };
    Object.entries(inputs).forEach(([name, input]) => {
      if (!all && document.activeElement === input) return;
      const v = values[name];
      input.value = name === "text" ? (v || "") : (typeof v === "number" ? fmt(v) : (v || (el ? "none" : "")));
    });
  }

  function layers() {
    const list = $("#layer-list");
    list.replaceChildren(...doc.elements.slice().reverse().map((el) => {
      const li = document.createElement("li");
      const b = document.createElement("button");
      b.type = "button";
      b.dataset.layer = el.id;
      b.classList.toggle("active", el.id === selected);
      const sw = document.createElement("span");
      sw.className = "swatch";
      sw.style.background = (el.kind === "line" ? el.stroke : el.fill) || "transparent";
      const label = el.kind === "text" ? `Text "${el.text.slice(0, 16)}"` : `${KINDS[el.kind]} ${el.id}`;
      b.append(sw, document.createTextNode(label));
      li.append(b);
      return li;
    }));
  }

  let messageTimer = null;
  function message(text, error = false) {
    const m = $("#status-msg");
    m.textContent = text;
    m.classList.toggle("error", error);
    clearTimeout(messageTimer);
    messageTimer = setTimeout(() => { m.textContent = ""; m.classList.remove("error"); }, 6000);
  }

  // ------------------------------------------------------------------ properties

  function apply(name, raw) {
    const el = current();
    if (!el) {
      if (name === "background") change(() => { doc.background = colour(raw, false); });
      panel(true);
      return;
    }
    change(() => {
      const label = inputs[name].previousElementSibling.textContent;
      if (name === "fill") el.fill = colour(raw, false);
      else if (name === "stroke") {
        el.stroke = colour(raw, true);
        if (el.stroke && !el.stroke_width) el.stroke_width = 2;
      } else if (name === "text") {
        if (!String(raw).trim()) throw new Error("Text cannot be empty");
        el.text = String(raw);
      } else if (name === "stroke_width") el.stroke_width = number(raw, label, 0, 200);
      else if (name === "radius") el.radius = number(raw, label, 0, 10000);
      else if (name === "font_size") el.font_size = number(raw, label, 1, 400);
      else if ((name === "width" || name === "height") && el.kind !== "line") el[name] = number(raw, label, 0, 100000);
      else el[name] = number(raw, label, -100000, 100000);
    });
    panel(true);
  }

  Object.entries(inputs).forEach(([name, input]) => {
    input.addEventListener("focus", () => input.select());
    input.addEventListener("change", () => apply(name, input.value));
    input.addEventListener("keydown", (e) => {
      if (e.key === "Enter") {
        e.preventDefault();
        apply(name, input.value);
        paper.focus();
      } else if (e.key === "Escape") {
        e.preventDefault();
        panel(true);
        paper.focus();
      }
    });
  });

  // ------------------------------------------------------------------ arranging

  function arrange(how) {
    const el = current();
    if (!el) return message("select an element first");
    change(() => {
      const els = doc.elements;
      const i = els.indexOf(el);
      els.splice(i, 1);
      const to = { front: els.length, back: 0, forward: Math.min(i + 1, els.length), backward: Math.max(i - 1, 0) }[how];
      els.splice(to, 0, el);
    });
  }
  function remove() {
    const el = current();
    if (!el) return message("select an element first");
    change(() => {
      doc.elements.splice(doc.elements.indexOf(el), 1);
      selected = null;
    });
  }
  function setTool(name) {
    tool = name;
    if (name !== "select") selected = null;
    render();
  }
  const ACTIONS = {
    front: () => arrange("front"), forward: () => arrange("forward"), backward: () => arrange("backward"),
    back: () => arrange("back"), delete: remove, undo: () => restore(history, future),
    redo: () => restore(future, history),
  };
  document.querySelectorAll("[data-tool]").forEach((b) => b.addEventListener("click", () => setTool(b.dataset.tool)));
  document.querySelectorAll("[data-action]").forEach((b) => b.addEventListener("click", () => ACTIONS[b.dataset.action]()));
  $("#layer-list").addEventListener("click", (e) => {
    const b = e.target.closest("[data-layer]");
    if (b) { selected = b.dataset.layer; tool = "select"; render(); }
  });

  // ------------------------------------------------------------------ pointer

  function point(e) {
    const r = svg.getBoundingClientRect();
    return { x: Math.round((e.clientX - r.left) / zoom), y: Math.round((e.clientY - r.top) / zoom) };
  }
  function targetId(e) {
    const hit = e.target.closest && e.target.closest("[data-id]");
    return hit ? hit.dataset.id : null;
  }

  svg.addEventListener("mousedown", (e) => {
    if (e.button !== 0) return;
    e.preventDefault();
    paper.focus();
    const p = point(e);
    if (tool === "text") {
      change(() => create("text", p.x, p.y, 0, 0));
      tool = "select";
      render();
      return;
    }
    if (tool !== "select") {
      drag = { mode: "draw", start: p, end: p };
      return;
    }
    const handle = e.target.dataset && e.target.dataset.handle;
    if (handle) {
      drag = { mode: "resize", start: p, before: JSON.stringify({ doc, selected }), el: byId(handle),
               orig: { ...byId(handle) } };
      return;
    }
    const id = targetId(e);
    selected = id;
    render();
    if (id) drag = { mode: "move", start: p, before: JSON.stringify({ doc, selected }), el: byId(id),
                     orig: { ...byId(id) } };
  });

  window.addEventListener("mousemove", (e) => {
    if (!drag) return;
    const p = point(e);
    if (drag.mode === "draw") {
      drag.end = p;
      preview();
    } else if (drag.mode === "move") {
      drag.el.x = drag.orig.x + p.x - drag.start.x;
      drag.el.y = drag.orig.y + p.y - drag.start.y;
      render();
    } else if (drag.mode === "resize") {
      const dx = p.x - drag.start.x, dy = p.y - drag.start.y;
      drag.el.width = drag.el.kind === "line" ? drag.orig.width + dx : Math.max(1, drag.orig.width + dx);
      drag.el.height = drag.el.kind === "line" ? drag.orig.height + dy : Math.max(1, drag.orig.height + dy);
      render();
    }
  });

  window.addEventListener("mouseup", (e) => {
    if (!drag) return;
    const d = drag;
    drag = null;
    if (d.mode === "draw") {
      overlay.replaceChildren();
      const p = point(e);
      const { x: x0, y: y0 } = d.start;
      let w = p.x - x0, h = p.y - y0;
      const tiny = Math.abs(w) < 3 && Math.abs(h) < 3;
      change(() => {
        if (tool === "line") create("line", x0, y0, tiny ? 100 : w, tiny ? 0 : h);
        else if (tiny) create(tool, x0, y0, 100, 80);
        else create(tool, Math.min(x0, p.x), Math.min(y0, p.y), Math.abs(w), Math.abs(h));
      });
      tool = "select";
      render();
    } else if (d.el.x !== d.orig.x || d.el.y !== d.orig.y || d.el.width !== d.orig.width
               || d.el.height !== d.orig.height) {
      history.push(d.before);
      future.length = 0;
      render();
    }
  });

  function preview() {
    overlay.replaceChildren();
    const { start: a, end: b } = drag;
    const el = tool === "line"
      ? { id: "preview", kind: "line", x: a.x, y: a.y, width: b.x - a.x, height: b.y - a.y, ...DEFAULTS.line }
      : { id: "preview", kind: tool, x: Math.min(a.x, b.x), y: Math.min(a.y, b.y), width: Math.abs(b.x - a.x),
          height: Math.abs(b.y - a.y), ...DEFAULTS[tool] };
    const node = draw(el);
    node.setAttribute("opacity", "0.6");
    overlay.append(node);
  }

  svg.addEventListener("dblclick", (e) => {
    const el = byId(targetId(e));
    if (el && el.kind === "text") {
      selected = el.id;
      render();
      inputs.text.focus();
    }
  });

  // ------------------------------------------------------------------ keyboard

  const TOOL_KEYS = { v: "select", r: "rect", e: "ellipse", o: "ellipse", l: "line", t: "text" };
  document.addEventListener("keydown", (e) => {
    if (e.target.matches && e.target.matches("input, textarea")) return;
    const ctrl = e.ctrlKey || e.metaKey;
    const key = e.key.toLowerCase();
    let handled = true;
    if (ctrl && key === "z" && !e.shiftKey) ACTIONS.undo();
    else if (ctrl && (key === "y" || (key === "z" && e.shiftKey))) ACTIONS.redo();
    else if (ctrl && e.code === "BracketRight") arrange(e.shiftKey ? "front" : "forward");
    else if (ctrl && e.code === "BracketLeft") arrange(e.shiftKey ? "back" : "backward");
    else if (!ctrl && !e.altKey && TOOL_KEYS[key]) setTool(TOOL_KEYS[key]);
    else if (e.key === "Delete" || e.key === "Backspace") remove();
    else if (e.key === "Escape") { selected = null; tool = "select"; render(); }
    else if (e.key.startsWith("Arrow") && current()) {
      const step = e.shiftKey ? 10 : 1;
      const el = current();
      const dx = { ArrowLeft: -step, ArrowRight: step }[e.key] || 0;
      const dy = { ArrowUp: -step, ArrowDown: step }[e.key] || 0;
      change(() => { el.x += dx; el.y += dy; });
    } else handled = false;
    if (handled) e.preventDefault();
  });

  // ------------------------------------------------------------------ start

  window.__canvasDocument = () => JSON.parse(JSON.stringify(doc));
  window.addEventListener("resize", () => { fit(); render(); });
  fit();
  render();
  paper.focus();
})();
