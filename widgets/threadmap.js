// tilenb thread map: for one copy statement, the tensor slice (global memory) and the tile
// (shared memory) side by side. Each run of elements that one thread moves is drawn in that
// thread's colour: the hue names the warp, the shade the lane. Hovering or focusing a run shows
// its thread, warp, lane, vector width and elements, and lights the same run on the other side.
// Keys on a run: Left/Right step along the rows, Up/Down go to the run above/below,
// Home/End jump to the first/last run. Per-warp coalescing (32-byte sectors against the ideal)
// and bank conflicts (shared-memory wavefronts against the ideal) are in the table below.
// With a profile (`measured`), what Nsight Compute counted over the whole launch stands beside
// the prediction (the analysis' per-CTA figure times the CTAs): for the copy shown, in the
// per-warp table's footer, and for every line in the "measured beside predicted" table; a line
// whose measurement differs from the analysis is flagged with the reason.
//
// Model traits read: kernel, threads, copies, tiles, lines, note, shared, traffic, dot_reads,
// measured, selected (written back).

const WRAP = 64;          // columns per drawn row; longer rows wrap onto several drawn rows
const SIDE_PX = 400;      // width given to each side's grid
const MAX_BANDS = 16;     // a long 1-row strip is cut into at most this many bands (wider ones past that)
const ITEMSIZE = { f64: 8, i64: 8, u64: 8, f32: 4, i32: 4, u32: 4, tf32: 4, f16: 2, bf16: 2,
  i16: 2, u16: 2, i8: 1, u8: 1, bool: 1, fp8: 1, e4m3: 1, e5m2: 1 };

/** The colour of a thread: warps get well-separated hues, lanes shade from dark to light. */
function threadColor(thread) {
  const warp = Math.floor(thread / 32), lane = thread % 32;
  const hue = (warp * 137.508 + 200) % 360;
  const light = 34 + (lane / 31) * 34;
  return `hsl(${hue.toFixed(1)}, 68%, ${light.toFixed(1)}%)`;
}

function plural(n, word) { return `${n} ${word}${n === 1 ? "" : "s"}`; }

function labelOf(model, line) {
  for (const [l, label] of model.get("lines") || []) if (l === line) return String(label);
  return String(line);
}

function textOf(model, line) {
  for (const [l, , text] of model.get("lines") || []) if (l === line) return String(text).trim();
  return "";
}

// tileDtype: the copy's tile's dtype; where it differs from the tensor's, both are named
function copyTitle(c, tileDtype) {
  if (c.is_view) return `let ${c.tile || "view"} views ${c.tensor}: no tile is made`;
  const both = !!(tileDtype && c.tensor_dtype && tileDtype !== c.tensor_dtype);
  const tensor = both ? `${c.tensor} (${c.tensor_dtype})` : c.tensor;
  const tile = both && c.tile ? `${c.tile} (${tileDtype})` : c.tile;
  if (c.direction === "store") return `${c.op || "store"} ${tile || c.value || "an expression"} → ${tensor}`;
  return `load ${tensor} → ${tile || "registers"}`;
}

function tileDtypeOf(model, c) {
  const t = (model.get("tiles") || []).find((x) => x.name === c.tile);
  return t ? t.dtype : "";
}

/** The layout the analysis proposes against bank conflicts, in words. */
function fixText(fix) {
  const how = fix.kind === "pad" ? `pad each tile row by ${plural(fix.pad, "element")} (rows of ${fix.row_length})`
    : `swizzle the tile (XOR, bits=${fix.bits}, base=${fix.base}, shift=${fix.shift})`;
  return `Fix: ${how}: ${plural(fix.wavefronts, "wavefront")} (ideal ${fix.ideal_wavefronts}), tile ${Number(fix.bytes).toLocaleString("en-US")} B` +
    (fix.keeps_vectors === false ? "; vector accesses are lost" : "");
}

/** Geometry of one copy: drawn rows and columns, and the runs in reading order. */
function geometry(copy) {
  const shape = copy.shape.length === 1 ? [1, copy.shape[0]] : copy.shape;
  const [rows, cols] = shape;
  // a long 1-row strip wraps in wider bands (whole multiples of WRAP) so that it stays at most
  // MAX_BANDS bands tall: a 4096-element row is 16 bands of 256, not 64 of 64
  const wrap = rows === 1 && cols > WRAP * MAX_BANDS ? WRAP * Math.ceil(cols / (WRAP * MAX_BANDS)) : WRAP;
  const width = Math.min(cols, wrap);
  const segs = Math.ceil(cols / width);
  const cell = Math.max(4, Math.min(18, Math.floor(SIDE_PX / width)));
  const runs = copy.runs || [];
  const order = runs.map((_, i) => i).sort((a, b) =>
    runs[a][1] - runs[b][1] || runs[a][2] - runs[b][2] || runs[a][0] - runs[b][0]);
  const rank = new Map(order.map((r, k) => [r, k]));
  // a 1-row (or 1-D) slice longer than WRAP is one strip cut into bands: the bands are labelled by
  // the columns they hold, never as rows
  const strip = rows === 1 && segs > 1;
  const oneD = (copy.slice_shape || copy.shape).length === 1;
  const byRow = new Map();
  for (const i of order) {
    const row = runs[i][1];
    if (!byRow.has(row)) byRow.set(row, []);
    byRow.get(row).push(i);
  }
  const cellH = strip ? Math.max(cell, 14) : cell;   // a strip's bands are tall enough for their labels
  return { rows, cols, width, segs, cell, cellH, runs, order, rank, byRow, strip, oneD };
}

/** The rectangles [x, y, w] (in cells) covering `len` elements from (row, col), wrapped. */
function pieces(g, row, col, len) {
  const out = [];
  let c = col;
  const end = col + len;
  while (c < end) {
    const seg = Math.floor(c / g.width);
    const stop = Math.min(end, (seg + 1) * g.width);
    out.push([c % g.width, row * g.segs + seg, stop - c]);
    c = stop;
  }
  return out;
}

function runFacts(copy, run, itemsize, g) {
  const [thread, row, col, len] = run;
  const warp = Math.floor(thread / 32), lane = thread % 32;
  const vw = copy.vector_width || 1;
  const vectors = Math.ceil(len / vw);
  const vbytes = itemsize ? ` (${vw * itemsize} B)` : "";
  const cols = len === 1 ? `column ${col}` : `columns ${col}–${col + len - 1}`;
  const where = g && (g.oneD || g.strip) ? (len === 1 ? `element ${col}` : `elements ${col}–${col + len - 1}`)
    : `row ${row}, ${cols}`;
  return { thread, warp, lane, row, col, len, vw, vectors, vbytes, cols, where };
}

function runLabel(side, f) {
  return `${side}: thread ${f.thread}, warp ${f.warp}, lane ${f.lane}; ${f.where}; ` +
    `${plural(f.len, "element")} in ${plural(f.vectors, "vector")} of width ${f.vw}`;
}

function drawSide(g, copy, side, itemsize, caption) {
  const pad = { left: g.strip ? 52 : 30, top: 16 };
  const W = g.width * g.cell, H = g.rows * g.segs * g.cellH;
  // a viewBox lets the picture shrink with the output area, so both sides stay side by side
  const root = s("svg", { width: W + pad.left + 4, height: H + pad.top + 4, class: "tn-grid",
    viewBox: `0 0 ${W + pad.left + 4} ${H + pad.top + 4}` });
  root.setAttribute("role", "listbox");
  root.setAttribute("tabindex", "-1");   // the runs take focus, not the picture
  root.setAttribute("aria-label", `${caption}: ${plural(g.runs.length, "run")}; arrow keys move between runs`);
  const body = s("g", { transform: `translate(${pad.left},${pad.top})` });
  root.append(body);
  body.append(s("rect", { x: 0, y: 0, width: W, height: H, class: "tn-bg" }));
  // column ticks along the top, row numbers down the left; a strip's bands are labelled on the
  // left by the columns each holds, and the ticks count on from the band's first column
  const tick = g.width > 128 ? 64 : g.width >= 32 ? 16 : g.width >= 8 ? 4 : 1;   // ticks at least 64 px apart
  for (let c = 0; c < g.width; c += tick) {
    const t = s("text", { x: c * g.cell + 1, y: -4, class: "tn-tick" });
    t.textContent = g.strip ? `+${c}` : String(c);
    body.append(t);
  }
  if (g.strip) {
    for (let b = 0; b < g.segs; b++) {
      const lo = b * g.width, hi = Math.min(g.cols, lo + g.width) - 1;
      const t = s("text", { x: -4, y: (b + 0.5) * g.cellH + 4, class: "tn-tick tn-rowtick tn-bandtick" });
      t.textContent = `${lo}–${hi}`;
      body.append(t);
    }
  }
  const rowStep = g.cell * g.segs >= 10 ? 1 : Math.ceil(10 / (g.cell * g.segs));
  for (let r = 0; r < (g.strip ? 0 : g.rows); r += rowStep) {
    const t = s("text", { x: -4, y: (r * g.segs + 0.5) * g.cell + 4, class: "tn-tick tn-rowtick" });
    t.textContent = String(r);
    body.append(t);
    if (r > 0 && g.segs > 1) body.append(s("line", { x1: 0, x2: W, y1: r * g.segs * g.cell, y2: r * g.segs * g.cell, class: "tn-rowline" }));
  }
  const nodes = new Array(g.runs.length);
  g.runs.forEach((run, i) => {
    const f = runFacts(copy, run, itemsize, g);
    const grp = s("g", { class: "tn-run", "data-run": i, "data-thread": f.thread, "data-warp": f.warp, tabindex: -1 });
    grp.setAttribute("role", "option");
    grp.setAttribute("aria-selected", "false");
    grp.setAttribute("aria-label", runLabel(side, f));
    const fill = threadColor(f.thread);
    for (const [x, y, w] of pieces(g, f.row, f.col, f.len)) {
      grp.append(s("rect", { x: x * g.cell + 0.5, y: y * g.cellH + 0.5, width: Math.max(1, w * g.cell - 1),
        height: Math.max(1, g.cellH - 1), fill }));
    }
    body.append(grp);
    nodes[i] = grp;
  });
  shadeOutside(g, copy, body);
  return { root, nodes };
}

function count(n) { return Number(n || 0).toLocaleString("en-US"); }

// "256 per CTA × 10 CTAs = 2,560" (the scaled figure is "lo..hi" where partial CTAs make a range)
function predictedText(perCta, predicted, ctas) {
  const total = typeof predicted === "number" ? count(predicted) : String(predicted === undefined || predicted === null ? "–" : predicted);
  if (perCta === undefined || perCta === null || !ctas) return total;
  return `${count(perCta)} per CTA × ${plural(ctas, "CTA")} = ${total}`;
}

// [sectors differ, wavefronts differ]: which of a line's measured figures the analysis missed
function differing(m) {
  const why = m.ok ? [] : (m.reasons || []);
  return [why.some((r) => r.startsWith("global sectors")), why.some((r) => r.startsWith("shared wavefronts"))];
}

// The verdict on a line, in the text form's words: "matches the prediction", or a "DIFFERS" badge
// (white on the flag colour, readable on light and dark themes) and the reasons after it.
function verdict(m, tag, cls) {
  if (m.ok) return h(tag, { class: `${cls} tn-good`, text: "matches the prediction" });
  return h(tag, { class: `${cls} tn-flag`, role: tag === "div" ? "note" : null },
    h("span", { class: "tn-flagbadge", text: "DIFFERS" }), h("span", { class: "tn-reason", text: `: ${(m.reasons || []).join("; ")}` }));
}

function measuredFigures(m, ctas) {
  return `${count(m.sectors)} sectors in ${count(m.requests)} requests (predicted ${predictedText(m.per_cta_sectors, m.predicted_sectors, ctas)}), ` +
    `${count(m.wavefronts)} shared wavefronts, ${count(m.bank_conflicts)} from bank conflicts ` +
    `(predicted ${predictedText(m.per_cta_wavefronts, m.predicted_wavefronts, ctas)})`;
}

// The measured figures of the shown copy's line, and its flag when they differ from the analysis.
function measuredCopy(m, ctas) {
  const box = h("div", { class: "tn-measured-copy" + (m.ok ? "" : " tn-differs"), "data-ok": m.ok ? "true" : "false" });
  box.append(h("span", { class: "tn-sub", text: "measured (Nsight Compute, whole launch): " }), h("span", { text: measuredFigures(m, ctas) }));
  box.append(verdict(m, "div", "tn-verdict"));
  return box;
}

// Every line the analysis plans a copy on or the hardware counted traffic on: predicted (per
// CTA × CTAs) beside measured (whole launch), each differing line flagged with its reason.
function measuredTable(model, copies, sel) {
  const meas = model.get("measured") || {};
  const rows = meas.lines || [];
  if (!rows.length) return null;
  const ctas = meas.ctas;
  const table = h("table", { class: "tn-measured" });
  table.append(h("caption", { text: `Measured beside predicted, per line: Nsight Compute counted the whole launch (${plural(ctas, "CTA")}); ` +
    `each prediction is the analysis' per-CTA figure × ${plural(ctas, "CTA")}. Global memory in 32-byte sectors and ` +
    "requests (warp-level instructions); shared memory in wavefronts, with those beyond the ideal from bank conflicts." }));
  const head = h("tr", {});
  for (const t of ["line", "statement", "sectors predicted", "sectors measured", "requests", "wavefronts predicted",
    "wavefronts measured", "bank conflicts", "verdict"]) head.append(h("th", { scope: "col", text: t }));
  table.append(h("thead", {}, head));
  const tb = h("tbody", {});
  const shown = copies[sel] ? copies[sel].line : null;
  for (const m of rows) {
    const mine = copies.filter((c) => c.line === m.line);
    const what = mine.length ? mine.map((c) => copyTitle(c, tileDtypeOf(model, c))).join("; ") : `${textOf(model, m.line)} (no copy statement)`;
    const [badS, badW] = differing(m);
    const tr = h("tr", { class: m.ok ? null : "tn-differs", "data-line": m.line, "data-ok": m.ok ? "true" : "false",
      "aria-current": m.line === shown ? "true" : null });
    tr.append(h("td", { text: String(labelOf(model, m.line)) }), h("td", { class: "tn-what", text: what }),
      h("td", { text: predictedText(null, m.predicted_sectors, 0) }), h("td", { class: badS ? "tn-badcell" : null, text: count(m.sectors) }),
      h("td", { text: count(m.requests) }),
      h("td", { text: predictedText(null, m.predicted_wavefronts, 0) }), h("td", { class: badW ? "tn-badcell" : null, text: count(m.wavefronts) }),
      h("td", { text: count(m.bank_conflicts) }),
      verdict(m, "td", "tn-verdict"));
    tb.append(tr);
  }
  table.append(tb);
  return table;
}

// One line at the top: how many lines the measurement agrees with, and which differ.
function measuredSummary(model) {
  const meas = model.get("measured") || {};
  const rows = meas.lines || [];
  if (!rows.length) return null;
  const bad = rows.filter((m) => !m.ok);
  const text = bad.length
    ? `Measured (Nsight Compute, ${plural(meas.ctas, "CTA")}): ${plural(bad.length, "line")} of ${rows.length} differ${bad.length === 1 ? "s" : ""} ` +
      `from the analysis (line${bad.length === 1 ? "" : "s"} ${bad.map((m) => labelOf(model, m.line)).join(", ")}); the table below says why.`
    : `Measured (Nsight Compute, ${plural(meas.ctas, "CTA")}): all ${plural(rows.length, "line")} match the analysis.`;
  return h("div", { class: "tn-measured-summary " + (bad.length ? "tn-bad" : "tn-good"), text });
}

function warpTable(copy, onWarp, ctas) {
  const warps = copy.warps || [];
  const table = h("table", { class: "tn-warps" });
  table.append(h("caption", { text: "Per warp of one CTA: 32-byte sectors of global memory touched (coalescing) and shared-memory wavefronts (bank conflicts); the ideal is the fewest the bytes moved allow." +
    (copy.measured ? " Below the warps: the CTA's sums, those times the CTAs (predicted) and Nsight Compute's count over the whole launch (measured)." : "") }));
  const head = h("tr", {});
  for (const t of ["warp", "threads", "sectors", "ideal", "wavefronts", "ideal"]) head.append(h("th", { scope: "col", text: t }));
  table.append(h("thead", {}, head));
  const tb = h("tbody", {});
  for (const w of warps) {
    const badS = w.sectors > w.ideal_sectors, badW = w.wavefronts > w.ideal_wavefronts;
    // one Tab stop for the whole table (roving tabindex): the first row takes Tab, ↑/↓ move on
    const tr = h("tr", { tabindex: tb.children.length === 0 ? 0 : -1, "data-warp": w.warp,
      "aria-label": `warp ${w.warp}: ${w.sectors} sectors, ideal ${w.ideal_sectors}${badS ? ", uncoalesced" : ""}; ` +
        `${w.wavefronts} wavefronts, ideal ${w.ideal_wavefronts}${badW ? ", bank conflicts" : ""}` });
    const sw = h("span", { class: "tn-swatch" });
    sw.style.background = threadColor(w.warp * 32 + 16);
    tr.append(h("td", {}, sw, String(w.warp)), h("td", { text: `${w.warp * 32}–${w.warp * 32 + 31}` }),
      h("td", { class: badS ? "tn-badcell" : null, text: String(w.sectors) }), h("td", { text: String(w.ideal_sectors) }),
      h("td", { class: badW ? "tn-badcell" : null, text: String(w.wavefronts) }), h("td", { text: String(w.ideal_wavefronts) }));
    for (const ev of ["mouseenter", "focus"]) tr.addEventListener(ev, () => onWarp(w.warp));
    for (const ev of ["mouseleave", "blur"]) tr.addEventListener(ev, () => onWarp(null));
    tb.append(tr);
  }
  tb.addEventListener("focusin", (e) => {   // the row last focused (by key or click) is the table's Tab stop
    if (e.target.parentNode !== tb) return;
    for (const r of tb.children) r.setAttribute("tabindex", r === e.target ? "0" : "-1");
  });
  tb.addEventListener("keydown", (e) => {
    const rows = [...tb.children];
    const at = rows.indexOf(e.target);
    if (at < 0) return;
    const to = { ArrowDown: at + 1, ArrowUp: at - 1, Home: 0, End: rows.length - 1 }[e.key];
    if (to === undefined) return;
    e.preventDefault();
    rows[Math.max(0, Math.min(rows.length - 1, to))].focus();
  });
  table.append(tb);
  const m = copy.measured;
  if (m) {
    // the per-CTA sums, and the whole launch: predicted (× CTAs) beside measured, for the copy's line
    const foot = h("tfoot", {});
    const [badS, badW] = differing(m);
    const row = (cls, label, sec, isec, wf, iwf, bad) => {
      foot.append(h("tr", { class: cls }, h("th", { scope: "row", colspan: 2, text: label }),
        h("td", { class: bad[0] ? "tn-badcell" : null, text: sec }), h("td", { text: isec }),
        h("td", { class: bad[1] ? "tn-badcell" : null, text: wf }), h("td", { text: iwf })));
    };
    row("tn-percta", "per CTA (all warps of this copy)", count(copy.sectors), count(copy.ideal_sectors),
      count(copy.wavefronts), count(copy.ideal_wavefronts), [false, false]);
    row("tn-pred", `line ${copy.lineLabel}, predicted (per CTA × ${plural(ctas, "CTA")})`,
      predictedText(null, m.predicted_sectors, 0), "", predictedText(null, m.predicted_wavefronts, 0), "", [false, false]);
    row("tn-meas", `line ${copy.lineLabel}, measured (Nsight Compute, whole launch)`, count(m.sectors), "",
      count(m.wavefronts), "", [badS, badW]);
    table.append(foot);
  }
  return table;
}

function warpText(warps) {
  // (warp, wavefronts) pairs as "warps 0–7: 4 each", runs of equal figures grouped
  const out = [];
  for (const [w, n] of warps) {
    const last = out[out.length - 1];
    if (last && last.n === n && last.hi === w - 1) last.hi = w; else out.push({ lo: w, hi: w, n });
  }
  return out.map((g) => (g.lo === g.hi ? `warp ${g.lo}: ${g.n}` : `warps ${g.lo}–${g.hi}: ${g.n} each`)).join("; ");
}

function sharedTable(model) {
  // the analysis' shared_traffic: shared-memory accesses that are not a copy's tile side
  const recs = model.get("shared") || [];
  const tot = model.get("traffic") || {};
  const box = h("div", { class: "tn-shared" });
  if (recs.length) {
    const table = h("table", { class: "tn-warps" });
    table.append(h("caption", { text: "Shared memory besides the copies, per CTA: reduction passes and partials, " +
      "broadcasts, values kept in a register (read once per thread). Wavefronts by the same bank model as the copies." }));
    const head = h("tr", {});
    for (const t of ["line", "tile", "access", "op", "requests", "wavefronts", "per warp"]) head.append(h("th", { scope: "col", text: t }));
    table.append(h("thead", {}, head));
    const tb = h("tbody", {});
    for (const r of recs) {
      tb.append(h("tr", {}, h("td", { text: String(labelOf(model, r.line)) }), h("td", { text: r.tile }),
        h("td", { text: r.kind + (r.in_registers ? " (in a register)" : "") }), h("td", { text: r.direction === "load" ? "ld" : "st" }),
        h("td", { text: String(r.requests) }), h("td", { text: String(r.wavefronts) }),
        h("td", { class: "tn-sub", text: warpText(r.warps || []) })));
    }
    table.append(tb);
    box.append(table);
  }
  if (tot && tot.global_ld_sectors !== undefined) {
    box.append(h("p", { class: "tn-sub", text: `Per CTA (every window inside its tensor): global ${tot.global_ld_sectors} load / ` +
      `${tot.global_st_sectors} store sectors; shared ${tot.shared_ld_wavefronts} load / ${tot.shared_st_wavefronts} store wavefronts.` }));
  }
  return box;
}

function dotReads(model) {
  // the analysis' dot_reads: tensor slices a dot reads itself (no copy statement), and how
  const recs = model.get("dot_reads") || [];
  if (!recs.length) return null;
  const ul = h("ul", { class: "tn-dotreads" });
  for (const d of recs) {
    ul.append(h("li", { text: `line ${labelOf(model, d.line)}: dot reads ${d.tensor} [${(d.shape || []).join(", ")}] ` +
      `itself (operand ${d.operand}; no copy statement): ${d.text}` }));
  }
  return h("div", { class: "tn-sub" }, ul);
}

/** The valid region in words: what the analysis knows before a launch, and what waits for run time. */
function regionText(c) {
  const reg = c.valid_region;
  if (!reg || !reg.text) return "";
  const rest = c.direction === "store"
    ? "; of those, only the elements valid in the value are written (its region is known at run time)"
    : "; elements outside the tensor read as 0 and are invalid in the tile";
  return `Valid region (inside ${c.tensor}): ${reg.text}${rest}`;
}

/** Whether the analysis knows some cell of the copy lies outside the tensor. */
function knownOutside(copy, g) {
  const [kr, kc] = (copy.valid_region || {}).known || [null, null];
  return !!((kr && (kr[0] > 0 || kr[1] < g.rows)) || (kc && (kc[0] > 0 || kc[1] < g.cols)));
}

/** Grey over the cells the analysis knows lie outside the tensor (its `known` ranges). */
function shadeOutside(g, copy, body) {
  const known = (copy.valid_region || {}).known || [null, null];
  const [kr, kc] = known;
  if (!kr && !kc) return 0;
  const [r0, r1] = kr || [0, g.rows], [c0, c1] = kc || [0, g.cols];
  let n = 0;
  const cover = (row, col, len) => {
    for (const [x, y, w] of pieces(g, row, col, len)) {
      body.append(s("rect", { x: x * g.cell, y: y * g.cellH, width: w * g.cell, height: g.cellH, class: "tn-outside" }));
    }
    n += len;
  };
  for (let r = 0; r < g.rows; r++) {
    if (r < r0 || r >= r1) { cover(r, 0, g.cols); continue; }
    if (c0 > 0) cover(r, 0, c0);
    if (c1 < g.cols) cover(r, c1, g.cols - c1);
  }
  return n;
}

function draw(model, el) {
  el.textContent = "";
  const root = viewRoot("tn-threadmap");
  el.append(root);
  const copies = model.get("copies") || [];
  const threads = model.get("threads") || 0;
  root.append(h("h4", { class: "tn-title", text: `Thread map of ${model.get("kernel")}` },
    h("span", { class: "tn-sub", text: ` · ${threads} threads per CTA, ${plural(Math.ceil(threads / 32), "warp")}` })));
  if (model.get("note")) root.append(h("div", { class: "tn-note", text: model.get("note") }));
  if (!copies.length) {
    root.append(h("p", { class: "tn-sub", text: "This kernel has no copy statement between a tensor and a tile." }));
    const dr0 = dotReads(model);
    if (dr0) root.append(dr0);
    const ms0 = measuredSummary(model), mt0 = measuredTable(model, copies, 0);
    if (ms0) root.append(ms0);
    if (mt0) root.append(mt0);
    root.append(sharedTable(model));
    return () => {};
  }
  let sel = Math.max(0, Math.min(copies.length - 1, model.get("selected") || 0));

  // one chip per copy statement
  const chips = h("div", { class: "tn-chips", role: "group", "aria-label": "copy statements" });
  copies.forEach((c, i) => {
    const b = h("button", { class: "tn-chip", type: "button", "aria-pressed": i === sel ? "true" : "false",
      text: `line ${labelOf(model, c.line)}: ${copyTitle(c, tileDtypeOf(model, c))}` });
    b.addEventListener("click", () => {
      model.set("selected", i);
      model.save_changes();
      // the view was drawn anew: keep the focus (and so the keys) on the same chip
      const again = el.querySelectorAll("button.tn-chip")[i];
      if (again) again.focus();
    });
    chips.append(b);
  });
  root.append(chips);
  const msum = measuredSummary(model);
  if (msum) root.append(msum);
  const dr = dotReads(model);
  if (dr) root.append(dr);

  const copy = copies[sel];
  const tiles = model.get("tiles") || [];
  const tile = tiles.find((t) => t.name === copy.tile);
  const dtype = tile ? tile.dtype : (copy.dtype || "");
  const itemsize = ITEMSIZE[dtype] || 0;
  const g = geometry(copy);
  const shapeText = `[${(copy.slice_shape || copy.shape).join(", ")}]`;   // at the declared rank

  root.append(h("div", { class: "tn-srcline" }, h("span", { class: "tn-sub", text: `line ${labelOf(model, copy.line)}  ` }),
    h("code", { text: textOf(model, copy.line) })));
  const differ = !!(tile && copy.tensor_dtype && tile.dtype !== copy.tensor_dtype);
  const facts = `${copyTitle(copy, tile ? tile.dtype : "")} · ${shapeText}${dtype && !differ ? " " + dtype : ""}` +
    ` · vector width ${copy.vector_width}` +
    `${itemsize ? ` (${copy.vector_width * itemsize} B)` : ""} · ${plural(g.runs.length, "run")} by ` +
    `${plural(new Set(g.runs.map((r) => r[0])).size, "thread")}`;
  root.append(h("div", { class: "tn-facts", text: facts }));
  const coal = h("div", { class: "tn-figures" },
    h("span", { class: copy.sectors > copy.ideal_sectors ? "tn-bad" : "tn-good",
      text: `coalescing: ${plural(copy.sectors, "sector")} (ideal ${copy.ideal_sectors})` }),
    h("span", { text: " · " }),
    h("span", { class: copy.wavefronts > copy.ideal_wavefronts ? "tn-bad" : "tn-good",
      text: `bank conflicts: ${plural(copy.wavefronts, "wavefront")} (ideal ${copy.ideal_wavefronts})` }));
  if (!(copy.is_view && !g.runs.length)) root.append(coal);
  const ctas = (model.get("measured") || {}).ctas;
  if (copy.measured) root.append(measuredCopy(copy.measured, ctas));
  if (copy.fix) root.append(h("div", { class: "tn-fix", text: fixText(copy.fix) }));
  // each flag's cause and fix, as the analysis words them (tilenb.analysis.copies)
  if (copy.coalescing_note) root.append(h("div", { class: "tn-fix tn-cause", text: `Uncoalesced: ${copy.coalescing_note}` }));
  if (copy.conflict_note) root.append(h("div", { class: "tn-fix tn-cause", text: `Bank conflicts: ${copy.conflict_note}` }));
  const region = regionText(copy);
  if (region) root.append(h("div", { class: "tn-sub tn-region", text: region +
    (knownOutside(copy, g) ? " (greyed in the grids: outside the tensor)" : "") }));

  const sides = h("div", { class: "tn-sides" });
  root.append(sides);
  const info = h("div", { class: "tn-info", "data-thread": "" , text: "Hover or focus a run to see the thread that moves it." });
  const drawn = [];
  const tensorCap = `tensor ${copy.tensor} · global memory · slice ${shapeText}${differ ? " " + copy.tensor_dtype : ""}`;
  const t1 = drawSide(g, copy, "tensor", itemsize, tensorCap);
  drawn.push(t1);
  sides.append(h("figure", { class: "tn-side" }, h("figcaption", { text: tensorCap }), t1.root));
  sides.append(h("div", { class: "tn-arrow", "aria-hidden": "true", text: copy.direction === "store" ? "←" : "→" }));
  if (copy.is_view) {
    sides.append(h("figure", { class: "tn-side tn-view" }, h("figcaption", { text: "no tile" }),
      h("p", { text: `let ${copy.tile || ""} is a view of ${copy.tensor}: no tile is made and no shared memory is used. ` +
        `Each thread reads its elements from global memory straight into registers where the view is used (line ${labelOf(model, copy.line)}). ` +
        "A dot that reads a view is different: it stages the view in a tile." })));
  } else {
    const tileCap = copy.tile ? `tile ${copy.tile} · shared memory · ${shapeText}${dtype ? " " + dtype : ""}`
      : `value computed in registers · ${shapeText}`;
    const t2 = drawSide(g, copy, copy.tile ? "tile" : "registers", itemsize, tileCap);
    drawn.push(t2);
    sides.append(h("figure", { class: "tn-side" }, h("figcaption", { text: tileCap }), t2.root));
  }
  root.append(info);

  // ---- interaction: one current run, shown on both sides
  let cur = -1;
  const setInfo = (i) => {
    if (i < 0) return;
    const f = runFacts(copy, g.runs[i], itemsize, g);
    info.dataset.thread = String(f.thread);
    info.dataset.run = String(i);
    info.textContent = "";
    info.append(h("span", { class: "tn-sw" }), h("b", { text: `thread ${f.thread}` }),
      ` · warp ${f.warp} · lane ${f.lane} · vector width ${f.vw}${f.vbytes} · ` +
      `${plural(f.len, "element")}: ${f.where} (${plural(f.vectors, "vector")})`);
    info.firstChild.style.background = threadColor(f.thread);
  };
  const light = (i, on) => {
    if (i < 0) return;
    const th = g.runs[i][0];
    for (const d of drawn) {
      d.nodes[i].classList.toggle("tn-twin", on);
      d.root.querySelectorAll(`.tn-run[data-thread="${th}"]`).forEach((n) => n.classList.toggle("tn-mate", on));
    }
  };
  let hovered = -1;
  const hover = (i) => {
    if (hovered === i) return;
    light(hovered, false);
    hovered = i;
    if (i >= 0) { light(i, true); setInfo(i); } else if (cur >= 0) { light(cur, true); setInfo(cur); }
  };
  const focusRun = (i, sideIdx, moveFocus) => {
    if (i < 0 || i >= g.runs.length) return;
    if (cur >= 0) {
      light(cur, false);
      for (const d of drawn) { d.nodes[cur].setAttribute("tabindex", "-1"); d.nodes[cur].setAttribute("aria-selected", "false"); d.nodes[cur].classList.remove("tn-cur"); }
    }
    cur = i;
    for (const d of drawn) { d.nodes[i].setAttribute("tabindex", "0"); d.nodes[i].setAttribute("aria-selected", "true"); d.nodes[i].classList.add("tn-cur"); }
    light(i, true);
    setInfo(i);
    if (moveFocus) drawn[sideIdx].nodes[i].focus();
  };
  const step = (i, key) => {
    const k = g.rank.get(i);
    const [, row, col] = g.runs[i];
    if (key === "ArrowRight") return g.order[Math.min(g.order.length - 1, k + 1)];
    if (key === "ArrowLeft") return g.order[Math.max(0, k - 1)];
    if (key === "Home") return g.order[0];
    if (key === "End") return g.order[g.order.length - 1];
    if ((key === "ArrowDown" || key === "ArrowUp") && g.strip) {
      // a strip: the band below / above, at the same place in it
      const want = col + (key === "ArrowDown" ? g.width : -g.width);
      if (want < 0 || want >= g.cols) return i;
      let best = i, bestD = Infinity;
      for (const j of g.order) {
        const d = Math.abs(g.runs[j][2] - want);
        if (d < bestD) { best = j; bestD = d; }
      }
      return best;
    }
    if (key === "ArrowDown" || key === "ArrowUp") {
      const rows = [...g.byRow.keys()];
      const at = rows.indexOf(row) + (key === "ArrowDown" ? 1 : -1);
      if (at < 0 || at >= rows.length) return i;
      let best = i, bestD = Infinity;
      for (const j of g.byRow.get(rows[at])) {
        const d = Math.abs(g.runs[j][2] - col);
        if (d < bestD) { best = j; bestD = d; }
      }
      return best;
    }
    return null;
  };
  drawn.forEach((d, sideIdx) => {
    d.root.addEventListener("mouseover", (e) => {
      const n = e.target.closest && e.target.closest(".tn-run");
      if (n) hover(Number(n.dataset.run));
    });
    d.root.addEventListener("mouseleave", () => hover(-1));
    d.root.addEventListener("click", (e) => {
      const n = e.target.closest && e.target.closest(".tn-run");
      if (n) focusRun(Number(n.dataset.run), sideIdx, true);
    });
    d.root.addEventListener("focusin", (e) => {
      const n = e.target.closest && e.target.closest(".tn-run");
      if (n && Number(n.dataset.run) !== cur) focusRun(Number(n.dataset.run), sideIdx, false);
    });
    d.root.addEventListener("keydown", (e) => {
      const n = e.target.closest && e.target.closest(".tn-run");
      if (!n) return;
      const next = step(Number(n.dataset.run), e.key);
      if (next === null || next === undefined) return;
      e.preventDefault();
      focusRun(next, sideIdx, true);
    });
  });
  if (g.runs.length) focusRun(g.order[0], 0, false);

  const onWarp = (w) => {
    for (const d of drawn) {
      d.root.classList.toggle("tn-dimming", w !== null);
      d.root.querySelectorAll(".tn-run").forEach((n) => n.classList.toggle("tn-hot", w !== null && Number(n.dataset.warp) === w));
    }
  };
  if ((copy.warps || []).length) root.append(warpTable(Object.assign({}, copy, { lineLabel: labelOf(model, copy.line) }), onWarp, ctas));
  const mt = measuredTable(model, copies, sel);
  if (mt) root.append(mt);
  root.append(sharedTable(model));
  root.append(h("p", { class: "tn-sub tn-help", text: "Hover or focus a run: the same run lights up on the other side and the thread's other runs are outlined. " +
    "Keys: ←/→ along the rows, ↑/↓ to the row (or band) above or below, Home/End. Hover or focus a warp in the table " +
    "to pick out its runs (the table is one Tab stop: ↑/↓ move between warps). Tab moves on; Escape leaves the view." }));
  return () => onWarp(null);
}

function render({ model, el }) {
  let cleanup = draw(model, el);
  const redraw = () => { if (cleanup) cleanup(); cleanup = draw(model, el); };
  const keys = ["copies", "tiles", "threads", "lines", "note", "selected", "kernel", "shared", "traffic", "dot_reads", "measured"];
  for (const k of keys) model.on(`change:${k}`, redraw);
  return () => {
    for (const k of keys) model.off(`change:${k}`, redraw);
    if (cleanup) cleanup();
    el.textContent = "";
  };
}

export default { render };
