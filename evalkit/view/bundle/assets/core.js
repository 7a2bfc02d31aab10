// The bundle's page: data loading, routing and the DOM helpers the views share.
//
// Data arrives as scripts (a page opened from file:// may load scripts but not fetch files) that call
// EK.index(...) and EK.chunk(n, ...) with gzip-compressed base64 JSON, inflated here with the browser's
// DecompressionStream. A chunk holds pieces of episodes: an episode's head (part -1) and its parts of
// `part_size` steps; the table's row of an episode names the files of its head and of each part, so that a
// step of a long episode loads its head and its part, never the whole. Trace text only ever enters the page
// through text nodes (el() below): never as HTML; the marks over a frame are numbers drawn as SVG.
"use strict";

const EK = (() => {
  const state = { index: null, rows: [], pieces: new Map(), loaded: new Set(), waiting: new Map(), views: {},
    filters: {} };
  const SVG = "http://www.w3.org/2000/svg";  // the namespace of SVG elements: a name, never fetched

  async function inflate(b64) {
    const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    return JSON.parse(await new Response(stream).text());
  }

  function fail(err) {
    const app = document.getElementById("app");
    app.replaceChildren(el("p", { class: "err" }, "This bundle could not be read: " + err));
  }

  function index(b64) {
    inflate(b64).then((data) => {
      state.index = data;
      state.rows = data.rows.map((r, id) => {
        const row = { id };
        data.columns.forEach((c, i) => { row[c] = r[i]; });
        return row;
      });
      document.getElementById("built").textContent =
        state.rows.length.toLocaleString() + " episodes · " + data.runs.join(", ") + " · built " + data.built;
      // A run that lacks planned or scored episodes says so above everything its numbers are in.
      const said = data.incomplete || [];
      const box = document.getElementById("incomplete");
      box.replaceChildren(...said.map((line) => el("div", {}, line)));
      box.hidden = said.length === 0;
      route();
    }).catch(fail);
  }

  function chunk(n, b64) {
    inflate(b64).then((list) => {
      for (const p of list) state.pieces.set(p.id + ":" + p.part, p);
      state.loaded.add(n);
      (state.waiting.get(n) || []).forEach((resolve) => resolve());
      state.waiting.delete(n);
    }).catch(fail);
  }

  // File `n` of data/ep/, its script added to the page the first time it is needed.
  function load(n) {
    if (state.loaded.has(n)) return Promise.resolve();
    return new Promise((resolve) => {
      if (!state.waiting.has(n)) {
        state.waiting.set(n, []);
        const s = document.createElement("script");
        s.src = "data/ep/" + String(n).padStart(4, "0") + ".js";
        document.body.appendChild(s);
      }
      state.waiting.get(n).push(resolve);
    });
  }

  // A piece of episode `id`: its head (part -1) or part k; null when the episode has no such part.
  function piece(id, part) {
    const row = state.rows[id];
    if (!row) return Promise.reject(new Error("no episode " + id));
    const file = part < 0 ? row.chunk : (row.parts || [])[part];
    if (file === undefined) return Promise.resolve(null);
    const have = state.pieces.get(id + ":" + part);
    if (have) return Promise.resolve(have);
    return load(file).then(() => state.pieces.get(id + ":" + part) || null);
  }

  // Synchronously, a piece already loaded (or undefined): stepping within a part waits for nothing.
  function loaded(id, part) {
    return state.pieces.get(id + ":" + part);
  }

  function head(id) {
    return piece(id, -1);
  }

  // Step `pos` of episode `id` (its part loaded first), or null past its end.
  function step(id, pos) {
    return head(id).then((ep) => (ep && pos >= 0 && pos < ep.n_steps
      ? piece(id, Math.floor(pos / ep.part_size)).then((p) => (p ? p.steps[pos % ep.part_size] : null))
      : null));
  }

  // el("div", {class: "x", onclick: f}, "text", child, ...): strings become text nodes, never markup.
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
      else if (k === "class") node.className = v;
      else node.setAttribute(k, v === true ? "" : String(v));
    }
    for (const c of children.flat(Infinity)) {
      if (c === null || c === undefined || c === false) continue;
      node.appendChild(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return node;
  }

  function num(x, digits) {
    return typeof x === "number" && isFinite(x) ? x.toFixed(digits) : "—";
  }

  function signed(x, digits) {
    return typeof x === "number" ? (x >= 0 ? "+" : "") + x.toFixed(digits) : "—";
  }

  function noReward(errorClass) {
    return errorClass ? "unscored" : "no reward";
  }

  // An image of the bundle (a path under img/), enlarged over the page on click; `marks` (the positions of
  // a step's actions, `evalkit.records.marks.overlay`) are drawn over it.
  function picture(src, caption, marks) {
    if (!src) return el("figure", {}, el("figcaption", {}, caption + ": none"));
    const img = el("img", { src, alt: caption, loading: "lazy", onclick: () => enlarge(src, marks) });
    return el("figure", {}, el("div", { class: "shot" }, img, marks ? marksSvg(marks) : null),
      el("figcaption", {}, caption));
  }

  function enlarge(src, marks) {
    const box = document.getElementById("lightbox");
    const shot = box.querySelector(".shot");
    shot.querySelector("img").src = src;
    shot.querySelectorAll("svg").forEach((s) => s.remove());
    if (marks) shot.appendChild(marksSvg(marks));
    box.hidden = false;
  }

  function svg(tag, attrs) {
    const node = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
    return node;
  }

  // The marks of a step as an SVG layer over its frame, drawn as the notebook draws them into a picture
  // (`marks.draw_marks`): a white-edged ring at each point, an arrow along a drag, the order's number.
  function marksSvg(layer) {
    const r = layer.r, red = "rgb(230,30,60)", thin = Math.max(2, Math.floor(r / 3)), wide = Math.max(3, Math.floor(r / 2));
    const root = svg("svg", { class: "marks", viewBox: "0 0 " + layer.w + " " + layer.h,
      preserveAspectRatio: "xMidYMid meet", role: "img", "aria-label": "actions marked" });
    for (const m of layer.marks) {
      const [[x, y], end] = m.points;
      if (end) {
        const [x2, y2] = end, a = Math.atan2(y2 - y, x2 - x);
        const tip = (s) => (x2 - 2 * r * Math.cos(a + s)).toFixed(1) + "," + (y2 - 2 * r * Math.sin(a + s)).toFixed(1);
        root.append(svg("line", { x1: x, y1: y, x2, y2, stroke: red, "stroke-width": thin }),
          svg("polygon", { points: x2 + "," + y2 + " " + tip(0.45) + " " + tip(-0.45), fill: red }));
      }
      const ring = (rr, stroke, w) => svg("circle", { cx: x, cy: y, r: rr, fill: "none", stroke, "stroke-width": w });
      root.append(ring(r, "#fff", wide), ring(r, red, thin));
      if (m.double) root.append(ring(r / 2, red, 2));
      const label = svg("text", { x: x + r + 2, y: y - r - 2, "font-size": 2 * r, "dominant-baseline": "hanging", fill: red, stroke: "#fff",
        "stroke-width": 2, "paint-order": "stroke" });
      label.textContent = String(m.n);
      root.append(label);
    }
    return root;
  }

  // #/ (table), #/ep/<id>/<step>, #/ab[/<a>/<b>/<step>]; and #/find/<run>/<key>[/<run>/<key>], the address a
  // report links to: an episode (or an A-vs-B pair) by its run's label and key, which a rebuilt bundle keeps.
  function parse() {
    const parts = location.hash.replace(/^#\/?/, "").split("/").filter(Boolean);
    return { view: parts[0] || "table", args: parts.slice(1).map((x) => parseInt(x, 10)), raw: parts.slice(1) };
  }

  function find(raw) {
    const text = raw.map((x) => { try { return decodeURIComponent(x); } catch (e) { return x; } });
    const id = (label, key) => {
      const r = state.rows.find((r) => r.key === key && r.run_label === label) || state.rows.find((r) => r.key === key);
      return r ? r.id : null;
    };
    const a = id(text[0], text[1]);
    const b = text.length >= 4 ? id(text[2], text[3]) : null;
    if (a === null || (text.length >= 4 && b === null)) {
      document.getElementById("app").replaceChildren(el("p", { class: "err" }, "This bundle has no episode " +
        (a === null ? text[1] : text[3]) + ": it was built from other runs than the link's."));
      return;
    }
    history.replaceState(null, "", b === null ? "#/ep/" + a : "#/ab/" + a + "/" + b);
    route();
  }

  function go(hash) {
    if (location.hash !== hash) location.hash = hash;
    else route();
  }

  // A position within the view (the step): kept in the address without a new history entry.
  function mark(hash) {
    history.replaceState(null, "", hash);
  }

  function route() {
    if (!state.index) return;
    const { view, args, raw } = parse();
    if (view === "find") { find(raw); return; }
    for (const id of ["nav-table", "nav-ab"]) document.getElementById(id).classList.remove("on");
    document.getElementById(view === "ab" ? "nav-ab" : "nav-table").classList.add("on");
    const draw = state.views[view === "ep" ? "episode" : view] || state.views.table;
    draw(document.getElementById("app"), args);
  }

  function onKeys(handler) {
    state.keys = handler;
  }

  document.addEventListener("keydown", (e) => {
    if (e.key === "Escape") document.getElementById("lightbox").hidden = true;
    const tag = (e.target && e.target.tagName) || "";
    if (["INPUT", "SELECT", "TEXTAREA"].includes(tag)) return;  // a focused slider steps by itself
    if (state.keys && (e.key === "ArrowLeft" || e.key === "ArrowRight")) {
      e.preventDefault();
      state.keys(e.key === "ArrowLeft" ? -1 : 1);
    }
  });
  window.addEventListener("hashchange", () => { state.keys = null; route(); });
  document.addEventListener("DOMContentLoaded", () => {
    document.getElementById("lightbox").addEventListener("click", (e) => { e.currentTarget.hidden = true; });
  });

  return { state, index, chunk, head, step, piece, loaded, el, num, signed, noReward, picture, marksSvg, enlarge,
    go, mark, onKeys };
})();
