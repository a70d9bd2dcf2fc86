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
