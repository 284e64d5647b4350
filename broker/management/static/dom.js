// Building the page without HTML strings: every name, key and payload from the broker goes in as a
// text node or an attribute value, never through innerHTML, so a queue called `<img onerror=…>` is
// shown as those characters and nothing runs.

const SVG_NS = "http://www.w3.org/2000/svg";

function build(node, attrs, children) {
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on") && typeof value === "function") {
      node.addEventListener(key.slice(2), value);
    } else if (key === "style") {
      node.style.cssText = String(value); // CSSOM, which the page's CSP allows (a style attribute it would not)
    } else if (key === "dataset") {
      for (const [k, v] of Object.entries(value)) node.dataset[k] = String(v);
    } else if (value === true) {
      node.setAttribute(key, "");
    } else {
      node.setAttribute(key, String(value));
    }
  }
  append(node, ...children);
  return node;
}

/** Appends text (as text nodes), nodes and nested arrays; skips null, undefined and false. */
export function append(node, ...children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) append(node, ...child);
    else if (child instanceof Node) node.append(child);
    else node.append(document.createTextNode(String(child)));
  }
  return node;
}

/** An HTML element: el("a", {href: "#/queues"}, "Queues"). */
export function el(tag, attrs, ...children) {
  return build(document.createElement(tag), attrs, children);
}

/** An SVG element: svg("rect", {x: 0, width: 10}). */
export function svg(tag, attrs, ...children) {
  return build(document.createElementNS(SVG_NS, tag), attrs, children);
}

export function clear(node, ...children) {
  node.replaceChildren();
  return append(node, ...children);
}

// -- formatting ----------------------------------------------------------------------------------

const NUMBER = new Intl.NumberFormat("en-GB");

export function num(value) {
  if (value === undefined || value === null || value === "") return "";
  return typeof value === "number" ? NUMBER.format(value) : String(value);
}

/** A `*_details` object's rate ("0.0/s"), or "" when the API gave none. */
export function rate(details) {
  if (!details || typeof details.rate !== "number") return "";
  return `${details.rate.toFixed(1)}/s`;
}

/** The rate of `stats[key + "_details"]`, as a number (0 when absent). */
export function rateOf(stats, key) {
  const d = stats ? stats[key + "_details"] : undefined;
  return d && typeof d.rate === "number" ? d.rate : 0;
}

export function bytes(value) {
  if (typeof value !== "number") return "";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let v = value, i = 0;
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
  return i === 0 ? `${v} B` : `${v.toFixed(v < 10 ? 1 : 0)} ${units[i]}`;
}

export function duration(ms) {
  if (typeof ms !== "number") return "";
  const s = Math.floor(ms / 1000);
  const d = Math.floor(s / 86400), h = Math.floor(s / 3600) % 24, m = Math.floor(s / 60) % 60;
  if (d) return `${d}d ${h}h`;
  if (h) return `${h}h ${m}m`;
  return m ? `${m}m ${s % 60}s` : `${s}s`;
}

export function when(ms) {
  return typeof ms === "number" ? new Date(ms).toLocaleString() : "";
}

/** A JSON value as compact text (strings as they are). */
export function show(value) {
  if (value === undefined || value === null) return "";
  return typeof value === "string" ? value : JSON.stringify(value);
}

/** A key → value table, for arguments, properties and client properties. */
export function kvTable(obj, attrs) {
  const entries = Object.entries(obj || {});
  if (!entries.length) return el("span", { class: "muted" }, "none");
  return el("table", { class: "kv", ...attrs },
    entries.map(([k, v]) => el("tr", {}, el("th", {}, k),
      el("td", {}, v !== null && typeof v === "object" && !Array.isArray(v) ? kvTable(v) : show(v)))));
}

// -- tables --------------------------------------------------------------------------------------

/**
 * A list table. `columns`: [{title, cell(row) -> text|Node, num?, sort?(row) -> value}]; `rowAttrs(row)`
 * gives the row's attributes (data-* for tests and links). Sorting is by a clicked header.
 */
export function listTable({ columns, rows, rowAttrs, empty, attrs, sortState }) {
  const state = sortState || { column: -1, descending: false };
  const tbl = el("table", { class: "list", ...attrs });
  const draw = () => {
    let sorted = rows;
    const col = columns[state.column];
    if (col && col.sort) {
      sorted = rows.slice().sort((a, b) => {
        const x = col.sort(a), y = col.sort(b);
        const c = x < y ? -1 : x > y ? 1 : 0;
        return state.descending ? -c : c;
      });
    }
    const head = el("tr", {}, columns.map((c, i) => el("th", {
      class: [c.num ? "num" : "", c.sort ? "sortable" : "", i === state.column ? "sorted" : ""].join(" ").trim(),
      title: c.sort ? "sort" : undefined,
      onclick: c.sort ? () => {
        state.descending = state.column === i ? !state.descending : false;
        state.column = i;
        draw();
      } : undefined,
    }, c.title, i === state.column ? (state.descending ? " ▼" : " ▲") : "")));
    const body = sorted.length
      ? sorted.map((row) => el("tr", rowAttrs ? rowAttrs(row) : {},
        columns.map((c) => el("td", { class: c.num ? "num" : undefined }, c.cell(row)))))
      : [el("tr", {}, el("td", { colspan: columns.length, class: "muted" }, empty || "none"))];
    clear(tbl, el("thead", {}, head), el("tbody", {}, body));
  };
  draw();
  return tbl;
}

/** `n` empty boxes, which a page places once and fills on each refresh. */
export function boxes(n) {
  return Array.from({ length: n }, () => el("div"));
}

/** An object page's heading, "Queue <name> in virtual host <vhost>": the name in a span with `id`
 *  (where tests and links find it); the vhost part only for an object that lives in one. */
export function objectHeading(kind, name, { id, vhost } = {}) {
  return el("h1", {}, `${kind} `, el("span", { class: "name", id }, name),
    vhost === undefined ? null : [" ", el("span", { class: "muted" }, `in virtual host ${vhost}`)]);
}

/** A titled panel: section("Queues", ...content). `attrs` may carry an id or data-*. */
export function panel(title, attrs, ...children) {
  return el("section", { class: "panel", ...attrs }, title ? el("h2", {}, title) : null, ...children);
}

/** A link to a hash route built from raw segments (each one percent-encoded). */
export function routeHref(...segments) {
  return "#/" + segments.map((s) => encodeURIComponent(s)).join("/");
}

export function link(text, ...segments) {
  return el("a", { href: routeHref(...segments) }, text);
}

/** A detail page whose subject is gone (closed, or not the user's to see): the first box says so,
 *  the others are emptied. */
export function gone(what, first, ...others) {
  clear(first, el("p", { class: "muted", dataset: { gone: "1" } }, `This ${what} is closed (or not yours to see).`));
  for (const box of others) clear(box);
}

/** A short text that says a feature is not offered by this broker's API, naming the endpoint. */
export function unavailable(what, endpoint) {
  return el("p", { class: "unavailable", dataset: { unavailable: endpoint } },
    `${what}: not available, as hashbroker's management API does not offer ${endpoint}.`);
}
