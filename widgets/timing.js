// tilenb timing: after launches on the GPU, the kernel time measured with CUDA events, the host
// overhead of a launch, the achieved bytes/s and FLOP/s against the device's peak (a point on
// the roofline), and the time of each autotune variant. On the CPU backend it says that no GPU
// time exists. Every figure of hardware carries its source (hover the roofs). With a profile
// (timing.measured), what Nsight Compute measured over one launch: DRAM bytes read and written
// against the minimal (compulsory) bytes, L2 bytes, the duration under ncu, the achieved
// occupancy, the DRAM bandwidth, and a roofline point placed from the measurement beside the
// one the minimal bytes predict; drawn on either backend and before any ordinary launch.
//
// Model traits read: kernel, timing, note.

function fmtTime(ms) {
  if (ms === null || ms === undefined) return "n/a";
  return ms >= 1 ? `${ms.toFixed(3)} ms` : `${(ms * 1000).toFixed(1)} µs`;
}

function fmtRate(x, unit) {
  if (x === null || x === undefined) return "not reported";
  for (const [sc, p] of [[1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"]]) if (x >= sc) return `${(x / sc).toFixed(2)} ${p}${unit}`;
  return `${x.toFixed(2)} ${unit}`;
}

function count(n) { return Number(n || 0).toLocaleString("en-US"); }
function fmtBytes(n) { return `${count(n)} B`; }
function ratio(a, b) { return b ? ` (${(a / b).toFixed(2)}×)` : ""; }

// points: [{ai (FLOP per byte), y (FLOP/s), cls, label}], drawn on the device's roofs
function roofline(peak, points, label) {
  const W = 420, H = 240, L = 58, B = 34, T = 10, R = 12;
  const ais = points.map((p) => p.ai), ys = points.map((p) => p.y);
  const ridge = peak.flops_per_s / peak.bytes_per_s;
  const xlo = Math.min(...ais, ridge) / 16, xhi = Math.max(...ais, ridge) * 16;
  const yhi = peak.flops_per_s * 2, ylo = Math.min(...ys, xlo * peak.bytes_per_s) / 4;
  const X = (v) => L + ((Math.log10(v) - Math.log10(xlo)) / (Math.log10(xhi) - Math.log10(xlo))) * (W - L - R);
  const Y = (v) => H - B - ((Math.log10(v) - Math.log10(ylo)) / (Math.log10(yhi) - Math.log10(ylo))) * (H - B - T);
  const svg = s("svg", { width: W, height: H, class: "tn-roof", role: "img",
    "aria-label": `roofline: ${label}; memory roof ${fmtRate(peak.bytes_per_s, "B/s")}, compute roof ${fmtRate(peak.flops_per_s, "FLOP/s")}` });
  svg.append(s("rect", { x: L, y: T, width: W - L - R, height: H - B - T, class: "tn-plot" }));
  for (let e = Math.ceil(Math.log10(xlo)); e <= Math.floor(Math.log10(xhi)); e++) {
    svg.append(s("text", { x: X(10 ** e), y: H - B + 14, class: "tn-tick", "text-anchor": "middle" }, e >= 0 ? String(10 ** e) : `1e${e}`));
  }
  for (let e = Math.ceil(Math.log10(ylo)); e <= Math.floor(Math.log10(yhi)); e += 1) {
    svg.append(s("text", { x: L - 4, y: Y(10 ** e) + 3, class: "tn-tick", "text-anchor": "end" }, fmtRate(10 ** e, "")));
  }
  svg.append(s("text", { x: (L + W) / 2, y: H - 4, class: "tn-axislabel", "text-anchor": "middle" }, "arithmetic intensity (FLOP per byte)"));
  svg.append(s("text", { x: 12, y: (T + H - B) / 2, class: "tn-axislabel", "text-anchor": "middle", transform: `rotate(-90 12 ${(T + H - B) / 2})` }, "FLOP/s"));
  const mem = s("polyline", { points: `${X(xlo)},${Y(xlo * peak.bytes_per_s)} ${X(ridge)},${Y(peak.flops_per_s)} ${X(xhi)},${Y(peak.flops_per_s)}`, class: "tn-rooflines" });
  mem.append(s("title", {}, `memory roof ${fmtRate(peak.bytes_per_s, "B/s")} (${peak.bytes_source}); compute roof ${fmtRate(peak.flops_per_s, "FLOP/s")} ${peak.flops_kind} (${peak.flops_source})`));
  svg.append(mem);
  if (peak.copy_bytes_per_s) {
    svg.append(s("line", { x1: X(xlo), y1: Y(xlo * peak.copy_bytes_per_s), x2: X(Math.min(xhi, peak.flops_per_s / peak.copy_bytes_per_s)), y2: Y(Math.min(xhi * peak.copy_bytes_per_s, peak.flops_per_s)), class: "tn-copyroof" },
    ));
  }
  for (const p of points) {
    const dot = s("circle", { cx: X(p.ai), cy: Y(p.y), r: 5, class: `tn-point ${p.cls || ""}`, tabindex: 0,
      "aria-label": `${p.label}: ${p.ai.toPrecision(3)} FLOP/B, ${fmtRate(p.y, "FLOP/s")}` });
    dot.append(s("title", {}, `${p.label}: ${p.ai.toPrecision(3)} FLOP/B, ${fmtRate(p.y, "FLOP/s")}`));
    svg.append(dot);
  }
  return svg;
}

// The launch's bytes by kind: minimal (the tensors, each once per direction) beside measured.
function bytesChart(m) {
  const rows = [];
  if (m.minimal_read_bytes !== null && m.minimal_read_bytes !== undefined) {
    rows.push(["read: minimal", m.minimal_read_bytes, "tn-bw-peak", "the bytes of the tensors the launch reads, each once"]);
  }
  rows.push(["read: DRAM measured", m.dram_read_bytes, "tn-bw-ach", "Nsight Compute: dram__bytes_read.sum"]);
  if (m.minimal_write_bytes !== null && m.minimal_write_bytes !== undefined) {
    rows.push(["write: minimal", m.minimal_write_bytes, "tn-bw-peak", "the bytes of the tensors the launch writes, each once"]);
  }
  rows.push(["write: DRAM measured", m.dram_write_bytes, "tn-bw-ach", "Nsight Compute: dram__bytes_write.sum"]);
  rows.push(["L2 measured", m.l2_bytes, "tn-bw-copy", "Nsight Compute: lts__t_bytes.sum (every L2 access)"]);
  const max = Math.max(...rows.map((r) => r[1] || 0), 1);
  const W = 420, RH = 18;
  const svg = s("svg", { width: W, height: rows.length * RH + 4, class: "tn-bytes", role: "list", "aria-label": "bytes of the launch: minimal beside measured" });
  rows.forEach(([name, v, cls, src], i) => {
    const g = s("g", { role: "listitem", tabindex: 0, "aria-label": `${name}: ${fmtBytes(v)} (${src})` });
    g.append(s("title", {}, src));
    const w = ((W - 230) * (v || 0)) / max;
    g.append(s("rect", { x: 130, y: i * RH + 3, width: Math.max(1, w), height: RH - 6, class: cls }));
    g.append(s("text", { x: 126, y: i * RH + RH - 5, class: "tn-tick", "text-anchor": "end" }, name));
    g.append(s("text", { x: 134 + w, y: i * RH + RH - 5, class: "tn-tick" }, fmtBytes(v)));
    svg.append(g);
  });
  return svg;
}

// What Nsight Compute measured over one launch (timing.measured: build.measured_timing).
function measuredSection(tm) {
  const m = tm.measured;
  const sec = h("section", { class: "tn-measured", "aria-label": "measured by Nsight Compute" });
  sec.append(h("h5", { class: "tn-mtitle", text: `Measured by Nsight Compute (one launch, ${m.ctas} CTA${m.ctas === 1 ? "" : "s"}${m.device ? ` on ${m.device}` : ""})` }));
  const dl = h("dl", { class: "tn-metrics" });
  const add = (k, v, cls) => dl.append(h("dt", { text: k }), h("dd", { class: cls || null, text: v }));
  if (m.duration_ns) add("duration under ncu", `${fmtTime(m.duration_ns / 1e6)} (caches flushed, clocks at base)`);
  if (m.achieved_occupancy_pct !== null && m.achieved_occupancy_pct !== undefined) add("achieved occupancy", `${m.achieved_occupancy_pct.toFixed(1)}%`);
  const hasMin = m.minimal_read_bytes !== null && m.minimal_read_bytes !== undefined;
  if (hasMin) {
    add("DRAM read", `${fmtBytes(m.dram_read_bytes)} against ${fmtBytes(m.minimal_read_bytes)} the launch must read${ratio(m.dram_read_bytes, m.minimal_read_bytes)}`);
    add("DRAM write", `${fmtBytes(m.dram_write_bytes)} against ${fmtBytes(m.minimal_write_bytes)} it must write${ratio(m.dram_write_bytes, m.minimal_write_bytes)}`);
  }
  add("DRAM in all", `${fmtBytes(m.dram_bytes)}` + (m.minimal_bytes ? ` against ${fmtBytes(m.minimal_bytes)} minimal${ratio(m.dram_bytes, m.minimal_bytes)}` : ""));
  add("L2", fmtBytes(m.l2_bytes));
  const peak = m.peak;
  if (m.dram_bytes_per_s) {
    add("DRAM bandwidth (DRAM bytes / duration under ncu)", fmtRate(m.dram_bytes_per_s, "B/s") +
      (peak && peak.bytes_per_s ? `, ${(100 * m.dram_bytes_per_s / peak.bytes_per_s).toFixed(1)}% of the ${peak.device} peak ${fmtRate(peak.bytes_per_s, "B/s")}` : ""));
  }
  sec.append(dl);
  if (m.dram_note) sec.append(h("p", { class: "tn-sub tn-dram-note", text: m.dram_note }));
  const figs = h("div", { class: "tn-figs" });
  figs.append(h("figure", {}, h("figcaption", { text: "Bytes of the launch: minimal beside measured" }), bytesChart(m)));
  if (m.dram_bytes_per_s && peak && peak.bytes_per_s) {
    // the measured point against the memory roof: DRAM bytes over the duration under ncu
    figs.append(h("figure", {}, h("figcaption", { text: "DRAM bandwidth under ncu against the memory roof" }),
      bandwidthBars({ bytes_per_s: m.dram_bytes_per_s, peak }, "DRAM under ncu", "measured: DRAM bytes over the duration under ncu")));
  }
  const r = m.roofline;
  if (r && peak) {
    const pts = [{ ai: r.predicted_ai, y: r.predicted_flops_per_s, cls: "tn-predicted", label: "predicted (minimal bytes, at the roof)" },
      { ai: r.ai, y: r.flops_per_s, cls: "tn-measuredpt", label: "measured (DRAM bytes, duration under ncu)" }];
    figs.append(h("figure", {}, h("figcaption", { text: `Roofline from the measurement (${peak.device}, ${peak.flops_kind}): hollow predicted, filled measured` }),
      roofline(peak, pts, pts.map((p) => `${p.label} ${p.ai.toPrecision(3)} FLOP/B, ${fmtRate(p.y, "FLOP/s")}`).join("; "))));
  }
  sec.append(figs);
  if (r) {
    sec.append(h("p", { class: "tn-sub tn-roofline-text", text: `Roofline from the measurement: ${r.ai.toPrecision(3)} FLOP per DRAM byte at ${fmtRate(r.flops_per_s, "FLOP/s")}; ` +
      `predicted from the minimal bytes: ${r.predicted_ai.toPrecision(3)} FLOP/B, at most ${fmtRate(r.predicted_flops_per_s, "FLOP/s")} (${count(m.flops)} FLOPs in dots).` }));
  } else if (m.roofline_note) {
    sec.append(h("p", { class: "tn-sub tn-roofline-text", text: m.roofline_note[0].toUpperCase() + m.roofline_note.slice(1) + "." }));
  }
  return sec;
}

function bandwidthBars(tm, name, source) {
  const peak = tm.peak;
  const rows = [[name || "achieved", tm.bytes_per_s, "tn-bw-ach", source || "measured: bytes moved by the launch over its kernel time"]];
  if (peak) {
    if (peak.copy_bytes_per_s) rows.push(["measured copy", peak.copy_bytes_per_s, "tn-bw-copy", peak.copy_source]);
    rows.push([`${peak.device} HBM peak`, peak.bytes_per_s, "tn-bw-peak", peak.bytes_source]);
  }
  const max = Math.max(...rows.map((r) => r[1]));
  const W = 420, RH = 18;
  const svg = s("svg", { width: W, height: rows.length * RH + 4, class: "tn-bw", role: "list", "aria-label": "memory bandwidth" });
  rows.forEach(([name, v, cls, src], i) => {
    const g = s("g", { role: "listitem", tabindex: 0, "aria-label": `${name}: ${fmtRate(v, "B/s")} (${src})` });
    g.append(s("title", {}, src));
    g.append(s("rect", { x: 120, y: i * RH + 3, width: Math.max(2, ((W - 200) * v) / max), height: RH - 6, class: cls }));
    g.append(s("text", { x: 116, y: i * RH + RH - 5, class: "tn-tick", "text-anchor": "end" }, name));
    g.append(s("text", { x: 124 + ((W - 200) * v) / max, y: i * RH + RH - 5, class: "tn-tick" }, fmtRate(v, "B/s")));
    svg.append(g);
  });
  return svg;
}

function variantChart(variants) {
  const W = 420, RH = 18;
  const max = Math.max(...variants.map((v) => v.ms || 0), 1e-9);
  const svg = s("svg", { width: W, height: variants.length * RH + 4, class: "tn-var", role: "list", "aria-label": "time of each autotune variant" });
  variants.forEach((v, i) => {
    const g = s("g", { role: "listitem", tabindex: 0, "aria-label": `${v.label}: ${fmtTime(v.ms)}${v.best ? ", fastest" : ""}` });
    g.append(s("rect", { x: 130, y: i * RH + 3, width: Math.max(2, ((W - 210) * (v.ms || 0)) / max), height: RH - 6, class: v.best ? "tn-best" : "tn-other" }));
    g.append(s("text", { x: 126, y: i * RH + RH - 5, class: "tn-tick", "text-anchor": "end" }, v.label));
    g.append(s("text", { x: 134 + ((W - 210) * (v.ms || 0)) / max, y: i * RH + RH - 5, class: "tn-tick" }, fmtTime(v.ms) + (v.best ? "  fastest" : "")));
    svg.append(g);
  });
  return svg;
}

function draw(model, el) {
  el.textContent = "";
  const root = viewRoot("tn-timing");
  el.append(root);
  const tm = model.get("timing") || {};
  root.append(h("h4", { class: "tn-title", text: `Timing of ${model.get("kernel")}` }));
  if (model.get("note")) root.append(h("div", { class: "tn-note", text: model.get("note") }));
  if (tm.backend !== "cuda") {
    root.append(h("p", { class: "tn-nogpu", text: `No GPU time exists: ${tm.reason || "this kernel runs on the CPU backend (the numpy reference executor)"}.` }));
    if (tm.measured) root.append(measuredSection(tm));
    return;
  }
  if (!tm.kernel_ms) {
    root.append(h("p", { class: "tn-nogpu", text: `Not launched on the GPU yet${tm.reason ? ": " + tm.reason : ""}. Launch it and this view fills in.` }));
    if (tm.measured) root.append(measuredSection(tm));
    return;
  }
  const dl = h("dl", { class: "tn-metrics" });
  const add = (k, v) => dl.append(h("dt", { text: k }), h("dd", { text: v }));
  add("device", tm.device || "GPU");
  add("variant", tm.variant_label || "default");
  add("kernel time (CUDA events)", fmtTime(tm.kernel_ms) + (tm.launches > 1 ? ` (median of ${tm.launches} launches)` : ""));
  add("host time of the call beyond the kernel", fmtTime(tm.host_ms) + (tm.host_note ? ` (${tm.host_note})` : ""));
  add("bytes moved", tm.bytes ? `${Number(tm.bytes).toLocaleString("en-US")} B` : "not reported");
  add("achieved bandwidth", fmtRate(tm.bytes_per_s, "B/s") + (tm.peak && tm.bytes_per_s ? ` (${(100 * tm.bytes_per_s / tm.peak.bytes_per_s).toFixed(1)}% of ${fmtRate(tm.peak.bytes_per_s, "B/s")})` : ""));
  add("achieved compute", fmtRate(tm.flops_per_s, "FLOP/s") + (tm.peak && tm.flops_per_s && tm.peak.flops_per_s ? ` (${(100 * tm.flops_per_s / tm.peak.flops_per_s).toFixed(2)}% of ${tm.peak.flops_kind} peak)` : ""));
  root.append(dl);
  const figs = h("div", { class: "tn-figs" });
  root.append(figs);
  if (tm.bytes_per_s) figs.append(h("figure", {}, h("figcaption", { text: "Memory bandwidth" }), bandwidthBars(tm)));
  if (tm.peak && tm.flops && tm.bytes && tm.flops_per_s && tm.peak.flops_per_s) {
    const ai = tm.flops / tm.bytes;
    figs.append(h("figure", {}, h("figcaption", { text: `Roofline (${tm.peak.device}, ${tm.peak.flops_kind})` }),
      roofline(tm.peak, [{ ai, y: tm.flops_per_s, cls: "", label: "this kernel" }],
        `arithmetic intensity ${ai.toPrecision(3)} FLOP per byte, achieved ${fmtRate(tm.flops_per_s, "FLOP/s")}`)));
  }
  const timed = (tm.variants || []).filter((v) => v.ms !== null && v.ms !== undefined);
  const skipped = (tm.variants || []).filter((v) => v.ms === null || v.ms === undefined);
  if (timed.length) {
    const fig = h("figure", {}, h("figcaption", { text: "Autotune variants (kernel time, CUDA events)" }), variantChart(timed));
    if (skipped.length) fig.append(h("ul", { class: "tn-skipped" }, ...skipped.map((v) => h("li", { text: `${v.label}: ${v.note || "not timed"}` }))));
    figs.append(fig);
  }
  if (tm.note) root.append(h("p", { class: "tn-sub", text: tm.note }));
  if (tm.measured) root.append(measuredSection(tm));
  if (tm.peak) {
    const src = h("p", { class: "tn-sub tn-sources" });
    src.textContent = `Sources: memory ${fmtRate(tm.peak.bytes_per_s, "B/s")}: ${tm.peak.bytes_source}` +
      (tm.peak.copy_bytes_per_s ? `; copy ${fmtRate(tm.peak.copy_bytes_per_s, "B/s")}: ${tm.peak.copy_source}` : "") +
      (tm.peak.flops_per_s ? `; ${tm.peak.flops_kind} ${fmtRate(tm.peak.flops_per_s, "FLOP/s")}: ${tm.peak.flops_source}` : "") + ".";
    root.append(src);
  } else {
    root.append(h("p", { class: "tn-sub", text: "Peak figures are not known for this device, so no roofline is drawn." }));
  }
}

function render({ model, el }) {
  const redraw = () => draw(model, el);
  redraw();
  const keys = ["timing", "note", "kernel"];
  for (const k of keys) model.on(`change:${k}`, redraw);
  return () => {
    for (const k of keys) model.off(`change:${k}`, redraw);
    el.textContent = "";
  };
}

export default { render };
