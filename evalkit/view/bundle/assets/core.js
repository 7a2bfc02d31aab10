// The bundle's page: data loading, routing and the DOM helpers the views share.
//
// Data arrives as scripts (a page opened from file:// may load scripts but not fetch files) that call
// EK.index(...) and EK.chunk(n, ...) with gzip-compressed base64 JSON, inflated here with the browser's
// DecompressionStream. Trace text only ever enters the page through text nodes (el() below): never as HTML.
"use strict";

const EK = (() => {
  const state = { index: null, rows: [], chunks: new Map(), waiting: new Map(), views: {}, filters: {} };

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
      const byId = new Map(list.map((e) => [e.id, e]));
      state.chunks.set(n, byId);
      (state.waiting.get(n) || []).forEach((resolve) => resolve(byId));
      state.waiting.delete(n);
    }).catch(fail);
  }

  // The details of episode `id`: its chunk's script is added to the page the first time it is needed.
  function episode(id) {
    const row = state.rows[id];
    if (!row) return Promise.reject(new Error("no episode " + id));
    const n = row.chunk;
    if (state.chunks.has(n)) return Promise.resolve(state.chunks.get(n).get(id));
    return new Promise((resolve) => {
      if (!state.waiting.has(n)) {
        state.waiting.set(n, []);
        const s = document.createElement("script");
        s.src = "data/ep/" + String(n).padStart(4, "0") + ".js";
        document.body.appendChild(s);
      }
      state.waiting.get(n).push((byId) => resolve(byId.get(id)));
    });
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

  // An image of the bundle (a path under img/), enlarged over the page on click.
  function picture(src, caption) {
    if (!src) return el("figure", {}, el("figcaption", {}, caption + ": none"));
    return el("figure", {}, el("img", { src, alt: caption, loading: "lazy", onclick: () => enlarge(src) }),
      el("figcaption", {}, caption));
  }

  function enlarge(src) {
    const box = document.getElementById("lightbox");
    box.querySelector("img").src = src;
    box.hidden = false;
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

  return { state, index, chunk, episode, el, num, signed, noReward, picture, enlarge, go, mark, onKeys };
})();
