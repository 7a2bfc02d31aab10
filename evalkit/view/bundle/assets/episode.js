// The episode view, as in the viewer, laid out for stepping at 1280 × 720: two lines of header, Previous /
// Next (and the ← / → keys) with a slider, then one row with the target and the step's picture at the same
// size (the screen an action was taken on, the action drawn) beside the step's calls with their results, its
// text and its reasoning (collapsed); below, a page of the filmstrip with the final render and a page of the
// transcript, around the step. An episode without pictures shows what the model sent beside what the
// environment answered.
//
// The page is built once per episode; a step changes only the step's part of it (its picture and marks, its
// panel, the label and buttons; the filmstrip and the transcript only when the step leaves their page), and
// needs only the episode's head and the part holding the step (`EK.piece`): a step of a thousand-step
// episode costs what a step of a twenty-step one does.
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

  const table = (rows) => el("table", {},
    el("thead", {}, el("tr", {}, Object.keys(rows[0]).map((k) => el("th", {}, k)))),
    el("tbody", {}, rows.map((r) => el("tr", {}, Object.values(r).map((v) => el("td", {}, v))))));

  // The plans sent in the step's turn: their entries (what the model sent), or the env's verdict and violations.
  function plans(s, part) {
    return (s.plans || []).map((p) => {
      if (part === "entries") {
        return el("div", {}, el("p", {}, "Plan " + p.n + " (" + p.tool + "): " + (p.rows || []).length + " entries"),
          p.rows && p.rows.length ? table(p.rows) : null);
      }
      return el("div", {}, el("p", {}, "Plan " + p.n + " (" + p.tool + "): " +
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
      plans(s, "entries"),
      s.reasoning ? el("details", {}, el("summary", {}, "Reasoning (" + s.reasoning.length.toLocaleString() + " characters)"), el("pre", {}, s.reasoning)) : null];
    const back = calls.filter((c) => c.result);
    const answered = [el("h4", {}, "What the environment answered"),
      back.map((c) => [el("div", { class: "muted" }, c.name + (c.ok ? "" : " (error)")), el("pre", { class: c.ok ? null : "err" }, c.result)]),
      back.length ? null : el("p", { class: "muted" }, "Nothing came back in this turn."), plans(s, "verdicts")];
    return [el("p", { class: "muted" }, turnLine(s)), el("div", { class: "pair textstep" }, el("div", {}, sent), el("div", {}, answered))];
  }

  // The messages of one page of the transcript, those of turn `turn` marked.
  function messages(msgs, turn) {
    return msgs.map((m) => {
      const head = [{ system: "System", user: "User", assistant: "Assistant", tool: "Tool" }[m.role] || m.role];
      if (m.role === "tool") head.push((m.name || "?") + (m.call_id ? " · " + m.call_id : "") + (m.error ? " · error" : ""));
      head.push("turn " + m.turn);
      if (m.stop) head.push("stop " + m.stop);
      if (typeof m.latency_s === "number") head.push(m.latency_s.toFixed(2) + " s");
      if (m.usage && (m.usage.input || m.usage.output)) head.push((m.usage.input || 0) + " in / " + (m.usage.output || 0) + " out");
      return el("div", { class: m.turn === turn ? "msg now" : "msg", "data-turn": m.turn },
        el("div", {}, el("span", { class: "role" }, head.join(" · ")), m.note ? el("em", { class: "muted" }, " · " + m.note) : null),
        m.text ? el("pre", {}, m.text) : null,
        m.reasoning ? el("details", {}, el("summary", {}, "Reasoning"), el("pre", {}, m.reasoning)) : null,
        (m.calls || []).map((line) => el("pre", {}, "→ " + line)),
        (m.images || []).map((img, j) => img.src
          ? el("figure", {}, el("img", { src: img.src, alt: "image " + (j + 1), loading: "lazy", decoding: "async", onclick: () => EK.enlarge(img.src) }),
            el("figcaption", {}, "Image " + (j + 1) + (img.pruned ? " · " + img.pruned : "")))
          : el("p", { class: "muted" }, "Image " + (j + 1) + ": not stored")));
    });
  }

  const FILM = 12;  // thumbnails in a page of the filmstrip (the part size is a multiple of it)
  const TURNS = 4;  // turns in a page of the transcript, as the viewer shows them
  const AHEAD = 8;  // a step this close to its part's end loads the next part (and the start, the one before)

  // One episode's page: built once, then `go(pos)` changes what a step changes.
  function episodePage(app, id, ep, wanted, flag) {
    const last = ep.n_steps - 1, P = ep.part_size;
    const v = { pos: null, step: null, film: null, tpage: null, tturn: undefined, preloaded: [] };
    const prev = el("button", { onclick: () => go(v.pos - 1), title: "Previous step (← key)" }, "◀ Previous");
    const next = el("button", { onclick: () => go(v.pos + 1), title: "Next step (→ key)" }, "Next ▶");
    const range = el("input", { type: "range", min: 0, max: Math.max(0, last), "aria-label": "step",
      onchange: (e) => go(parseInt(e.target.value, 10)) });
    const where = el("span", { class: "where" });
    const img = el("img", { alt: "", onclick: () => v.step && EK.enlarge(v.step.frame, v.step.marks) });
    const shot = el("div", { class: "shot" }, img);
    const caption = el("figcaption", {});
    const panel = el("div", { class: "panel", id: "panel" });
    const body = ep.pictures
      ? el("div", { class: ep.target ? "stepview" : "stepview notarget" }, ep.target ? EK.picture(ep.target, "Target") : null,
        el("figure", { id: "frame" }, shot, caption), panel)
      : el("div", {});
    const strip = el("div", { class: "film" });
    const tnav = el("div", { class: "tnav" });
    const tbox = el("div", { id: "transcript" });
    const flagged = flag ? el("p", { class: "flag", id: "flag" }) : null;  // opened from Why: the scanner's mark
    app.replaceChildren(header(ep), el("div", { class: "steps" }, prev, next, range, where), flagged,
      el("div", { id: "body" }, body, ep.pictures ? el("div", { class: "filmrow" }, strip,
        ep.render ? EK.picture(ep.render, "Final render") : null) : null),
      el("h3", {}, "Transcript"), ep.reconstructed ? el("p", { class: "muted" }, "Rebuilt from the record (it keeps " +
        "no transcript): the opening message and the prompt the model saw are not in it; tool results are as recorded (capped).") : null,
      tnav, tbox);
    EK.onKeys((d) => go(v.pos + d));

    // The turn whose messages a step marks: its own; the opening's at the start; none after the last step.
    const marked = (s) => (s.turn !== undefined ? s.turn : s.end ? null : 0);
    const label = (p) => (p === last && ep.ends_on_screen ? "End (step " + p + " of " + last + ")" : "Step " + p + " of " + last);

    function go(p) {
      p = Math.min(Math.max(p, 0), last);
      if (p === v.pos || isNaN(p)) return;
      v.pos = p;
      EK.mark("#/ep/" + id + "/" + p);
      prev.disabled = p <= 0;
      next.disabled = p >= last;
      range.value = String(p);
      const part = EK.loaded(id, Math.floor(p / P));
      if (part) show(part.steps[p % P]);
      else {
        where.textContent = label(p) + " …";
        EK.piece(id, Math.floor(p / P)).then((got) => { if (got && v.pos === p) show(got.steps[p % P]); });
      }
      ahead(p);
    }

    function show(s) {
      const p = v.pos;
      v.step = s;
      where.textContent = label(p);
      if (ep.pictures) {
        picture(s);
        panel.replaceChildren(...stepDetail(ep, s));
        film(p);
      } else body.replaceChildren(...textStep(ep, s));
      const turn = s.turn !== undefined ? s.turn : s.end ? ep.last_turn : 0;
      if (turn !== v.tturn) {  // the step moved to another turn: the transcript follows it
        v.tturn = turn;
        transcript(Math.floor(turn / TURNS));
      }
      if (flagged) flagMark(s);
      const now = marked(s);
      tbox.querySelectorAll(".msg").forEach((m) => m.classList.toggle("now", Number(m.dataset.turn) === now));
    }

    // Which scanner opened the episode and, on a step it points to, that it fired there with its evidence
    // (elsewhere, the way back to its step).
    function flagMark(s) {
      const here = s.turn !== undefined && flag.steps.includes(s.turn);
      const back = flag.pos === null || flag.pos === undefined ? null
        : el("button", { onclick: () => go(flag.pos) }, "Go to step " + flag.pos);
      const said = here ? [" fired at this step: " + flag.evidence]
        : [" (" + flag.phrase + ") points to turn " + flag.steps.join(", ") + " ", ...(back ? [back] : [])];
      flagged.replaceChildren(el("b", {}, "⚑ " + flag.name), ...said);
      flagged.classList.toggle("now", here);
    }

    // The step's picture, its marks drawn over it once it is decoded (never over the picture before).
    function picture(s) {
      shot.querySelectorAll("svg").forEach((x) => x.remove());
      img.hidden = !s.frame;
      if (s.frame && img.getAttribute("src") !== s.frame) img.src = s.frame;
      img.alt = s.caption;
      caption.textContent = s.frame ? s.caption + (s.marks ? " · actions marked" : "") : s.caption + ": none";
      if (s.frame && s.marks) {
        const put = () => { if (v.step === s && !shot.querySelector("svg")) shot.appendChild(EK.marksSvg(s.marks)); };
        img.decode().then(put, put);
      }
    }

    // The filmstrip's page holding step `p` (drawn again only when the step leaves it), the step's marked.
    function film(p) {
      const start = Math.floor(p / FILM) * FILM;
      if (v.film !== start) {
        v.film = start;
        const part = EK.loaded(id, Math.floor(start / P));
        const steps = part ? part.steps.slice(start % P, start % P + FILM) : [];
        strip.replaceChildren(...steps.map((s, j) => el("button", { "data-pos": start + j, title: s.caption || "step " + s.index,
          onclick: () => go(start + j) }, s.frame ? el("img", { src: s.frame, alt: "step " + s.index, loading: "lazy", decoding: "async" })
          : el("span", { class: "none" }, "—"), s.end ? "end" : String(s.index))));
      }
      strip.querySelectorAll("button").forEach((b) => b.classList.toggle("on", Number(b.dataset.pos) === p));
    }

    // Page `page` of the transcript (TURNS turns), read from the part holding its turns.
    function transcript(page) {
      const pages = Math.floor(ep.last_turn / TURNS) + 1;
      page = Math.min(Math.max(page, 0), pages - 1);
      v.tpage = page;
      if (!ep.transcript) { tbox.replaceChildren(el("p", { class: "muted" }, "No transcript.")); return; }
      const lo = page * TURNS, hi = Math.min(lo + TURNS - 1, ep.last_turn);
      tnav.replaceChildren(pages > 1 ? el("div", { class: "steps" },
        el("button", { disabled: page <= 0, onclick: () => transcript(page - 1) }, "◀ Earlier turns"),
        el("button", { disabled: page >= pages - 1, onclick: () => transcript(page + 1) }, "Later turns ▶"),
        el("span", { class: "muted" }, "Turns " + lo + "–" + hi + " of " + ep.last_turn)) : "");
      EK.piece(id, Math.floor(lo / P)).then((part) => {
        if (v.tpage !== page) return;
        const msgs = (part ? part.messages : []).filter((m) => Math.floor(Math.max(m.turn, 0) / TURNS) === page);
        tbox.replaceChildren(...messages(msgs, v.step ? marked(v.step) : null));
      });
    }

    // Near a part's end (or start) the next (or previous) part is loaded; the next pictures are decoded.
    function ahead(p) {
      const k = Math.floor(p / P), off = p % P;
      if (off >= P - AHEAD && (k + 1) * P < ep.n_steps) EK.piece(id, k + 1);
      if (off < AHEAD && k > 0) EK.piece(id, k - 1);
      for (const q of [p + 1, p + 2, p - 1]) {
        const part = EK.loaded(id, Math.floor(q / P));
        const s = part && q >= 0 && part.steps[q % P];
        if (!s || !s.frame || v.preloaded.includes(s.frame)) continue;
        const im = new Image();
        im.src = s.frame;
        im.decode().catch(() => {});
        v.preloaded = [...v.preloaded.slice(-7), s.frame];
      }
    }

    go(wanted === undefined || isNaN(wanted) ? ep.first || 0 : wanted);
  }

  function draw(app, args) {
    const [id, step] = args;
    const flag = state.flag && state.flag.id === id ? state.flag : null;
    state.flag = null;
    app.replaceChildren(el("p", { class: "muted" }, "Loading the episode…"));
    EK.head(id).then((ep) => {
      if (!ep) { app.replaceChildren(el("p", { class: "err" }, "No such episode.")); return; }
      episodePage(app, id, ep, step, flag);
    });
  }

  EK.stepDetail = stepDetail;
  EK.textStep = textStep;
  EK.controls = controls;
  state.views.episode = draw;
})();
