// hashbroker dashboard: plain JS, no build step. Polls the management API every 2 s.
// Data attributes (data-queue, data-messages, data-expected, data-bucket-*) make the rendered
// state machine-checkable (tests/test_dashboard.py reads them from headless Chromium's DOM).
"use strict";

const POLL_MS = 2000;
const SVG_NS = "http://www.w3.org/2000/svg";
const COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
                 "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"];
let credentials = { user: "guest", password: "guest" };
let timer = null;

function authHeader() {
  return "Basic " + btoa(credentials.user + ":" + credentials.password);
}

async function api(path) {
  const resp = await fetch("/api" + path, { headers: { Authorization: authHeader() } });
  if (resp.status === 401) throw new Error("login failed for " + credentials.user);
  if (!resp.ok) throw new Error(path + ": HTTP " + resp.status);
  return resp.json();
}

function enc(s) { return encodeURIComponent(s); }

function el(tag, attrs, text) {
  const node = tag.startsWith("svg:") ? document.createElementNS(SVG_NS, tag.slice(4))
                                      : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
  if (text !== undefined) node.textContent = String(text);
  return node;
}

function renderQueues(queues) {
  const body = document.querySelector("#queues tbody");
  body.replaceChildren();
  for (const q of queues) {
    const tr = el("tr", { "data-queue": q.name, "data-vhost": q.vhost, "data-messages": q.messages });
    tr.append(el("td", {}, q.vhost), el("td", {}, q.name),
              el("td", { class: "num" }, q.messages), el("td", { class: "num" }, q.messages_ready),
              el("td", { class: "num" }, q.messages_unacknowledged), el("td", { class: "num" }, q.consumers));
    body.append(tr);
  }
}

// Bar chart: one bar per bound destination (actual messages), a dark marker at the predicted count.
function barChart(ring) {
  const dests = ring.destinations;
  const total = dests.reduce((n, d) => n + (d.messages || 0), 0);
  const rowH = 26, labelW = 170, plotW = 420, width = labelW + plotW + 150;
  const height = Math.max(1, dests.length) * rowH + 30;
  const max = Math.max(1, ...dests.map(d => Math.max(d.messages || 0, d.share * total)));
  const svg = el("svg:svg", { class: "bar-chart", width, height, viewBox: `0 0 ${width} ${height}`,
                              "data-total": total });
  svg.append(el("svg:text", { x: labelW, y: 12 }, `messages (total ${total}); | = predicted by weights`));
  dests.forEach((d, i) => {
    const y = 20 + i * rowH;
    const actual = d.messages || 0;
    const expected = d.share * total;
    const g = el("svg:g", { class: "bar", "data-queue": d.name, "data-kind": d.kind, "data-messages": actual,
                            "data-expected": expected.toFixed(1), "data-share": d.share.toFixed(6),
                            "data-buckets": d.buckets });
    g.append(el("svg:text", { x: labelW - 6, y: y + 15, "text-anchor": "end" }, d.name));
    g.append(el("svg:rect", { x: labelW, y: y + 3, height: rowH - 8, width: plotW * actual / max,
                              fill: COLOURS[i % COLOURS.length] }));
    const mx = labelW + plotW * expected / max;
    g.append(el("svg:line", { x1: mx, x2: mx, y1: y, y2: y + rowH - 2, stroke: "#000", "stroke-width": 2 }));
    const pct = total ? (100 * actual / total).toFixed(1) : "0.0";
    g.append(el("svg:text", { x: labelW + plotW + 6, y: y + 15 },
                `${actual} (${pct}% vs ${(100 * d.share).toFixed(1)}%)`));
    svg.append(g);
  });
  return svg;
}

// The bucket ring: each destination owns one contiguous run of buckets (bindings append runs;
// unbinding shifts later runs down), drawn as an arc of a donut, plus a bucket-range table.
function ringView(ring) {
  const n = ring.ring_size, size = 220, r = 90, c = size / 2;
  const svg = el("svg:svg", { class: "ring", width: size, height: size, viewBox: `0 0 ${size} ${size}`,
                              "data-ring-size": n });
  const table = el("table", { class: "ring-ranges" });
  const head = el("tr");
  head.append(el("th", {}, "buckets"), el("th", {}, "→ destination"));
  table.append(head);
  ring.destinations.forEach((d, i) => {
    const first = d.first_bucket, last = d.first_bucket + d.buckets - 1;
    const colour = COLOURS[i % COLOURS.length];
    const a0 = 2 * Math.PI * first / n - Math.PI / 2, a1 = 2 * Math.PI * (last + 1) / n - Math.PI / 2;
    let shape;
    if (d.buckets === n) {
      shape = el("svg:circle", { cx: c, cy: c, r, fill: "none", stroke: colour, "stroke-width": 30 });
    } else {
      const large = a1 - a0 > Math.PI ? 1 : 0;
      const p = (a) => `${(c + r * Math.cos(a)).toFixed(2)} ${(c + r * Math.sin(a)).toFixed(2)}`;
      shape = el("svg:path", { d: `M ${p(a0)} A ${r} ${r} 0 ${large} 1 ${p(a1)}`, fill: "none",
                               stroke: colour, "stroke-width": 30 });
    }
    shape.setAttribute("data-queue", d.name);
    shape.setAttribute("data-bucket-first", first);
    shape.setAttribute("data-bucket-last", last);
    shape.append(el("svg:title", {}, `buckets ${first}–${last} → ${d.name}`));
    svg.append(shape);
    const tr = el("tr", { "data-queue": d.name, "data-bucket-first": first, "data-bucket-last": last });
    const swatch = el("span", { style: `color:${colour}` }, "■ ");
    const cell = el("td");
    cell.append(swatch, document.createTextNode(`${d.kind} ${d.name}`));
    tr.append(el("td", { class: "num" }, first === last ? `${first}` : `${first}–${last}`), cell);
    table.append(tr);
  });
  svg.append(el("svg:text", { x: c, y: c - 4, "text-anchor": "middle" }, `${n} buckets`));
  svg.append(el("svg:text", { x: c, y: c + 12, "text-anchor": "middle" }, `hash on ${ring.state.hash_on}`));
  const wrap = el("div", { class: "ring-table" });
  wrap.append(table);
  return [svg, wrap];
}

async function renderHashExchanges(exchanges) {
  const box = document.getElementById("hash-exchanges");
  const rings = await Promise.all(exchanges.map(
    x => api(`/hashbroker/exchanges/${enc(x.vhost)}/${enc(x.name)}/ring`)));
  box.replaceChildren();
  if (!rings.length) box.append(el("p", { class: "muted" }, "no x-consistent-hash exchange declared"));
  for (const ring of rings) {
    const sec = el("div", { class: "hash-exchange", "data-exchange": ring.name, "data-vhost": ring.vhost });
    sec.append(el("h3", {}, `${ring.name} (vhost ${ring.vhost}, ${ring.destinations.length} destinations)`));
    const charts = el("div", { class: "charts" });
    charts.append(barChart(ring), ...ringView(ring));
    sec.append(charts);
    box.append(sec);
  }
}

function mb(bytes) { return (bytes / 1e6).toFixed(bytes < 1e8 ? 1 : 0) + " MB"; }

function renderNode(node) {
  const p = document.getElementById("resources");
  const mem = `memory ${mb(node.mem_used)} of ${mb(node.mem_limit)} (high watermark)`;
  const disk = `disk free ${mb(node.disk_free)}, limit ${mb(node.disk_free_limit)}`;
  const alarms = [node.mem_alarm ? "memory" : "", node.disk_free_alarm ? "disk" : ""].filter(Boolean);
  const store = node.store_fault ? ` · STORE FAULT: ${node.store_fault} (not confirming)` : "";
  p.textContent = `${mem} · ${disk} · ` +
    (alarms.length ? `ALARM: ${alarms.join(" & ")}, publishers blocked` : "no resource alarm") + store;
  p.className = alarms.length || node.store_fault ? "error" : "muted";
  p.dataset.memAlarm = String(node.mem_alarm);
  p.dataset.diskAlarm = String(node.disk_free_alarm);
}

async function refresh() {
  const status = document.getElementById("status");
  try {
    const [queues, exchanges, nodes] = await Promise.all([api("/queues"), api("/exchanges"), api("/nodes")]);
    renderQueues(queues);
    if (nodes.length) renderNode(nodes[0]);
    await renderHashExchanges(exchanges.filter(x => x.type === "x-consistent-hash"));
    status.textContent = "updated " + new Date().toLocaleTimeString();
    status.className = "muted";
    document.body.dataset.renders = String(Number(document.body.dataset.renders || 0) + 1);
    document.body.dataset.ready = "1";
  } catch (err) {
    status.textContent = String(err.message || err);
    status.className = "error";
  }
  timer = setTimeout(refresh, POLL_MS);
}

document.getElementById("login").addEventListener("submit", (ev) => {
  ev.preventDefault();
  credentials = { user: document.getElementById("user").value,
                  password: document.getElementById("password").value };
  if (timer !== null) clearTimeout(timer);
  refresh();
});

api("/overview").then(o => {
  document.getElementById("node").textContent =
    `${o.node} · routes as RabbitMQ ${o.rabbitmq_version} · hashbroker ${o.product_version}`;
}).catch(() => {});
refresh();
