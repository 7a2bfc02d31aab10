// The episode view, as in the viewer: header, Previous / Next (and the ← / → keys) with a slider, one row
// of pictures (target thumbnail, frame at this step, final render; a click enlarges), a filmstrip, then the
// step's text, reasoning and tool calls (one line each, red when they failed); or the Transcript tab.
"use strict";

(() => {
  const { state, el, num } = EK;

  function header(ep) {
    const c = ep.counts || {};
    return el("div", { class: "head" },
      el("div", {}, [ep.model, (ep.env || "") + " " + ep.surface + "/" + ep.mode, ep.task_id, "tier " + (ep.tier || ""),
        "repeat " + ep.repeat, state.rows[ep.id].run_label].join(" · ")),
      el("div", { class: "metrics" },
        [["Reward", typeof ep.reward === "number" ? num(ep.reward, 3) : EK.noReward(ep.error_class)],
          ["Turns", c.n_turns], ["Tool calls", c.tool_calls], ["Tool errors", c.tool_errors],
          ["Cost", typeof ep.cost_usd === "number" ? "$" + ep.cost_usd.toFixed(4) : "—"]]
          .map(([k, v]) => el("div", {}, el("span", {}, k), el("b", {}, v === undefined ? "—" : String(v))))),
      el("div", { class: "muted" }, "End reason: " + (ep.end_reason || "—") +
        (ep.error_class ? " · error class: " + ep.error_class : "") + " · " + num(ep.seconds, 1) + " s"),
      ep.error ? el("pre", { class: "err" }, ep.error) : null,
      ep.grade && ep.grade.length ? el("details", {}, el("summary", {}, "Grade and usage"),
        el("table", {}, [...ep.grade, ...(ep.usage || [])].map((r) => el("tr", {}, el("td", {}, r.name), el("td", {}, r.value)))))
        : null);
  }

  // Previous / Next, a slider and "Step k of n"; `set(i)` moves to position i.
  function controls(n, pos, set) {
    const range = el("input", { type: "range", min: 0, max: Math.max(0, n - 1), value: pos,
      "aria-label": "step", onchange: (e) => set(parseInt(e.target.value, 10)) });
    EK.onKeys((d) => set(Math.min(Math.max(pos + d, 0), n - 1)));
    return el("div", { class: "steps" },
      el("button", { disabled: pos <= 0, onclick: () => set(pos - 1), title: "Previous step (← key)" }, "◀ Previous"),
      el("button", { disabled: pos >= n - 1, onclick: () => set(pos + 1), title: "Next step (→ key)" }, "Next ▶"),
      range, el("span", { class: "where" }, "Step " + pos + " of " + (n - 1)));
  }

  function filmstrip(steps, pos, set) {
    const strip = el("div", { class: "film" }, steps.map((s, i) => el("button", {
      class: i === pos ? "on" : null, title: "step " + i, onclick: () => set(i),
    }, s.frame ? el("img", { src: s.frame, alt: "step " + i, loading: "lazy" }) : el("span", { class: "none" }, "—"),
    String(i))));
    requestAnimationFrame(() => {
      const on = strip.querySelector("button.on");
      if (on) strip.scrollLeft = on.offsetLeft - strip.clientWidth / 2 + on.clientWidth / 2;
    });
    return strip;
  }

  function plans(ep, turn) {
    return (ep.plans || []).filter((p) => p.turn === turn).map((p, i) => el("div", {},
      el("p", {}, "Plan (" + p.tool + "): " + (p.feasible ? "feasible" : p.feasible === false ? "infeasible" : "no verdict") +
        ", objective " + (p.objective ?? "—") + ", " + (p.violations || 0) + " violation(s)"),
      [p.rows, p.bad].filter((rows) => rows && rows.length).map((rows) => el("table", {},
        el("thead", {}, el("tr", {}, Object.keys(rows[0]).map((k) => el("th", {}, k)))),
        el("tbody", {}, rows.map((r) => el("tr", {}, Object.values(r).map((v) => el("td", {}, v)))))))));
  }

  // What the model said and did at one step.
  function stepDetail(ep, s) {
    if (s.turn === undefined) return [el("p", { class: "muted" }, "Start of the episode: no model output yet.")];
    const out = [el("p", { class: "muted" }, "Turn " + s.turn + " · stop " + (s.stop || "—") + " · model " +
      num(s.model_s, 2) + " s · env " + num(s.env_s, 2) + " s")];
    if (s.text) out.push(el("details", { open: true }, el("summary", {}, ep.ownloop ? "Raw model output" : "Model text"), el("pre", {}, s.text)));
    if (s.reasoning) out.push(el("details", {}, el("summary", {}, "Reasoning (" + s.reasoning.length.toLocaleString() + " characters)"), el("pre", {}, s.reasoning)));
    for (const c of s.calls || []) {
      out.push(el("details", { class: c.ok ? "call" : "call bad" }, el("summary", {}, (c.ok ? "" : "✗ ") + c.line),
        c.parse_error ? el("p", { class: "muted" }, "The arguments did not parse: the call was not run and the model was told.") : null,
        el("div", { class: "muted" }, ep.ownloop ? "Parsed action" : "Arguments"), el("pre", {}, c.args),
        c.result ? [el("div", { class: "muted" }, c.ok ? "Result" : "Result (error)"), el("pre", {}, c.result)] : null,
        (c.images || []).map((src, j) => EK.picture(src, "Returned image " + (j + 1)))));
    }
    if (!(s.calls || []).length) out.push(el("p", { class: "muted" }, "No tool call in this turn."));
    out.push(...plans(ep, s.turn));
    return out;
  }

  function transcript(ep, turn) {
    const msgs = ep.messages || [];
    if (!msgs.length) return [el("p", { class: "muted" }, "No transcript.")];
    const out = [];
    if (msgs.some((m) => m.note === "reconstructed")) {
      out.push(el("p", { class: "muted" }, "Rebuilt from the record (it keeps no transcript): the opening message and " +
        "the prompt the model saw are not in it; tool results are as recorded (capped)."));
    }
    for (const m of msgs) {
      const head = [{ system: "System", user: "User", assistant: "Assistant", tool: "Tool" }[m.role] || m.role];
      if (m.role === "tool") head.push((m.name || "?") + (m.call_id ? " · " + m.call_id : "") + (m.error ? " · error" : ""));
      head.push("turn " + m.turn);
      if (m.stop) head.push("stop " + m.stop);
      if (typeof m.latency_s === "number") head.push(m.latency_s.toFixed(2) + " s");
      if (m.usage && (m.usage.input || m.usage.output)) head.push((m.usage.input || 0) + " in / " + (m.usage.output || 0) + " out");
      out.push(el("div", { class: m.turn === turn ? "msg now" : "msg" },
        el("div", {}, el("span", { class: "role" }, head.join(" · ")), m.note ? el("em", { class: "muted" }, " · " + m.note) : null),
        m.text ? el("pre", {}, m.text) : null,
        m.reasoning ? el("details", {}, el("summary", {}, "Reasoning"), el("pre", {}, m.reasoning)) : null,
        (m.calls || []).map((line) => el("pre", {}, "→ " + line)),
        (m.images || []).map((img, j) => img.src
          ? el("figure", {}, el("img", { src: img.src, alt: "image " + (j + 1), loading: "lazy", onclick: () => EK.enlarge(img.src) }),
            el("figcaption", {}, "Image " + (j + 1) + (img.pruned ? " · " + img.pruned : "")))
          : el("p", { class: "muted" }, "Image " + (j + 1) + ": not stored"))));
    }
    return out;
  }

  function draw(app, args) {
    const [id, step] = args;
    app.replaceChildren(el("p", { class: "muted" }, "Loading the episode…"));
    EK.episode(id).then((ep) => {
      if (!ep) { app.replaceChildren(el("p", { class: "err" }, "No such episode.")); return; }
      const view = { tab: state.tab || "Step", pos: Math.min(Math.max(step || 0, 0), ep.steps.length - 1) };
      const render = () => {
        const s = ep.steps[view.pos];
        const set = (i) => { view.pos = i; EK.mark("#/ep/" + id + "/" + i); render(); };
        const tabs = el("div", { class: "tabs" }, ["Step", "Transcript"].map((t) => el("button", {
          class: view.tab === t ? "on" : null, onclick: () => { view.tab = state.tab = t; render(); } }, t)));
        const body = view.tab === "Step"
          ? [el("div", { class: "pics" }, EK.picture(ep.target, "Target"),
              EK.picture(s.frame, (ep.ownloop ? "Screenshot" : "Frame") + " at step " + view.pos),
              EK.picture(ep.render, "Final render")),
            filmstrip(ep.steps, view.pos, set), stepDetail(ep, s)]
          : transcript(ep, s.turn === undefined ? 0 : s.turn);
        app.replaceChildren(header(ep), el("p", {}, el("a", { href: "#/ab/" + id }, "Compare with another model on this task")),
          controls(ep.steps.length, view.pos, set), tabs, el("div", { id: "body" }, body));
      };
      render();
    });
  }

  EK.stepDetail = stepDetail;
  EK.controls = controls;
  state.views.episode = draw;
})();
