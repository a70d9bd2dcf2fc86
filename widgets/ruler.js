// tilenb lifetime ruler: one row per source line; each region of shared memory alive after that
// line (a tile, or what the lowering adds: mma scratch, staging, rings and their mbarriers,
// cluster slots, reduction partials; ruler entries with a "kind") is a bar at its byte offset,
// as wide as the bytes it holds. The dashed line is the kernel's footprint (every shared byte it
// declares), the right edge the budget. Below, how each loop is lowered (wgmma, mma.sync, ...).
// Hover or focus a bar to name the region; Up/Down move between lines, Left/Right between bars.
//
// Model traits read: kernel, footprint, budget, tiles, ruler, loops, lines, note.

const BAR_PX = 380;
const ROW_PX = 18;
const PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1",
  "#ff9da7", "#9c755f", "#8cd17d", "#499894", "#d37295"];

const fmtBytes = (n) => `${Number(n).toLocaleString("en-US")} B`;
// one format: KB with one decimal, the ".0" dropped (18 KB, 18.5 KB; never "18.0 KB" beside "18 KB")
const kb = (n) => (n >= 1024 ? `${Number((n / 1024).toFixed(1))} KB` : `${n} B`);

function draw(model, el, zoom, onZoom) {
  el.textContent = "";
  const root = viewRoot("tn-ruler");
  el.append(root);
  const lines = model.get("lines") || [];
  const label = (l) => { for (const [n, lab] of lines) if (n === l) return String(lab); return String(l); };
  const text = (l) => { for (const [n, , t] of lines) if (n === l) return String(t); return ""; };
  const footprint = model.get("footprint") || 0, budget = model.get("budget") || 0;
  const tiles = model.get("tiles") || [];
  const ruler = model.get("ruler") || [];
  const colour = new Map(tiles.map((t, i) => [t.name, PALETTE[i % PALETTE.length]]));
  const info = new Map(tiles.map((t) => [t.name, t]));

  const pct = budget ? ` (${(100 * footprint / budget).toFixed(1)}%)` : "";
  root.append(h("h4", { class: "tn-title", text: `Shared memory of ${model.get("kernel")}` },
    h("span", { class: "tn-sub", text: ` · footprint ${fmtBytes(footprint)} of ${fmtBytes(budget)} ` +
      `${budget === 49152 ? "static budget" : "dynamic shared-memory limit"}${pct}` })));
  if (model.get("note")) root.append(h("div", { class: "tn-note", text: model.get("note") }));
  if (footprint > budget) root.append(h("div", { class: "tn-note", text: `Over budget by ${fmtBytes(footprint - budget)}.` }));

  const scaleTo = zoom ? Math.max(footprint, 16) : Math.max(budget, footprint, 16);
  const px = (b) => (b / scaleTo) * BAR_PX;
  const chips = h("div", { class: "tn-chips", role: "group", "aria-label": "scale" });
  for (const [z, t] of [[false, `scale: whole budget (${kb(budget)})`], [true, `scale: footprint (${kb(footprint)})`]]) {
    const b = h("button", { class: "tn-chip", type: "button", "aria-pressed": zoom === z ? "true" : "false", text: t, "data-zoom": String(z) });
    b.addEventListener("click", () => {
      onZoom(z);
      const again = el.querySelector(`button.tn-chip[data-zoom="${z}"]`);   // drawn anew: keep the focus
      if (again) again.focus();
    });
    chips.append(b);
  }
  root.append(chips);

  const grid = h("div", { class: "tn-rgrid", role: "listbox", "aria-label": `live tiles per line of ${model.get("kernel")}; arrow keys move between tiles and lines` });
  root.append(grid);
  // axis
  const axis = s("svg", { width: BAR_PX + 60, height: 18, class: "tn-axis", "aria-hidden": "true" });
  const ticks = 4;
  for (let k = 0; k <= ticks; k++) {
    const b = Math.round((scaleTo * k) / ticks);
    const x = px(b);
    axis.append(s("line", { x1: x + 0.5, x2: x + 0.5, y1: 12, y2: 18, class: "tn-tickline" }));
    const t = s("text", { x: x, y: 10, class: "tn-tick", "text-anchor": k === 0 ? "start" : k === ticks ? "end" : "middle" });
    t.textContent = kb(b);
    axis.append(t);
  }
  grid.append(h("div", { class: "tn-rrow tn-rhead" }, h("span", { class: "tn-rline", text: "line" }),
    h("span", { class: "tn-rcode", text: "source" }), axis));

  const tip = h("div", { class: "tn-tip", hidden: true, role: "tooltip" });
  root.append(tip);
  const segs = [];          // [row index][k] -> svg rect
  ruler.forEach((entry, ri) => {
    const bar = s("svg", { width: BAR_PX + 60, height: ROW_PX, class: "tn-bar" });
    // scaled to the footprint, the budget lies past the drawn width: the track stops at the edge
    bar.append(s("rect", { x: 0, y: 3, width: Math.min(px(budget), BAR_PX), height: ROW_PX - 6, class: "tn-track" }));
    const row = [];
    let total = 0;
    for (const t of entry.tiles || []) {
      total += t.bytes;
      const ti = t.kind ? {} : (info.get(t.name) || {});
      const r = s("rect", { x: px(t.offset), y: 2, width: Math.max(2, px(t.bytes)), height: ROW_PX - 4,
        fill: (!t.kind && colour.get(t.name)) || "#888", class: "tn-seg", tabindex: -1, "data-tile": t.name, "data-line": entry.line });
      r.setAttribute("role", "option");
      r.setAttribute("aria-selected", "false");
      const lifetime = ti.first_line !== undefined ? `, alive lines ${label(ti.first_line)}–${label(ti.last_line)}` : "";
      const desc = `${t.kind ? `${t.kind}: ` : ""}${t.name}${ti.dtype ? `: ${ti.dtype} [${(ti.shape || []).join(", ")}]` : ""}, ${fmtBytes(t.bytes)} at offset ${t.offset}${lifetime}`;
      r.setAttribute("aria-label", `line ${label(entry.line)}: ${t.kind ? "" : "tile "}${desc}`);
      r.dataset.desc = desc;
      bar.append(r);
      if (px(t.bytes) > 24) {
        const tt = s("text", { x: px(t.offset) + 3, y: ROW_PX - 6, class: "tn-segname" });
        tt.textContent = t.name;
        bar.append(tt);
      }
      row.push(r);
    }
    bar.append(s("line", { x1: px(footprint), x2: px(footprint), y1: 0, y2: ROW_PX, class: "tn-fp" }));
    const tot = s("text", { x: Math.min(Math.max(px(budget), px(footprint)), BAR_PX) + 4, y: ROW_PX - 5, class: "tn-total" });
    tot.textContent = kb(total);
    bar.append(tot);
    segs.push(row);
    grid.append(h("div", { class: "tn-rrow", "data-line": entry.line }, h("span", { class: "tn-rline", text: label(entry.line) }),
      // the statement without its trailing comment (the title keeps the whole line)
      h("code", { class: "tn-rcode", title: text(entry.line).trim(), text: text(entry.line).replace(/\s*\/\/.*$/, "").trim() }), bar));
  });
  const regs = tiles.filter((t) => t.space === "registers");
  if (regs.length) {
    root.append(h("p", { class: "tn-sub", text: "In registers (no shared memory): " +
      regs.map((t) => `${t.name} ${t.dtype} [${t.shape.join(", ")}]`).join(", ") }));
  }
  const legend = h("div", { class: "tn-legend" });
  for (const t of tiles.filter((t) => t.space !== "registers")) {
    const sw = h("span", { class: "tn-swatch" });
    sw.style.background = colour.get(t.name);
    legend.append(h("span", { class: "tn-legend-item" }, sw, `${t.name} ${kb(t.bytes)}`));
  }
  root.append(legend);
  const loops = model.get("loops") || [];
  if (loops.length) {
    root.append(h("p", { class: "tn-sub", text: "Loops: " +
      loops.map((lp) => `line ${label(lp.line)} runs on ${lp.lowering === "generic" ? "the generic path" : lp.lowering} (${lp.why})`).join("; ") }));
  }
  root.append(h("p", { class: "tn-sub tn-help", text: "Bars: the bytes each live tile (grey: scratch, stages, slots the compiler adds) holds, at its offset. Dashed line: footprint. Keys: ↑/↓ lines, ←/→ tiles." }));

  const showTip = (r) => {
    tip.textContent = r.dataset.desc;
    tip.hidden = false;
    const box = r.getBoundingClientRect(), base = root.getBoundingClientRect();
    tip.style.left = `${Math.max(0, box.left - base.left)}px`;
    tip.style.top = `${box.bottom - base.top + 4}px`;
    tip.dataset.tile = r.dataset.tile;
  };
  const hideTip = () => { tip.hidden = true; };
  let cur = null;
  const focusSeg = (ri, k) => {
    const r = segs[ri] && segs[ri][k];
    if (!r) return;
    if (cur) { cur.setAttribute("tabindex", "-1"); cur.setAttribute("aria-selected", "false"); }
    cur = r;
    r.setAttribute("tabindex", "0");
    r.setAttribute("aria-selected", "true");
    r.focus();
  };
  // the first bar is the entry point for Tab
  const first = segs.findIndex((row) => row.length);
  if (first >= 0) { cur = segs[first][0]; cur.setAttribute("tabindex", "0"); }
  grid.addEventListener("mouseover", (e) => { if (e.target.classList && e.target.classList.contains("tn-seg")) showTip(e.target); });
  grid.addEventListener("mouseout", (e) => { if (e.target.classList && e.target.classList.contains("tn-seg") && e.target !== document.activeElement) hideTip(); });
  grid.addEventListener("focusin", (e) => { if (e.target.classList && e.target.classList.contains("tn-seg")) showTip(e.target); });
  grid.addEventListener("focusout", hideTip);
  grid.addEventListener("keydown", (e) => {
    const r = e.target;
    if (!r.classList || !r.classList.contains("tn-seg")) return;
    let ri = segs.findIndex((row) => row.includes(r));
    let k = segs[ri].indexOf(r);
    if (e.key === "ArrowRight") k = Math.min(segs[ri].length - 1, k + 1);
    else if (e.key === "ArrowLeft") k = Math.max(0, k - 1);
    else if (e.key === "ArrowDown" || e.key === "ArrowUp") {
      const d = e.key === "ArrowDown" ? 1 : -1;
      let j = ri + d;
      while (j >= 0 && j < segs.length && !segs[j].length) j += d;
      if (j < 0 || j >= segs.length) return;
      const name = r.dataset.tile;
      const same = segs[j].findIndex((x) => x.dataset.tile === name);
      ri = j;
      k = same >= 0 ? same : Math.min(k, segs[j].length - 1);
    } else if (e.key === "Home") { ri = first; k = 0; }
    else return;
    e.preventDefault();
    focusSeg(ri, k);
  });
}

function render({ model, el }) {
  let zoom = false;
  const redraw = () => draw(model, el, zoom, (z) => { zoom = z; redraw(); });
  redraw();
  const keys = ["footprint", "budget", "tiles", "ruler", "loops", "lines", "note", "kernel"];
  for (const k of keys) model.on(`change:${k}`, redraw);
  return () => {
    for (const k of keys) model.off(`change:${k}`, redraw);
    el.textContent = "";
  };
}

export default { render };
