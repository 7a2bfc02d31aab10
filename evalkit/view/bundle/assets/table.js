// The episode table: filters (each column with more than one value, reward range, task text), sorting by
// any column, 100 rows a page; a click on a row opens the episode.
"use strict";

(() => {
  const { state, el, num } = EK;
  const PAGE = 100;
  const FILTERS = [["run_label", "Run"], ["model", "Model"], ["surface", "Surface"], ["mode", "Mode"],
    ["tier", "Tier"], ["end_reason", "End reason"], ["error_class", "Error class"]];
  const COLUMNS = [["model", "model"], ["surface", "surface"], ["mode", "mode"], ["task_id", "task"],
    ["tier", "tier"], ["repeat", "repeat"], ["reward", "reward"], ["end_reason", "end"],
    ["error_class", "error"], ["n_turns", "turns"], ["cost_usd", "cost"], ["run_label", "run"]];
  const NUMERIC = new Set(["repeat", "reward", "n_turns", "cost_usd"]);
  const NONE = "(none)";

  const text = (v) => (v === null || v === undefined ? NONE : String(v));

  function values(col) {
    return [...new Set(state.rows.map((r) => text(r[col])))].sort();
  }

  function shown() {
    const f = state.filters;
    const lo = f.rmin === "" || f.rmin === undefined ? null : Number(f.rmin);
    const hi = f.rmax === "" || f.rmax === undefined ? null : Number(f.rmax);
    const task = (f.task || "").toLowerCase();
    let rows = state.rows.filter((r) => {
      for (const [col] of FILTERS) if (f[col] && text(r[col]) !== f[col]) return false;
      if ((lo !== null || hi !== null) && typeof r.reward !== "number") return false;
      if (lo !== null && r.reward < lo) return false;
      if (hi !== null && r.reward > hi) return false;
      return !task || text(r.task_id).toLowerCase().includes(task);
    });
    if (f.sort) {
      const dir = f.desc ? -1 : 1;
      rows = rows.slice().sort((a, b) => {
        const x = a[f.sort], y = b[f.sort];
        if (x === y) return a.id - b.id;
        if (x === null || x === undefined) return 1;  // missing values last, either way
        if (y === null || y === undefined) return -1;
        return (x < y ? -1 : 1) * dir;
      });
    }
    return rows;
  }

  function redraw(app) {
    state.filters.page = 0;
    draw(app);
  }

  function controls(app) {
    const f = state.filters;
    const box = el("div", { class: "filters" });
    for (const [col, label] of FILTERS) {
      const opts = values(col);
      if (opts.length < 2) continue;
      const sel = el("select", { "data-filter": col, onchange: (e) => { f[col] = e.target.value; redraw(app); } },
        el("option", { value: "" }, "all"), opts.map((o) => el("option", { value: o, selected: f[col] === o }, o)));
      box.appendChild(el("label", {}, label, sel));
    }
    const input = (key, label, attrs) => el("label", {}, label, el("input", Object.assign({
      value: f[key] || "", onchange: (e) => { f[key] = e.target.value; redraw(app); } }, attrs)));
    box.append(input("rmin", "Reward ≥", { type: "number", step: "0.05", size: 6 }),
      input("rmax", "Reward ≤", { type: "number", step: "0.05", size: 6 }),
      input("task", "Task contains", { type: "search", "data-filter": "task" }));
    return box;
  }

  function draw(app) {
    const f = state.filters;
    const rows = shown();
    const pages = Math.max(1, Math.ceil(rows.length / PAGE));
    f.page = Math.min(f.page || 0, pages - 1);
    const cols = COLUMNS.filter(([c]) => values(c).length > 1 || ["model", "task_id", "reward"].includes(c));
    const head = el("tr", {}, el("th", { class: "num" }, "#"), cols.map(([c, label]) => el("th", {
      class: NUMERIC.has(c) ? "num" : null,
      onclick: () => { f.desc = f.sort === c ? !f.desc : false; f.sort = c; draw(app); },
    }, label + (f.sort === c ? (f.desc ? " ▼" : " ▲") : ""))));
    const body = rows.slice(f.page * PAGE, (f.page + 1) * PAGE).map((r, i) => el("tr", {
      "data-id": r.id, onclick: () => EK.go("#/ep/" + r.id),
    }, el("td", { class: "num" }, f.page * PAGE + i + 1), cols.map(([c]) => el("td", {
      class: NUMERIC.has(c) ? "num" : null, title: text(r[c]),
    }, cell(c, r)))));
    app.replaceChildren(controls(app),
      el("p", { id: "count" }, rows.length.toLocaleString() + " of " + state.rows.length.toLocaleString() + " episodes"),
      el("table", { id: "episodes" }, el("thead", {}, head), el("tbody", {}, body)),
      el("div", { class: "pager" },
        el("button", { disabled: f.page === 0, onclick: () => { f.page -= 1; draw(app); } }, "◀ Previous page"),
        el("span", {}, "page " + (f.page + 1) + " of " + pages),
        el("button", { disabled: f.page >= pages - 1, onclick: () => { f.page += 1; draw(app); } }, "Next page ▶")));
  }

  function cell(c, r) {
    const v = r[c];
    if (c === "reward") return typeof v === "number" ? num(v, 3) : EK.noReward(r.error_class);
    if (c === "cost_usd") return typeof v === "number" ? "$" + v.toFixed(4) : "—";
    return v === null || v === undefined ? "" : String(v);
  }

  state.views.table = (app) => { EK.onKeys(null); draw(app); };
})();
