// Read a page back as the raw facts the html surface grades: the page background, and every painted box,
// SVG shape, line and run of text with its geometry and colours, bottom to top. `dom.py` turns these into
// canvas elements; this script only measures. Colours come back as [r, g, b, a] with the element's
// opacity (and its ancestors') folded into a.
() => {
  const SKIP = new Set(["SCRIPT", "STYLE", "HEAD", "META", "TITLE", "LINK", "NOSCRIPT", "TEMPLATE", "BR",
                        "WBR", "IMG", "CANVAS", "VIDEO", "AUDIO", "IFRAME", "OBJECT", "EMBED", "PICTURE",
                        "DEFS", "CLIPPATH", "MASK", "PATTERN", "MARKER", "SYMBOL", "LINEARGRADIENT",
                        "RADIALGRADIENT", "FILTER"]);
  const MAX_ITEMS = 400;
  const W = window.innerWidth, H = window.innerHeight;

  // Any CSS colour syntax (rgb, hsl, oklch, names...) resolves the same way: paint one pixel, read it.
  const probe = document.createElement("canvas");
  probe.width = probe.height = 1;
  const ctx = probe.getContext("2d", { willReadFrequently: true });
  const cache = new Map();
  function rgba(css) {
    if (!css || css === "none" || css === "transparent") return null;
    if (cache.has(css)) return cache.get(css);
    ctx.clearRect(0, 0, 1, 1);
    ctx.fillStyle = "rgba(0, 0, 0, 0)";
    ctx.fillStyle = css;
    ctx.fillRect(0, 0, 1, 1);
    const d = ctx.getImageData(0, 0, 1, 1).data;
    const v = d[3] === 0 ? null : [d[0], d[1], d[2], d[3] / 255];
    cache.set(css, v);
    return v;
  }
  function faded(c, alpha) {
    return c && c[3] * alpha > 0.01 ? [c[0], c[1], c[2], c[3] * alpha] : null;
  }
  const opacities = new Map();
  function opacity(el) {
    if (!el || el === document.documentElement) return 1;
    if (opacities.has(el)) return opacities.get(el);
    const v = parseFloat(getComputedStyle(el).opacity) * opacity(el.parentElement);
    opacities.set(el, v);
    return v;
  }
  function radius(value, w, h) {
    const parts = value.split(" ").filter(Boolean);
    const one = (p, size) => (p.endsWith("%") ? parseFloat(p) / 100 * size : parseFloat(p) || 0);
    return [one(parts[0] || "0", w), one(parts[1] || parts[0] || "0", h)];
  }
  // An ellipse is a box whose every corner is rounded by 50% or more: a px radius, however large, is a
  // rounded rect (CSS then draws a pill, as the canvas does for a rect with a large radius).
  function elliptical(value) {
    const parts = value.split(" ").filter(Boolean);
    return parts.length > 0 && parts.every((p) => p.endsWith("%") && parseFloat(p) >= 50);
  }
  function onScreen(x0, y0, x1, y1) {
    return x1 > 0 && y1 > 0 && x0 < W && y0 < H && x1 - x0 > 0.1 && y1 - y0 > 0.1;
  }
  function collapse(text) {
    return text.replace(/\s+/g, " ").trim();
  }

  const items = [];
  const owners = [];

  function box(el, cs, alpha) {
    const fill = faded(rgba(cs.backgroundColor), alpha);
    const solid = cs.borderTopStyle !== "none" && cs.borderTopStyle !== "hidden";
    const bw = solid ? parseFloat(cs.borderTopWidth) || 0 : 0;
    const stroke = bw > 0 ? faded(rgba(cs.borderTopColor), alpha) : null;
    if (!fill && !stroke) return;
    const r = el.getBoundingClientRect();
    if (!onScreen(r.left, r.top, r.right, r.bottom)) return;
    let w = el.offsetWidth || r.width, h = el.offsetHeight || r.height, angle = 0;
    if (cs.transform && cs.transform !== "none") {
      const m = new DOMMatrixReadOnly(cs.transform);
      angle = Math.atan2(m.b, m.a) * 180 / Math.PI;
      w *= Math.hypot(m.a, m.b);
      h *= Math.hypot(m.c, m.d);
    }
    const corners = ["TopLeft", "TopRight", "BottomRight", "BottomLeft"].map((c) => cs[`border${c}Radius`]);
    items.push({ type: "box", cx: r.left + r.width / 2, cy: r.top + r.height / 2, w, h, angle, fill,
                 stroke, stroke_width: stroke ? bw : 0, radius: Math.min(...radius(corners[0], w, h)),
                 ellipse: corners.every(elliptical) });
    owners.push(el);
  }

  function text(el, cs, alpha) {
    const nodes = [...el.childNodes].filter((n) => n.nodeType === Node.TEXT_NODE && n.data.trim());
    if (!nodes.length) return;
    const colour = faded(rgba(cs.color), alpha);
    const size = parseFloat(cs.fontSize);
    if (!colour || !(size > 0)) return;
    const range = document.createRange();
    range.setStartBefore(nodes[0]);
    range.setEndAfter(nodes[nodes.length - 1]);
    const first = [...range.getClientRects()].find((q) => q.width > 0 && q.height > 0);
    const all = range.getBoundingClientRect();
    if (!first || !onScreen(all.left, all.top, all.right, all.bottom)) return;
    const words = collapse(nodes.map((n) => n.data).join(" "));
    items.push({ type: "text", x: first.left, y: first.top, w: all.width, h: first.height, text: words,
                 size, fill: colour });
    owners.push(el);
  }

  function svg(el, cs, alpha) {
    const tag = el.tagName.toLowerCase();
    const ctm = el.getScreenCTM && el.getScreenCTM();
    if (!ctm) return;
    const scale = Math.hypot(ctm.a, ctm.b);
    const at = (x, y) => new DOMPoint(x, y).matrixTransform(ctm);
    const fill = faded(rgba(cs.fill), alpha * parseFloat(cs.fillOpacity));
    const sw = (parseFloat(cs.strokeWidth) || 0) * scale;
    const stroke = sw > 0 ? faded(rgba(cs.stroke), alpha * parseFloat(cs.strokeOpacity)) : null;
    if (tag === "line") {
      const a = at(el.x1.baseVal.value, el.y1.baseVal.value), b = at(el.x2.baseVal.value, el.y2.baseVal.value);
      if (!stroke || !onScreen(Math.min(a.x, b.x) - sw, Math.min(a.y, b.y) - sw, Math.max(a.x, b.x) + sw,
                               Math.max(a.y, b.y) + sw)) return;
      items.push({ type: "line", x1: a.x, y1: a.y, x2: b.x, y2: b.y, stroke, stroke_width: sw });
      owners.push(el);
      return;
    }
    if (!["rect", "circle", "ellipse", "text"].includes(tag)) return;
    const bb = el.getBBox();
    const pts = [at(bb.x, bb.y), at(bb.x + bb.width, bb.y), at(bb.x, bb.y + bb.height),
                 at(bb.x + bb.width, bb.y + bb.height)];
    const x0 = Math.min(...pts.map((p) => p.x)), x1 = Math.max(...pts.map((p) => p.x));
    const y0 = Math.min(...pts.map((p) => p.y)), y1 = Math.max(...pts.map((p) => p.y));
    if (!onScreen(x0, y0, x1, y1)) return;
    if (tag === "text") {
      const words = collapse(el.textContent);
      const size = parseFloat(cs.fontSize) * scale;
      if (!words || !fill || !(size > 0)) return;
      items.push({ type: "text", x: x0, y: y0, w: x1 - x0, h: y1 - y0, text: words, size, fill });
    } else {
      if (!fill && !stroke) return;
      const rx = tag === "rect" ? (el.rx.baseVal.value || el.ry.baseVal.value || 0) * scale : 0;
      items.push({ type: "box", cx: (x0 + x1) / 2, cy: (y0 + y1) / 2, w: x1 - x0, h: y1 - y0, angle: 0, fill,
                   stroke, stroke_width: stroke ? sw : 0, radius: rx, ellipse: tag !== "rect" });
    }
    owners.push(el);
  }

  // Baseline stacking: document order, siblings sorted by the layer CSS paints them in (in-flow content,
  // then positioned, by z-index). Where two items overlap, the browser's own hit testing has the last word.
  function layer(el) {
    const cs = getComputedStyle(el);
    const z = cs.zIndex === "auto" ? null : parseInt(cs.zIndex, 10);
    if (z !== null && (cs.position !== "static" || el.parentElement && getComputedStyle(el.parentElement)
        .display.includes("flex"))) return z;
    return cs.position !== "static" ? 0 : -0.5;
  }
  const keys = new Map();
  function key(el) {
    if (keys.has(el)) return keys.get(el);
    const parent = el.parentElement;
    const own = [layer(el), parent ? [...parent.children].indexOf(el) : 0];
    const k = parent && parent !== document.documentElement ? [...key(parent), own] : [own];
    keys.set(el, k);
    return k;
  }
  function compare(a, b) {
    for (let i = 0; i < Math.min(a.length, b.length); i++) {
      if (a[i][0] !== b[i][0]) return a[i][0] - b[i][0];
      if (a[i][1] !== b[i][1]) return a[i][1] - b[i][1];
    }
    return a.length - b.length;
  }

  const bodyStyle = getComputedStyle(document.body);
  text(document.body, bodyStyle, opacity(document.body));
  for (const el of document.body.querySelectorAll("*")) {
    if (items.length >= MAX_ITEMS) break;
    if (SKIP.has(el.tagName.toUpperCase()) || el.closest("defs, clipPath, mask, pattern, marker, symbol")) continue;
    const cs = getComputedStyle(el);
    if (cs.display === "none" || cs.visibility !== "visible") continue;
    const alpha = opacity(el);
    if (alpha <= 0.01) continue;
    if (el instanceof SVGElement) {
      if (el.tagName.toLowerCase() !== "svg") svg(el, cs, alpha);
      continue;
    }
    if (!el.getClientRects().length) continue;
    box(el, cs, alpha);
    text(el, cs, alpha);
  }

  const order = items.map((_, i) => i);
  const rank = new Map(order.slice().sort((i, j) => compare(key(owners[i]), key(owners[j])) || i - j)
                              .map((i, r) => [i, r]));
  const above = items.map(() => new Set());
  if (items.length <= 150) {
    const force = document.createElement("style");
    force.textContent = "* { pointer-events: auto !important; }";
    document.head.append(force);
    const bounds = items.map((it) => it.type === "box" ? [it.cx - it.w / 2, it.cy - it.h / 2, it.cx + it.w / 2, it.cy + it.h / 2]
      : it.type === "line" ? [Math.min(it.x1, it.x2), Math.min(it.y1, it.y2), Math.max(it.x1, it.x2), Math.max(it.y1, it.y2)]
        : [it.x, it.y, it.x + it.w, it.y + it.h]);
    for (let i = 0; i < items.length; i++) {
      for (let j = i + 1; j < items.length; j++) {
        if (owners[i] === owners[j]) continue;
        const [a, b] = [bounds[i], bounds[j]];
        const x0 = Math.max(a[0], b[0], 0), y0 = Math.max(a[1], b[1], 0);
        const x1 = Math.min(a[2], b[2], W - 1), y1 = Math.min(a[3], b[3], H - 1);
        if (x1 < x0 || y1 < y0) continue;
        for (const [fx, fy] of [[0.5, 0.5], [0.25, 0.25], [0.75, 0.75], [0.25, 0.75], [0.75, 0.25]]) {
          const hits = document.elementsFromPoint(x0 + (x1 - x0) * fx, y0 + (y1 - y0) * fy);
          const hi = hits.indexOf(owners[i]), hj = hits.indexOf(owners[j]);
          if (hi < 0 || hj < 0) continue;
          if (hi < hj) above[j].add(i); else above[i].add(j);
          break;
        }
      }
    }
    force.remove();
  }
  // Kahn's order: an item comes after everything hit testing put below it, ties broken by the baseline.
  const below = items.map(() => 0);
  above.forEach((set) => set.forEach((k) => { below[k] += 1; }));
  const result = [];
  const done = new Set();
  while (result.length < items.length) {
    let pick = -1;
    for (const i of order) {
      if (!done.has(i) && below[i] === 0 && (pick < 0 || rank.get(i) < rank.get(pick))) pick = i;
    }
    if (pick < 0) pick = order.filter((i) => !done.has(i)).sort((i, j) => rank.get(i) - rank.get(j))[0];
    done.add(pick);
    result.push(items[pick]);
    above[pick].forEach((k) => { below[k] -= 1; });
  }

  const bodyBg = rgba(bodyStyle.backgroundColor);
  const rootBg = rgba(getComputedStyle(document.documentElement).backgroundColor);
  return { width: W, height: H, background: bodyBg || rootBg || [255, 255, 255, 1], items: result };
}
