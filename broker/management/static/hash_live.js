// hashbroker dashboard, live view of hash exchanges: the last messages through each
// x-consistent-hash / x-modulus-hash exchange, what was hashed, the bucket it hit and where it went.
// Polls GET /api/hashbroker/exchanges/{vhost}/{name}/hash-trace?since=SEQ every second; each poll
// keeps the broker's watch of that exchange alive (it records nothing once nobody polls for 30 s).
// Rows carry data-* attributes (data-seq, data-routing-key, data-bucket, data-destination) so the
// rendered state is machine-checkable (tests/test_hash_trace.py reads them from Chromium's DOM).
"use strict";

(() => {
  const LIVE_MS = 1000;
  const KEEP = 25;  // rows shown per exchange
  const HASH_TYPES = ["x-consistent-hash", "x-modulus-hash"];
  const views = new Map();  // "vhost\u0000name" -> {seq, rows: [...]}

  function auth() {
    const user = document.getElementById("user").value;
    const password = document.getElementById("password").value;
    return "Basic " + btoa(user + ":" + password);
  }

  async function get(path) {
    const resp = await fetch("/api" + path, { headers: { Authorization: auth() } });
    if (!resp.ok) throw new Error(path + ": HTTP " + resp.status);
    return resp.json();
  }

  function cell(tag, text, attrs) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
    node.textContent = text === null || text === undefined ? "" : String(text);
    return node;
  }

  function show(value) {
    return typeof value === "string" ? value : JSON.stringify(value);
  }

  function render(box, order) {
    box.replaceChildren();
    if (!order.length) {
      box.append(cell("p", "no x-consistent-hash or x-modulus-hash exchange declared", { class: "muted" }));
      return;
    }
    for (const [key, trace] of order) {
      const view = views.get(key);
      const sec = cell("div", "", { class: "hash-live", "data-exchange": trace.name, "data-vhost": trace.vhost });
      sec.append(cell("h3", `${trace.name} (vhost ${trace.vhost}, ${trace.type}, hash on ${trace.hash_on})`));
      const table = document.createElement("table");
      const head = document.createElement("tr");
      for (const h of ["#", "time", "routing key", "hashed", "bucket", "→ destination", "queues"]) {
        head.append(cell("th", h));
      }
      table.append(head);
      for (const e of view.rows.slice().reverse()) {
        const dest = e.destination ? `${e.destination.kind} ${e.destination.name}` : "(nothing bound)";
        const tr = cell("tr", "", {
          "data-seq": e.seq, "data-routing-key": e.routing_key, "data-bucket": e.bucket ?? "",
          "data-destination": e.destination ? e.destination.name : "", "data-queues": e.queues.join(","),
        });
        tr.append(cell("td", e.seq, { class: "num" }), cell("td", new Date(e.time).toLocaleTimeString()),
                  cell("td", e.routing_key), cell("td", show(e.hashed)),
                  cell("td", e.bucket === null ? "" : `${e.bucket} / ${e.buckets}`, { class: "num" }),
                  cell("td", dest), cell("td", e.queues.join(", ")));
        table.append(tr);
      }
      if (!view.rows.length) {
        const tr = document.createElement("tr");
        tr.append(cell("td", "waiting for messages…", { colspan: 7, class: "muted" }));
        table.append(tr);
      }
      sec.append(table);
      box.append(sec);
    }
  }

  async function poll() {
    const box = document.getElementById("hash-live");
    try {
      const exchanges = (await get("/exchanges")).filter(x => HASH_TYPES.includes(x.type));
      const order = [];
      for (const x of exchanges) {
        const key = x.vhost + "\u0000" + x.name;
        const view = views.get(key) || { seq: 0, rows: [] };
        const trace = await get(`/hashbroker/exchanges/${encodeURIComponent(x.vhost)}/` +
                                `${encodeURIComponent(x.name)}/hash-trace?since=${view.seq}`);
        if (trace.seq < view.seq) view.rows = [];  // the exchange was re-created
        view.rows = view.rows.concat(trace.entries).slice(-KEEP);
        view.seq = trace.seq;
        views.set(key, view);
        order.push([key, trace]);
      }
      render(box, order);
      box.dataset.polls = String(Number(box.dataset.polls || 0) + 1);
    } catch (err) {
      box.dataset.error = String(err.message || err);
    }
    setTimeout(poll, LIVE_MS);
  }

  poll();
})();
