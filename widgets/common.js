// tilenb widgets: DOM helpers every view uses. tilenb.notebook.assets.esm(view) puts this file
// in front of the view's own module, so each shipped module stays self-contained (no imports).

const SVGNS = "http://www.w3.org/2000/svg";

// An HTML element: attrs (null/undefined/false skipped, true as ""), "text" sets the text.
function h(tag, attrs, ...kids) {
  const n = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "text") n.textContent = v; else n.setAttribute(k, v === true ? "" : String(v));
  }
  for (const k of kids) if (k !== null && k !== undefined) n.append(k);
  return n;
}

// An SVG element; text, when given, becomes its text content.
function s(tag, attrs, text) {
  const n = document.createElementNS(SVGNS, tag);
  for (const [k, v] of Object.entries(attrs || {})) n.setAttribute(k, String(v));
  if (text !== undefined) n.textContent = text;
  return n;
}

// Keys pressed inside a view belong to the view. Jupyter's command mode binds plain keys on the
// whole page (arrows and j/k move between cells, a/b insert one, d d deletes, ...), in Notebook 7
// before the view sees them (a listener in the capture phase). For each key the view owns, the
// page-wide guard below marks the focused element with data-lm-suppress-shortcuts for that one
// event: Lumino (JupyterLab, Notebook 7) then matches no shortcut (it looks for that mark from
// the event's target up, before matching), and the view's own handlers run; the view's root
// also stops the key's propagation, for hosts that listen in the bubbling phase. Keys left to the front end: Tab (moves
// focus on, out of the view), Escape (leaves the view: focus goes back to the notebook, in
// command mode), Shift+Enter, and any chord with Ctrl, Alt or Meta (run, save, ...).
function ownsKey(e) {
  if (e.ctrlKey || e.metaKey || e.altKey) return false;
  if (e.key === "Tab" || e.key === "Escape") return false;
  if (e.key === "Enter" && e.shiftKey) return false;
  return true;
}

function leaveView(root) {
  const host = root.closest(".jp-Notebook") || root.closest(".jp-Cell");
  if (host && host.focus) host.focus();
  else if (document.activeElement && document.activeElement.blur) document.activeElement.blur();
}

// The root element of a view: focusable (a click anywhere in it keeps the keys in the view,
// with no extra Tab stop), its keys guarded as described above.
function viewRoot(cls) {
  const root = h("div", { class: `tn-root ${cls}`, tabindex: -1 });
  root.addEventListener("keydown", (e) => {
    if (e.key === "Escape") { e.preventDefault(); leaveView(root); return; }
    if (ownsKey(e)) e.stopPropagation();
  });
  if (!window.__tilenbKeyGuard) {
    window.__tilenbKeyGuard = true;
    window.addEventListener("keydown", (e) => {
      const t = e.target;
      if (!t || !t.closest || !t.closest(".tn-root") || !ownsKey(e) || t.hasAttribute("data-lm-suppress-shortcuts")) return;
      t.setAttribute("data-lm-suppress-shortcuts", "true");
      setTimeout(() => t.removeAttribute("data-lm-suppress-shortcuts"), 0);
    }, true);
  }
  return root;
}
