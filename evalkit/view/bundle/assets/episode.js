// The episode view, as in the viewer, laid out for stepping at 1280 × 720: two lines of header, Previous /
// Next (and the ← / → keys) with a slider, then one row with the target and the step's picture at the same
// size (the screen an action was taken on, the action drawn) beside the step's calls with their results, its
// text and its reasoning (collapsed); below, the filmstrip with the final render and the transcript. An
// episode without pictures shows what the model sent beside what the environment answered.
"use strict";

(() => {
  const { state, el, num } = EK;

  // model · env surface/mode · task · tier · skin · repeat · run, leaving out what the episode lacks.
  function identity(ep) {
    const where = [ep.surface, ep.mode].filter(Boolean).join("/");
    return [ep.model, [ep.env, where].filter(Boolean).join(" "), ep.task_id, ep.tier ? "tier " + ep.tier : "",
      ep.skin ? "skin " + ep.skin : "", typeof ep.repeat === "number" ? "repeat " + ep.repeat : "",
      state.rows[ep.id].run_label].filter(Boolean).join(" · ");
  }

  function header(ep) {
    const c = ep.counts || {};
    const n = (v) => (v === undefined || v === null ? "—" : String(v));
    const said = ["Reward " + (typeof ep.reward === "number" ? num(ep.reward, 3) : EK.noReward(ep.error_class)),
      "ended " + (ep.end_reason || "—") + (ep.error_class ? " (" + ep.error_class + ")" : ""),
      n(c.n_turns) + " turns", n(c.tool_calls) + " tool calls", n(c.tool_errors) + " tool errors",
      "cost " + (ep.cost || "—"), num(ep.seconds, 1) + " s"];
    const rows = [...(ep.grade || []), ...(ep.usage || [])];
    return el("div", { class: "head" },
      el("div", { id: "identity" }, identity(ep)),
      el("div", { class: "outcome" }, el("span", { id: "outcome" }, said.join(" · ")),
        rows.length ? el("details", { class: "inline" }, el("summary", {}, "Grade and usage"),
          el("table", {}, rows.map((r) => el("tr", {}, el("td", {}, r.name), el("td", {}, r.value))))) : null,
        ep.reset ? el("details", { class: "inline" }, el("summary", {}, "Reset arguments"),
          el("pre", {}, ep.reset)) : null,
        el("a", { href: "#/ab/" + ep.id, id: "compare" }, "Compare with another model on this task")),
      ep.error ? el("details", { class: "bad" }, el("summary", {}, "The episode ended with an error" +
        (ep.error_class ? " and is unscored" : "")), el("pre", { class: "err" }, ep.error)) : null);
  }

  // Previous / Next, a slider and "Step k of n"; `set(i)` moves to position i.
  function controls(n, pos, set, label) {
    const range = el("input", { type: "range", min: 0, max: Math.max(0, n - 1), value: pos,
      "aria-label": "step", onchange: (e) => set(parseInt(e.target.value, 10)) });
    EK.onKeys((d) => set(Math.min(Math.max(pos + d, 0), n - 1)));
    return el("div", { class: "steps" },
      el("button", { disabled: pos <= 0, onclick: () => set(pos - 1), title: "Previous step (← key)" }, "◀ Previous"),
      el("button", { disabled: pos >= n - 1, onclick: () => set(pos + 1), title: "Next step (→ key)" }, "Next ▶"),
      range, el("span", { class: "where" }, label || "Step " + pos + " of " + (n - 1)));
  }

  function filmstrip(ep, pos, set) {
    const strip = el("div", { class: "film" }, ep.steps.map((s, i) => el("button", {
      class: i === pos ? "on" : null, title: s.caption || "step " + i, onclick: () => set(i),
    }, s.frame ? el("img", { src: s.frame, alt: "step " + i, loading: "lazy" }) : el("span", { class: "none" }, "—"),
    s.end ? "end" : String(s.index ?? i))));
    requestAnimationFrame(() => {
      const on = strip.querySelector("button.on");
      if (on) strip.scrollLeft = on.offsetLeft - strip.clientWidth / 2 + on.clientWidth / 2;
    });
    return el("div", { class: "filmrow" }, strip, ep.render ? EK.picture(ep.render, "Final render") : null);
  }

  const table = (rows) => el("table", {},
    el("thead", {}, el("tr", {}, Object.keys(rows[0]).map((k) => el("th", {}, k)))),
    el("tbody", {}, rows.map((r) => el("tr", {}, Object.values(r).map((v) => el("td", {}, v))))));

  // The plans sent in this turn: their entries (what the model sent), or the env's verdict and violations.
  function plans(ep, turn, part) {
    return (ep.plans || []).filter((p) => p.turn === turn).map((p) => {
      const i = ep.plans.indexOf(p) + 1;
      if (part === "entries") {
        return el("div", {}, el("p", {}, "Plan " + i + " (" + p.tool + "): " + (p.rows || []).length + " entries"),
          p.rows && p.rows.length ? table(p.rows) : null);
      }
      return el("div", {}, el("p", {}, "Plan " + i + " (" + p.tool + "): " +
        (p.feasible ? "feasible" : p.feasible === false ? "infeasible" : "no verdict") + ", objective " +
        (p.objective ?? "—") + ", " + (p.violations || 0) + " violation(s)" +
        (typeof p.reward === "number" ? ", reward " + num(p.reward, 3) : "")),
      p.answer ? el("pre", {}, p.answer) : null, p.bad && p.bad.length ? table(p.bad) : null);
    });
  }

  function turnLine(s) {
    if (s.turn === undefined) return s.end ? "The screen the last action left." : "Start of the episode: no model output yet.";
    return "Turn " + s.turn + " · stop " + (s.stop || "—") + " · model " + num(s.model_s, 2) + " s · env " +
      num(s.env_s, 2) + " s" + (s.provider ? " · answered by " + s.provider : "");
  }

  function call(ep, c) {
    return el("details", { class: c.ok ? "call" : "call bad" }, el("summary", {}, (c.ok ? "" : "✗ ") + c.line),
      c.parse_error ? el("p", { class: "muted" }, "The arguments did not parse: the call was not run and the model was told.") : null,
      el("div", { class: "muted" }, ep.ownloop ? "Parsed action" : "Arguments"), el("pre", {}, c.args),
      c.result ? [el("div", { class: "muted" }, c.ok ? "Result" : "Result (error)"), el("pre", {}, c.result)] : null,
      (c.images || []).map((src, j) => EK.picture(src, "Returned image " + (j + 1))));
  }

  // What the model did at one step: its calls (each with its result), its text, its reasoning collapsed.
  function stepDetail(ep, s) {
    const out = [el("p", { class: "muted" }, turnLine(s))];
    if (s.turn === undefined) return out;
    for (const c of s.calls || []) out.push(call(ep, c));
    if (!(s.calls || []).length) out.push(el("p", { class: "muted" }, "No tool call in this turn."));
    if (s.text) out.push(el("details", { open: true }, el("summary", {}, ep.ownloop ? "Raw model output" : "Model text"), el("pre", {}, s.text)));
    if (s.reasoning) out.push(el("details", {}, el("summary", {}, "Reasoning (" + s.reasoning.length.toLocaleString() + " characters)"), el("pre", {}, s.reasoning)));
    return out;
  }

  // A step of an episode without pictures: what the model sent beside what the environment answered.
  function textStep(ep, s) {
    if (s.turn === undefined) return [el("p", { class: "muted" }, turnLine(s))];
    const calls = s.calls || [];
    const sent = [el("h4", {}, "What the model sent"),
      s.text ? el("details", { open: true }, el("summary", {}, "Model text"), el("pre", {}, s.text)) : null,
      calls.map((c) => call(ep, c)), calls.length ? null : el("p", { class: "muted" }, "No tool call in this turn."),
      plans(ep, s.turn, "entries"),
      s.reasoning ? el("details", {}, el("summary", {}, "Reasoning (" + s.reasoning.length.toLocaleString() + " characters)"), el("pre", {}, s.reasoning)) : null];
    const back = calls.filter((c) => c.result);
    const answered = [el("h4", {}, "What the environment answered"),
      back.map((c) => [el("div", { class: "muted" }, c.name + (c.ok ? "" : " (error)")), el("pre", { class: c.ok ? null : "err" }, c.result)]),
      back.length ? null : el("p", { class: "muted" }, "Nothing came back in this turn."), plans(ep, s.turn, "verdicts")];
    return [el("p", { class: "muted" }, turnLine(s)), el("div", { class: "pair textstep" }, el("div", {}, sent), el("div", {}, answered))];
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
      const last = ep.steps.length - 1;
      const view = { pos: Math.min(Math.max(step === undefined || isNaN(step) ? ep.first || 0 : step, 0), last) };
      const render = () => {
        const s = ep.steps[view.pos];
        const set = (i) => { view.pos = i; EK.mark("#/ep/" + id + "/" + i); render(); };
        const label = s.end ? "End (step " + view.pos + " of " + last + ")" : "Step " + view.pos + " of " + last;
        const main = ep.pictures
          ? [el("div", { class: ep.target ? "stepview" : "stepview notarget" },
              ep.target ? EK.picture(ep.target, "Target") : null,
              EK.picture(s.frame, s.caption + (s.marked_actions ? " · actions marked" : "")),
              el("div", { class: "panel", id: "panel" }, stepDetail(ep, s))),
            filmstrip(ep, view.pos, set)]
          : textStep(ep, s);
        app.replaceChildren(header(ep), controls(ep.steps.length, view.pos, set, label), el("div", { id: "body" }, main),
          el("h3", {}, "Transcript"), el("div", { id: "transcript" }, transcript(ep, s.turn === undefined ? 0 : s.turn)));
      };
      render();
    });
  }

  EK.stepDetail = stepDetail;
  EK.textStep = textStep;
  EK.controls = controls;
  state.views.episode = draw;
})();
