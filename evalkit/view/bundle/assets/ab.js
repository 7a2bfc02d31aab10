// A vs B: two sides (a model in a run) on the same task, surface and mode. On top the paired difference
// (computed when the bundle was built: task-weighted, as compare: its p, its CI, wins / ties / losses) for the tier
// chosen; then the tasks both ran (a click picks one); then both episodes under one step control, the
// target once, and what each side did at that step beside each other.
"use strict";

(() => {
  const { state, el, num, signed } = EK;
  const ALL = "all tiers";

  const side = (r) => (r.model || "(none)") + " · " + r.run_label;
  const pairKey = (r) => state.index.pair_keys.map((k) => String(r[k] ?? "(none)")).join("\u001f");

  function ranked() {
    const m = new Map();
    for (const r of state.rows) {
      const s = side(r);
      if (!m.has(s)) m.set(s, []);
      if (typeof r.reward === "number" && !r.error_class) m.get(s).push(r.reward);
    }
    const mean = (xs) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : -Infinity);
    return [...m.keys()].sort((a, b) => mean(m.get(b)) - mean(m.get(a)) || (a < b ? -1 : 1));
  }

  function tasks(a, b, tier) {
    const by = new Map();
    for (const r of state.rows) {
      const s = side(r);
      if ((s !== a && s !== b) || (tier !== ALL && String(r.tier ?? "(none)") !== tier)) continue;
      const k = pairKey(r);
      if (!by.has(k)) by.set(k, { key: k, row: r, a: [], b: [] });
      by.get(k)[s === a ? "a" : "b"].push(r);
      if (a === b) by.get(k).b.push(r);
    }
    const best = (rows) => Math.max(...rows.map((r) => (typeof r.reward === "number" && !r.error_class ? r.reward : -Infinity)));
    return [...by.values()].filter((p) => p.a.length && p.b.length).map((p) => {
      const [x, y] = [best(p.a), best(p.b)];
      return Object.assign(p, { aBest: isFinite(x) ? x : null, bBest: isFinite(y) ? y : null });
    }).sort((p, q) => (p.row.task_id < q.row.task_id ? -1 : p.row.task_id > q.row.task_id ? 1 : 0));
  }

  // The default B: another model (the same model in another run only when there is no other), the side
  // sharing most tasks with A, the better one among equals.
  function opponent(a, sides) {
    const mine = new Set(state.rows.filter((r) => side(r) === a).map(pairKey));
    const shared = new Map();
    const model = new Map();
    for (const r of state.rows) {
      const s = side(r);
      model.set(s, r.model);
      if (s !== a && mine.has(pairKey(r))) (shared.get(s) || shared.set(s, new Set()).get(s)).add(pairKey(r));
    }
    const n = (s) => shared.get(s)?.size || 0;
    const others = sides.filter((s) => s !== a);
    others.sort((x, y) => (model.get(x) === model.get(a)) - (model.get(y) === model.get(a)) ||
      (n(y) > 0) - (n(x) > 0) || n(y) - n(x) || sides.indexOf(x) - sides.indexOf(y));
    return others[0] || a;
  }

  function headline(a, b, tier) {
    const t = tier === ALL ? null : tier;
    let r = (state.index.pairs || []).find((p) => p.a === a && p.b === b && p.tier === t);
    const flip = !r && (r = (state.index.pairs || []).find((p) => p.a === b && p.b === a && p.tier === t));
    if (!r) return el("p", { class: "headline" }, "No paired difference: no task with a scored episode on both sides" + (t ? " in this tier." : "."));
    // The line is the viewer's own, written by Python for each direction: one wording, one set of numbers.
    return el("p", { class: "headline", id: "difference" }, flip ? r.line_ba : r.line);
  }

  function select(label, options, value, onchange) {
    return el("label", {}, label, el("select", { "data-ab": label, onchange: (e) => onchange(e.target.value) },
      options.map((o) => el("option", { value: o, selected: o === value }, o))));
  }

  function draw(app, args) {
    const ab = state.ab || (state.ab = {});
    const sides = ranked();
    if (!sides.length) { app.replaceChildren(el("p", {}, "No episodes.")); return; }
    if (args[0] !== undefined && state.rows[args[0]]) {  // from an episode (and a chosen B episode)
      const ra = state.rows[args[0]];
      ab.a = side(ra);
      ab.pair = pairKey(ra);
      ab.ea = ra.id;
      ab.eb = args[1] !== undefined && state.rows[args[1]] ? args[1] : null;
      if (ab.eb !== null) ab.b = side(state.rows[ab.eb]);
      else ab.b = null;  // from an episode: B is chosen afresh against it
      ab.pos = args[2];
    }
    if (!sides.includes(ab.a)) ab.a = sides[0];
    if (!sides.includes(ab.b)) ab.b = opponent(ab.a, sides);
    const tiers = [ALL, ...new Set(state.rows.map((r) => String(r.tier ?? "(none)")))];
    if (!tiers.includes(ab.tier)) ab.tier = ALL;
    const pairs = tasks(ab.a, ab.b, ab.tier);
    const reset = () => { ab.ea = ab.eb = null; ab.pos = undefined; draw(app, []); };
    const top = el("div", { class: "filters" },
      select("A", sides, ab.a, (v) => { ab.a = v; reset(); }),
      select("B", sides, ab.b, (v) => { ab.b = v; reset(); }),
      select("Tier", tiers, ab.tier, (v) => { ab.tier = v; reset(); }));
    if (!pairs.length) {
      app.replaceChildren(top, headline(ab.a, ab.b, ab.tier), el("p", {}, "A and B share no task on the same surface and mode."));
      return;
    }
    let chosen = pairs.find((p) => p.key === ab.pair) || pairs[0];
    ab.pair = chosen.key;
    const list = el("div", { class: "scroll" }, el("table", { id: "pairs" },
      el("thead", {}, el("tr", {}, ["task", "surface", "mode", "A best", "B best", "A − B"].map((h) => el("th", {}, h)))),
      el("tbody", {}, pairs.map((p) => el("tr", { class: p === chosen ? "sel" : null,
        onclick: () => { ab.pair = p.key; ab.ea = ab.eb = null; ab.pos = undefined; draw(app, []); } },
      el("td", {}, p.row.task_id), el("td", {}, p.row.surface), el("td", {}, p.row.mode),
      el("td", { class: "num" }, num(p.aBest, 3)), el("td", { class: "num" }, num(p.bBest, 3)),
      el("td", { class: "num" }, p.aBest !== null && p.bBest !== null ? signed(p.aBest - p.bBest, 3) : "—"))))));
    // A link (the report's) lands on one task of many: name it above the episodes and bring its row into
    // the list's view, which otherwise opens at the top.
    const named = el("h3", { id: "ab-task" }, "Task " + chosen.row.task_id + " · " +
      [chosen.row.surface, chosen.row.mode].filter((x) => x).join("/") +
      (chosen.row.tier ? " · tier " + chosen.row.tier : ""));
    const reveal = () => {
      const sel = list.querySelector("tr.sel");
      if (!sel) return;
      const off = sel.getBoundingClientRect().top - list.getBoundingClientRect().top;
      list.scrollTop += off - (list.clientHeight - sel.offsetHeight) / 2;
    };
    const ea = chosen.a.find((r) => r.id === ab.ea) || chosen.a[0];
    const eb = chosen.b.find((r) => r.id === ab.eb) || chosen.b.find((r) => r.repeat === ea.repeat) || chosen.b[0];
    app.replaceChildren(top, headline(ab.a, ab.b, ab.tier), list, named, el("p", { class: "muted" }, "Loading both episodes…"));
    reveal();
    Promise.all([EK.head(ea.id), EK.head(eb.id)]).then(([A, B]) => {
      const n = Math.max(A.n_steps, B.n_steps);
      if (ab.pos === undefined || ab.pos === null || isNaN(ab.pos)) {  // where both have a picture of a step
        const both = Math.max(A.first || 0, B.first || 0);
        ab.pos = both < Math.min(A.n_steps, B.n_steps) ? both : A.first ?? 0;
      }
      const pictures = A.pictures || B.pictures;
      const head = (ep, name) => el("div", {}, el("b", {}, name), " · reward " +
        (typeof ep.reward === "number" ? num(ep.reward, 3) : EK.noReward(ep.error_class)) + " · " + (ep.end_reason || "—") +
        " · " + ep.n_steps + " steps · repeat " + ep.repeat, el("div", { class: "muted" }, ep.model + " · " + state.rows[ep.id].run_label));
      const frame = (ep, s, name) => (s ? EK.picture(s.frame, name + ": " + s.caption + (s.marks ? " · actions marked" : ""), s.marks)
        : el("div", {}, el("p", { class: "muted" }, "(this episode has ended)"), EK.picture(ep.render, name + ": final render")));
      const detail = (ep, s) => (s ? (pictures ? EK.stepDetail(ep, s) : EK.textStep(ep, s)) : el("p", { class: "muted" }, "(this episode has ended)"));
      // Each step reads only the parts of the two episodes that hold it.
      const render = () => {
        const pos = Math.min(ab.pos || 0, n - 1);
        const set = (i) => { ab.pos = i; EK.mark("#/ab/" + ea.id + "/" + eb.id + "/" + i); render(); };
        Promise.all([EK.step(ea.id, pos), EK.step(eb.id, pos)]).then(([sa, sb]) => {
          if (Math.min(ab.pos || 0, n - 1) !== pos) return;  // stepped on meanwhile
          app.replaceChildren(top, headline(ab.a, ab.b, ab.tier), list, named,
            el("div", { class: "pair" }, head(A, "A"), head(B, "B")),
            EK.controls(n, pos, set),
            pictures ? el("div", { class: A.target ? "pics" : "pics two" }, A.target ? EK.picture(A.target, "Target") : null,
              frame(A, sa, "A"), frame(B, sb, "B")) : null,
            el("div", { class: "pair" }, el("div", {}, detail(A, sa)), el("div", {}, detail(B, sb))));
          reveal();
        });
      };
      render();
    });
  }

  state.views.ab = draw;
})();
