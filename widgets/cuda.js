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
