// tilenb CUDA view: the generated CUDA C++, highlighted (Pygments token classes from Python),
// beside the tile-language source. Every generated line that came from a tile line carries a
// link to it: hovering a CUDA line lights its tile line; focusing or clicking a tile line lights
// and scrolls to the CUDA lines made from it. Keys: Up/Down move within a pane, Enter follows
// the link to the other pane.
//
// Model traits read: kernel, cuda, origin, lines, note.

function roving(items, onEnter) {
  let cur = items[0];
  if (cur) cur.setAttribute("tabindex", "0");
  const go = (n) => {
    if (!n) return;
    if (cur) cur.setAttribute("tabindex", "-1");
    cur = n;
    n.setAttribute("tabindex", "0");
    n.focus();
  };
  items.forEach((n, i) => {
    n.addEventListener("keydown", (e) => {
      if (e.key === "ArrowDown") { e.preventDefault(); go(items[Math.min(items.length - 1, i + 1)]); }
      else if (e.key === "ArrowUp") { e.preventDefault(); go(items[Math.max(0, i - 1)]); }
      else if (e.key === "Home") { e.preventDefault(); go(items[0]); }
      else if (e.key === "End") { e.preventDefault(); go(items[items.length - 1]); }
      else if (e.key === "Enter" || e.key === " ") { e.preventDefault(); onEnter(n); }
    });
    n.addEventListener("focus", () => { if (cur !== n) { if (cur) cur.setAttribute("tabindex", "-1"); cur = n; n.setAttribute("tabindex", "0"); } });
  });
  return go;
}

// Token groups (Pygments short classes) whose colour comes from the theme.
const TOKENS = { keyword: ["k", "kd", "kr", "kn"], type: ["kt"], comment: ["c1", "cm", "c", "cs"], meta: ["cp", "cpf"],
  string: ["s", "s1", "s2", "sc"], number: ["m", "mi", "mf", "mh", "il"], def: ["nf"], operator: ["o"], builtin: ["nb", "bp"] };

function rgba(css) {
  const m = /rgba?\(([^)]+)\)/.exec(css || "");
  if (!m) return null;
  const p = m[1].split(/[ ,/]+/).filter(Boolean).map(Number);
  return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1];
}

function luminance([r, g, b]) {
  const f = (c) => { c /= 255; return c <= 0.03928 ? c / 12.92 : Math.pow((c + 0.055) / 1.055, 2.4); };
  return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
}

function contrast(a, b) {
  const x = luminance(a), y = luminance(b);
  return (Math.max(x, y) + 0.05) / (Math.min(x, y) + 0.05);
}

const over = (c, bg) => [0, 1, 2].map((i) => c[i] * c[3] + bg[i] * (1 - c[3]));

// The opaque colour behind `node`: the first ancestor with a background, composited down.
function backdrop(node) {
  const layers = [];
  for (let n = node; n && n.nodeType === 1; n = n.parentElement) {
    const c = rgba(getComputedStyle(n).backgroundColor);
    if (c && c[3] > 0) { layers.push(c); if (c[3] >= 1) break; }
  }
  let bg = [255, 255, 255];
  for (const c of layers.reverse()) bg = over(c, bg);
  return bg;
}

// Every token colour at 4.5:1 or more against the code's background: a theme colour that falls
// short (JupyterLab's dark comments are about 4.2:1) is mixed toward the text colour until it
// passes. Run again when the front end's theme changes.
function ensureContrast(root, pane) {
  for (const g of Object.keys(TOKENS)) root.style.removeProperty(`--tn-tok-${g}`);
  const fg0 = rgba(getComputedStyle(pane).color) || [0, 0, 0, 1];
  for (const [g, classes] of Object.entries(TOKENS)) {
    const span = pane.querySelector(classes.map((c) => `span.${c}`).join(","));
    if (!span) continue;
    const c0 = rgba(getComputedStyle(span).color);
    if (!c0) continue;
    // what is behind the token, on a plain line and on a lit one (hovered, or linked to the
    // hovered tile line: a tinted background); the colour must pass on both
    const line = span.closest(".tn-cline");
    const bg = backdrop(span);
    let lit = bg;
    if (line && !line.classList.contains("tn-lit")) {
      line.classList.add("tn-lit");
      lit = backdrop(span);
      line.classList.remove("tn-lit");
    }
    const fg = over(fg0, bg);
    const worst = (c) => Math.min(contrast(c, bg), contrast(c, lit));
    const base = over(c0, bg);
    let c = base;
    for (let t = 0.1; worst(c) < 4.5 && t <= 1.0001; t += 0.1) c = base.map((v, i) => v + (fg[i] - v) * t);
    if (c !== base) root.style.setProperty(`--tn-tok-${g}`, `rgb(${c.map((v) => Math.round(v)).join(", ")})`);
  }
}

function scrollInto(pane, node) {
  const top = node.offsetTop - pane.offsetTop;
  if (top < pane.scrollTop || top > pane.scrollTop + pane.clientHeight - 20) pane.scrollTop = Math.max(0, top - 40);
}

function draw(model, el) {
  el.textContent = "";
  const root = viewRoot("tn-cuda");
  el.append(root);
  const cuda = model.get("cuda") || [];
  const origin = model.get("origin") || [];
  const lines = model.get("lines") || [];
  const labels = new Map(lines.map(([l, lab]) => [l, String(lab)]));
  root.append(h("h4", { class: "tn-title", text: `Generated CUDA of ${model.get("kernel")}` },
    h("span", { class: "tn-sub", text: ` · ${cuda.length} lines` })));
  if (model.get("note")) root.append(h("div", { class: "tn-note", text: model.get("note") }));
  if (!cuda.length) return;
  const panes = h("div", { class: "tn-panes" });
  root.append(panes);
  const cpane = h("div", { class: "tn-cpane", role: "list", "aria-label": "generated CUDA C++" });
  const tpane = h("div", { class: "tn-tpane", role: "list", "aria-label": "tile-language source" });
  panes.append(cpane, tpane);

  const cnodes = [];
  const byTile = new Map();
  cuda.forEach((toks, i) => {
    const o = origin[i] || 0;
    const lab = o ? (labels.get(o) || String(o)) : "";
    const code = h("code", { class: "tn-ccode" });
    for (const [cls, text] of toks) code.append(cls ? h("span", { class: cls, text }) : document.createTextNode(text));
    if (!toks.length) code.append(" ");
    const n = h("div", { class: "tn-cline", role: "listitem", tabindex: -1, "data-origin": o,
      "aria-label": `CUDA line ${i + 1}${o ? `, from tile line ${lab}` : ""}: ${toks.map((t) => t[1]).join("")}` },
      h("span", { class: "tn-cno", "aria-hidden": "true", text: String(i + 1) }),
      h("span", { class: "tn-clink", "aria-hidden": "true", text: o ? `L${lab}` : "" }), code);
    cpane.append(n);
    cnodes.push(n);
    if (o) { if (!byTile.has(o)) byTile.set(o, []); byTile.get(o).push(n); }
  });
  const tnodes = new Map();
  for (const [l, lab, text] of lines) {
    const n = h("div", { class: "tn-tline" + (byTile.has(l) ? " tn-linked" : ""), role: "listitem", tabindex: -1, "data-line": l,
      "aria-label": `tile line ${lab}: ${String(text).trim()}${byTile.has(l) ? `; ${byTile.get(l).length} CUDA lines` : ""}` },
      h("span", { class: "tn-tno", "aria-hidden": "true", text: String(lab) }), h("code", { text: String(text) || " " }));
    tpane.append(n);
    tnodes.set(l, n);
  }
  let lit = [];
  const clear = () => { for (const n of lit) n.classList.remove("tn-lit"); lit = []; };
  const lightTile = (o) => {
    clear();
    const t = tnodes.get(o);
    if (t) { t.classList.add("tn-lit"); lit.push(t); scrollInto(tpane, t); }
    for (const c of byTile.get(o) || []) { c.classList.add("tn-lit"); lit.push(c); }
  };
  const lightFromTile = (l) => {
    lightTile(l);
    const first = (byTile.get(l) || [])[0];
    if (first) scrollInto(cpane, first);
  };
  const goC = roving(cnodes, (n) => { const t = tnodes.get(Number(n.dataset.origin)); if (t) goT(t); });
  const tlist = [...tnodes.values()];
  const goT = roving(tlist, (n) => { const c = (byTile.get(Number(n.dataset.line)) || [])[0]; if (c) goC(c); });
  for (const n of cnodes) {
    const o = Number(n.dataset.origin);
    n.addEventListener("mouseenter", () => (o ? lightTile(o) : clear()));
    n.addEventListener("focus", () => (o ? lightTile(o) : clear()));
    n.addEventListener("click", () => { const t = tnodes.get(o); if (t) goT(t); });
  }
  for (const [l, n] of tnodes) {
    n.addEventListener("mouseenter", () => lightFromTile(l));
    n.addEventListener("focus", () => lightFromTile(l));
    n.addEventListener("click", () => { const c = (byTile.get(l) || [])[0]; if (c) goC(c); });
  }
  root.append(h("p", { class: "tn-sub tn-help", text: "Hover a line to see where it comes from; click or press Enter to jump to the other side; ↑/↓ move within a pane." }));

  // Open on the kernel, not the prelude of helpers before it: the first line of code that came
  // from a tile line, or else the __global__ signature. Done once the pane has a size (the view
  // may be drawn while hidden), and the colours checked against the background then.
  const firstKernel = Math.max(0, origin.findIndex((o) => o > 0));
  const signature = cnodes.findIndex((n, i) => i <= firstKernel && /__global__/.test(n.textContent));
  const start = cnodes[signature >= 0 ? signature : firstKernel];
  let placed = false;
  const place = () => {
    if (placed || !cpane.clientHeight) return;
    placed = true;
    if (start) cpane.scrollTop = Math.max(0, start.offsetTop - cpane.offsetTop - 4);
    const goTo = cnodes.indexOf(start);
    if (goTo > 0) { cnodes[0].setAttribute("tabindex", "-1"); start.setAttribute("tabindex", "0"); }
    ensureContrast(root, cpane);
  };
  if (typeof ResizeObserver !== "undefined") {
    const ro = new ResizeObserver(() => { place(); if (placed) ro.disconnect(); });
    ro.observe(cpane);
  }
  requestAnimationFrame(place);
  root.tnStart = start;
  // the front ends switch themes by changing attributes and classes of <body>
  // (and load the theme's style sheet a moment later: check again then)
  const recheck = () => { if (root.isConnected) ensureContrast(root, cpane); };
  const mo = new MutationObserver(() => {
    if (!root.isConnected) { mo.disconnect(); return; }
    recheck(); setTimeout(recheck, 300); setTimeout(recheck, 1500);
  });
  mo.observe(document.body, { attributes: true, attributeFilter: ["class", "data-jp-theme-light", "data-jp-theme-name"] });
}

function render({ model, el }) {
  const redraw = () => draw(model, el);
  redraw();
  const keys = ["cuda", "origin", "lines", "note", "kernel"];
  for (const k of keys) model.on(`change:${k}`, redraw);
  return () => {
    for (const k of keys) model.off(`change:${k}`, redraw);
    el.textContent = "";
  };
}

export default { render };
