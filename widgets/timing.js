// tilenb timing: after launches on the GPU, the kernel time measured with CUDA events, the host
// overhead of a launch, the achieved bytes/s and FLOP/s against the device's peak (a point on
// the roofline), and the time of each autotune variant. On the CPU backend it says that no GPU
// time exists. Every figure of hardware carries its source (hover the roofs).
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

function roofline(tm) {
  const peak = tm.peak;
  const W = 420, H = 240, L = 58, B = 34, T = 10, R = 12;
  const ai = tm.flops / tm.bytes;
  const ridge = peak.flops_per_s / peak.bytes_per_s;
  const xlo = Math.min(ai, ridge) / 16, xhi = Math.max(ai, ridge) * 16;
  const yhi = peak.flops_per_s * 2, ylo = Math.min(tm.flops_per_s, xlo * peak.bytes_per_s) / 4;
  const X = (v) => L + ((Math.log10(v) - Math.log10(xlo)) / (Math.log10(xhi) - Math.log10(xlo))) * (W - L - R);
  const Y = (v) => H - B - ((Math.log10(v) - Math.log10(ylo)) / (Math.log10(yhi) - Math.log10(ylo))) * (H - B - T);
  const svg = s("svg", { width: W, height: H, class: "tn-roof", role: "img",
    "aria-label": `roofline: arithmetic intensity ${ai.toPrecision(3)} FLOP per byte, achieved ${fmtRate(tm.flops_per_s, "FLOP/s")}; ` +
      `memory roof ${fmtRate(peak.bytes_per_s, "B/s")}, compute roof ${fmtRate(peak.flops_per_s, "FLOP/s")}` });
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
  const dot = s("circle", { cx: X(ai), cy: Y(tm.flops_per_s), r: 5, class: "tn-point", tabindex: 0 });
  dot.append(s("title", {}, `this kernel: ${ai.toPrecision(3)} FLOP/B, ${fmtRate(tm.flops_per_s, "FLOP/s")}`));
  svg.append(dot);
  return svg;
}

function bandwidthBars(tm) {
  const peak = tm.peak;
  const rows = [["achieved", tm.bytes_per_s, "tn-bw-ach", "measured: bytes moved by the launch over its kernel time"]];
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
    return;
  }
  if (!tm.kernel_ms) {
    root.append(h("p", { class: "tn-nogpu", text: `Not launched on the GPU yet${tm.reason ? ": " + tm.reason : ""}. Launch it and this view fills in.` }));
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
    figs.append(h("figure", {}, h("figcaption", { text: `Roofline (${tm.peak.device}, ${tm.peak.flops_kind})` }), roofline(tm)));
  }
  const timed = (tm.variants || []).filter((v) => v.ms !== null && v.ms !== undefined);
  const skipped = (tm.variants || []).filter((v) => v.ms === null || v.ms === undefined);
  if (timed.length) {
    const fig = h("figure", {}, h("figcaption", { text: "Autotune variants (kernel time, CUDA events)" }), variantChart(timed));
    if (skipped.length) fig.append(h("ul", { class: "tn-skipped" }, ...skipped.map((v) => h("li", { text: `${v.label}: ${v.note || "not timed"}` }))));
    figs.append(fig);
  }
  if (tm.note) root.append(h("p", { class: "tn-sub", text: tm.note }));
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
