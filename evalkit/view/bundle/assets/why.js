// Why: what the scanners found, computed when the bundle was built (evalkit.analysis.why, as the viewer's
// Why view and the report show it): per model × scanner the share of tasks where it fired with its 95%
// interval; for two models the paired differences, sorted by size, Holm across scanners, with what
// separates them in words; then a scanner's episodes, each a link to the step it points to (marked there).
"use strict";

(() => {
  const { state, el } = EK;

  function table(t, id) {
    return el("div", { class: "scroll" }, el("table", { id, class: "why" },
      el("thead", {}, el("tr", {}, t.columns.map((c) => el("th", {}, c)))),
      el("tbody", {}, t.rows.map((r) => el("tr", {}, r.map((v) => el("td", {}, v === null ? "" : String(v))))))));
  }

  function pick(label, options, value, onchange, name) {
    return el("label", {}, label, el("select", { "data-why": name, onchange: (e) => onchange(e.target.value) },
      options.map(([v, text]) => el("option", { value: v, selected: v === value }, text))));
  }

  function draw(app) {
    EK.onKeys(null);
    const why = state.index.why;
    if (!why) { app.replaceChildren(el("p", { class: "muted" }, "No scan in this bundle.")); return; }
    const w = state.why || (state.why = { pair: 0, scanner: null });
    const parts = [el("h2", {}, "How often each scanner fired, per model: the share of tasks"),
      el("p", { class: "muted" }, "Each cell: the share of tasks where the scanner fired (a task's episodes averaged " +
        "first), its " + why.method + " (none below 6 tasks), and tasks where it fired / tasks counted."),
      table(why.rates, "why-rates")];
    if (why.pairs.length) {
      const p = why.pairs[Math.min(w.pair, why.pairs.length - 1)];
      parts.push(el("h2", {}, "What separates A from B"),
        el("div", { class: "filters" }, pick("A vs B", why.pairs.map((q, i) => [String(i), q.a + " vs " + q.b]),
          String(w.pair), (v) => { w.pair = parseInt(v, 10); draw(app); }, "pair")));
      parts.push(p.separates.length
        ? el("ul", { id: "why-separates" }, p.separates.map((s) => el("li", {}, s)))
        : el("p", { id: "why-separates" }, "No scanner separates " + p.a + " from " + p.b + " (no Holm p < 0.05)."));
      parts.push(table(p.table, "why-diffs"), el("p", { class: "muted" }, "A = " + p.a + ", B = " + p.b +
        ". " + why.paired + "; p (Holm) across the scanners."));
    }
    const ranked = why.scanners.slice().sort((x, y) => y.episodes.length - x.episodes.length);
    if (!w.scanner || !why.scanners.some((s) => s.name === w.scanner)) w.scanner = ranked[0].name;
    const s = why.scanners.find((x) => x.name === w.scanner);
    parts.push(el("h2", {}, "Episodes where a scanner fired"),
      el("div", { class: "filters" }, pick("Scanner", ranked.map((x) => [x.name, x.name + " (" + x.episodes.length + ")"]),
        w.scanner, (v) => { w.scanner = v; draw(app); }, "scanner")),
      el("p", { class: "muted" }, s.name + ": " + s.phrase + ". A click opens the episode at the step it points to."));
    parts.push(s.episodes.length ? el("div", { class: "scroll" }, el("table", { id: "why-fired" },
      el("thead", {}, el("tr", {}, ["model", "task", "mode", "steps", "evidence"].map((c) => el("th", {}, c)))),
      el("tbody", {}, s.episodes.map(([id, pos, steps, evidence]) => {
        const r = state.rows[id] || {};
        const href = "#/ep/" + id + (pos === null || pos === undefined ? "" : "/" + pos);
        // The episode's page marks the steps the scanner points to (`state.flag`, read once by that page).
        const open = () => { state.flag = { id, pos, steps, evidence, name: s.name, phrase: s.phrase }; EK.go(href); };
        return el("tr", { onclick: open },
          el("td", {}, el("a", { href }, String(r.model ?? ""))), el("td", {}, String(r.task_id ?? "")),
          el("td", {}, String(r.mode ?? "")), el("td", {}, steps.join(", ")), el("td", {}, evidence));
      })))) : el("p", { class: "muted" }, "It fired on no episode."));
    app.replaceChildren(...parts);
  }

  state.views.why = draw;
})();
