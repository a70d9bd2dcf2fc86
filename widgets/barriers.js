// tilenb barriers: the kernel's source with a mark where the compiler puts each CTA barrier
// (__syncthreads()): "before" or "within" a statement goes above its line, "after" below its
// last line. Hover or focus a mark for its reason: which tile's bytes one thread wrote and
// another touches. Tab reaches every mark; Up/Down move between marks. With a profile, each
// mark shows its share of the warp-stall samples Nsight Compute took over the whole launch
// (b.measured), and the barriers the code generator adds inside a line's code are listed with
// theirs (measured.internal).
//
// The other waits of the target's code (a streamed loop's mbarrier waits, its warpgroup
// ping-pong's named barriers) are marked "wait" above the line whose code makes them.
//
// Model traits read: kernel, barriers, waits, lines, note, measured.

function count(n) { return Number(n || 0).toLocaleString("en-US"); }

function shareText(m) {
  return `measured: ${(100 * m.share).toFixed(1)}% of warp-stall samples here, ${count(m.barrier_samples)} waiting at the barrier`;
}

function draw(model, el) {
  el.textContent = "";
  const root = viewRoot("tn-barriers");
  el.append(root);
  const bars = model.get("barriers") || [];
  const lines = model.get("lines") || [];
  const labels = new Map(lines.map(([l, lab]) => [l, String(lab)]));
  const label = (l) => labels.get(l) || String(l);
  root.append(h("h4", { class: "tn-title", text: `Barriers of ${model.get("kernel")}` },
    h("span", { class: "tn-sub", text: ` · ${bars.length} CTA barrier${bars.length === 1 ? "" : "s"} placed by the compiler` })));
  if (model.get("note")) root.append(h("div", { class: "tn-note", text: model.get("note") }));
  const tip = h("div", { class: "tn-tip", hidden: true, role: "tooltip", id: "" });
  const marks = [];
  const mark = (b) => {
    const where = `${b.where || "before"} line ${label(b.line)}`;
    const meas = b.measured ? shareText(b.measured) : "";
    const m = h("div", { class: "tn-bmark", tabindex: 0, role: "note", "data-line": b.line,
      "aria-label": `barrier ${where}${b.tile ? `, tile ${b.tile}` : ""}: ${b.reason || ""}${meas ? `; ${meas}` : ""}` },
      h("span", { class: "tn-bgutter", "aria-hidden": "true" }),
      h("span", { class: "tn-bbadge", "aria-hidden": "true", text: "barrier" }),
      h("span", { class: "tn-bwhere", "aria-hidden": "true", text: `${where}${b.tile ? ` · ${b.tile}` : ""}` }),
      b.measured ? h("span", { class: "tn-bshare", "aria-hidden": "true", text: meas }) : null,
      b.measured ? h("span", { class: "tn-bmeter", "aria-hidden": "true" }, h("span", { class: "tn-bfill" })) : null);
    if (b.measured) m.querySelector(".tn-bfill").style.width = `${Math.min(100, 100 * b.measured.share).toFixed(1)}%`;
    m.dataset.reason = (b.reason || "") + (meas ? `\n${meas}` : "");
    m.dataset.where = b.where || "before";
    marks.push(m);
    return m;
  };
  // the other waits of the target's code (a streamed loop's mbarriers, its ping-pong's named
  // barriers: model "waits"), marked above the line whose code makes them
  const waits = model.get("waits") || [];
  const wmark = (w) => {
    const where = `${w.kind || "wait"} wait ${w.where || "within"} line ${label(w.line)}`;
    const m = h("div", { class: "tn-bmark tn-wmark", tabindex: 0, role: "note", "data-line": w.line,
      "aria-label": `${where} (${w.who || ""}, ${w.barrier || ""}): ${w.reason || ""}` },
      h("span", { class: "tn-bgutter", "aria-hidden": "true" }),
      h("span", { class: "tn-bbadge", "aria-hidden": "true", text: "wait" }),
      h("span", { class: "tn-bwhere", "aria-hidden": "true", text: `${where} · ${w.who || ""} · ${w.barrier || ""}` }));
    m.dataset.reason = w.reason || "";
    m.dataset.where = "before";
    marks.push(m);
    return m;
  };
  const waitsAt = new Map();
  for (const w of waits) {
    if (!waitsAt.has(w.line)) waitsAt.set(w.line, []);
    waitsAt.get(w.line).push(w);
  }
  const before = new Map(), after = new Map();
  for (const b of bars) {
    const m = b.where === "after" ? after : before;
    if (!m.has(b.line)) m.set(b.line, []);
    m.get(b.line).push(b);
  }
  const listing = h("div", { class: "tn-listing", role: "group", "aria-label": `source of ${model.get("kernel")} with its barriers` });
  const shown = new Set();
  let prev = null;
  for (const [line, lab, text] of lines) {
    if (prev !== null && line !== prev + 1) listing.append(h("div", { class: "tn-gap", text: "⋯" }));
    prev = line;
    for (const b of before.get(line) || []) listing.append(mark(b));
    for (const w of waitsAt.get(line) || []) listing.append(wmark(w));
    const hasBar = before.has(line) || after.has(line);
    listing.append(h("div", { class: "tn-sline" + (hasBar ? " tn-synced" : ""), "data-line": line },
      h("span", { class: "tn-lno", text: String(lab) }), h("code", { class: "tn-stext", text: String(text) || " " })));
    for (const b of after.get(line) || []) listing.append(mark(b));
    shown.add(line);
  }
  for (const b of bars) if (!shown.has(b.line)) listing.append(mark(b));
  const measured = model.get("measured") || {};
  if (measured.ctas) {
    root.append(h("p", { class: "tn-sub tn-measured-note", text: `Measured: each barrier's share of the warp-stall samples Nsight Compute ` +
      `took over the whole launch (${measured.ctas} CTA${measured.ctas === 1 ? "" : "s"}), and the samples of warps waiting at it.` }));
  }
  root.append(listing, tip);
  if ((measured.internal || []).length) {
    root.append(h("ul", { class: "tn-internal", "aria-label": "barriers the code generator adds inside a line's code" },
      ...measured.internal.map((b) => h("li", { "data-line": b.line, text: `code-generator barrier inside line ${label(b.line)}: ` +
        `${(100 * b.share).toFixed(1)}% of warp-stall samples, ${count(b.barrier_samples)} waiting at the barrier` }))));
  }
  if (!bars.length) root.append(h("p", { class: "tn-sub", text: "No barrier is needed: no thread reads tile bytes that another thread wrote." }));
  root.append(h("p", { class: "tn-sub tn-help", text: "Hover or focus a barrier for its reason; ↑/↓ move between barriers." }));

  // The tip goes on the side of the mark away from the line it explains (above a mark placed
  // before its line, below one placed after it), and stays inside the view.
  const show = (m) => {
    tip.textContent = m.dataset.reason;
    tip.hidden = !m.dataset.reason;
    if (tip.hidden) return;
    const box = m.getBoundingClientRect(), base = root.getBoundingClientRect();
    const w = tip.offsetWidth, ht = tip.offsetHeight;
    const left = Math.max(0, Math.min(box.left - base.left + 60, root.clientWidth - w));
    let top = m.dataset.where === "after" ? box.bottom - base.top + 2 : box.top - base.top - ht - 2;
    if (top < 0) top = box.bottom - base.top + 2;
    tip.style.left = `${left}px`;
    tip.style.top = `${top}px`;
  };
  const hide = () => { tip.hidden = true; };
  for (const m of marks) {
    m.addEventListener("mouseenter", () => show(m));
    m.addEventListener("focus", () => show(m));
    m.addEventListener("mouseleave", () => { if (document.activeElement !== m) hide(); });
    m.addEventListener("blur", hide);
    m.addEventListener("keydown", (e) => {
      const i = marks.indexOf(m);
      const j = e.key === "ArrowDown" ? i + 1 : e.key === "ArrowUp" ? i - 1 : -2;
      if (j === -2) { if (e.key === "Escape") hide(); return; }
      e.preventDefault();
      if (j >= 0 && j < marks.length) marks[j].focus();
    });
  }
}

function render({ model, el }) {
  const redraw = () => draw(model, el);
  redraw();
  const keys = ["barriers", "waits", "lines", "note", "kernel", "measured"];
  for (const k of keys) model.on(`change:${k}`, redraw);
  return () => {
    for (const k of keys) model.off(`change:${k}`, redraw);
    el.textContent = "";
  };
}

export default { render };
