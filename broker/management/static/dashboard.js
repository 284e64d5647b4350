// The overview (the landing page): totals, queued messages and message rates over the last ten
// minutes, the node and its listeners (for monitoring users, as the API shows them only to them),
// the queues holding the most messages, and hashbroker's own panels: every hash exchange's
// distribution and ring, and the live trace of the messages going through them.

import * as api from "./api.js";
import { History, lineChart } from "./charts.js";
import { append, bytes, clear, duration, el, link, listTable, num, panel, rate } from "./dom.js";
import { HASH_TYPES, hashCard, loadHashView } from "./hash.js";
import { LiveTrace } from "./hash_live.js";

/** Most hash exchanges drawn on the overview (all of them are on the Hash exchanges page). */
const OVERVIEW_HASH_EXCHANGES = 12;
/** Most queues listed on the overview (all of them are on the Queues page). */
const OVERVIEW_QUEUES = 25;

// only the fields this page shows (?columns= as RabbitMQ's API takes it), not every queue's details
const QUEUE_COLUMNS = "?columns=name,vhost,messages,messages_ready,messages_unacknowledged,consumers," +
  "message_stats.publish_details";
const EXCHANGE_COLUMNS = "?columns=name,vhost,type,arguments";

const QUEUED = [
  { key: "messages_ready", label: "Ready" },
  { key: "messages_unacknowledged", label: "Unacked" },
  { key: "messages", label: "Total" },
];

const RATES = [
  { key: "publish", label: "Publish" },
  { key: "confirm", label: "Publisher confirm" },
  { key: "deliver", label: "Deliver (manual ack)" },
  { key: "deliver_no_ack", label: "Deliver (auto ack)" },
  { key: "ack", label: "Consumer ack" },
  { key: "redeliver", label: "Redelivered" },
  { key: "get", label: "Get (manual ack)" },
  { key: "get_no_ack", label: "Get (auto ack)" },
  { key: "get_empty", label: "Get (empty)" },
  { key: "return_unroutable", label: "Unroutable (return)" },
  { key: "drop_unroutable", label: "Unroutable (drop)" },
];

// Kept across visits to the page (and cleared at logout) so the charts do not restart each time.
let queued = new History();
let rates = new History();
let historyOwner = null;

function sampleHistories(user, overview) {
  if (historyOwner !== user) {
    queued = new History();
    rates = new History();
    historyOwner = user;
  }
  const qt = overview.queue_totals || {};
  queued.add(Object.fromEntries(QUEUED.map((s) => [s.key, qt[s.key] || 0])));
  const ms = overview.message_stats || {};
  const r = {};
  for (const s of RATES) {
    const d = ms[s.key + "_details"];
    r[s.key] = d && typeof d.rate === "number" ? d.rate : 0;
  }
  rates.add(r);
}

function totals(overview) {
  const t = overview.object_totals || {};
  return el("table", { class: "totals", id: "totals" }, el("tr", {},
    [["Connections", "connections", "connections"], ["Channels", "channels", "channels"],
      ["Exchanges", "exchanges", "exchanges"], ["Queues", "queues", "queues"], ["Consumers", "consumers", null]]
      .filter(([, key]) => key in t)
      .map(([label, key, route]) => el("td", { dataset: { total: key, value: t[key] } },
        el("div", { class: "total-value" }, route ? link(num(t[key]), route) : num(t[key])),
        el("div", { class: "total-label" }, label)))));
}

function nodesTable(nodes) {
  return listTable({
    attrs: { id: "nodes" },
    rows: nodes,
    rowAttrs: (n) => ({ dataset: { node: n.name, memAlarm: n.mem_alarm, diskAlarm: n.disk_free_alarm } }),
    columns: [
      { title: "Name", cell: (n) => n.name },
      { title: "File descriptors", num: true, cell: (n) => `${num(n.fd_used)} / ${num(n.fd_total)}` },
      { title: "Memory", num: true, cell: (n) => el("span", { class: n.mem_alarm ? "alarm" : undefined },
        `${bytes(n.mem_used)} / ${bytes(n.mem_limit)} high watermark`) },
      { title: "Disk space", num: true, cell: (n) => el("span", { class: n.disk_free_alarm ? "alarm" : undefined },
        `${bytes(n.disk_free)} free / ${bytes(n.disk_free_limit)} limit`) },
      { title: "Uptime", cell: (n) => duration(n.uptime) },
      { title: "Cores", num: true, cell: (n) => num(n.processors) },
      { title: "State", cell: (n) => {
        const alarms = [n.mem_alarm ? "memory" : "", n.disk_free_alarm ? "disk" : ""].filter(Boolean);
        if (n.store_fault) return el("span", { class: "alarm" }, `store fault: ${n.store_fault} (not confirming)`);
        return alarms.length ? el("span", { class: "alarm" }, `${alarms.join(" & ")} alarm: publishers blocked`)
          : "running";
      } },
    ],
  });
}

function listenersTable(overview) {
  return listTable({
    attrs: { id: "listeners" },
    rows: overview.listeners || [],
    rowAttrs: (l) => ({ dataset: { protocol: l.protocol, port: l.port } }),
    columns: [
      { title: "Protocol", cell: (l) => l.protocol },
      { title: "Bound to", cell: (l) => l.ip_address },
      { title: "Port", num: true, cell: (l) => String(l.port) },
    ],
  });
}

function queuesTable(queues) {
  const top = queues.slice().sort((a, b) => (b.messages || 0) - (a.messages || 0)).slice(0, OVERVIEW_QUEUES);
  return listTable({
    attrs: { id: "queues" },
    rows: top,
    empty: "no queues",
    rowAttrs: (q) => ({ dataset: { queue: q.name, vhost: q.vhost, messages: q.messages ?? 0 } }),
    columns: [
      { title: "Virtual host", cell: (q) => q.vhost },
      { title: "Name", cell: (q) => link(q.name, "queues", q.vhost, q.name) },
      { title: "Ready", num: true, cell: (q) => num(q.messages_ready) },
      { title: "Unacked", num: true, cell: (q) => num(q.messages_unacknowledged) },
      { title: "Total", num: true, cell: (q) => num(q.messages) },
      { title: "Incoming", num: true, cell: (q) => rate(q.message_stats && q.message_stats.publish_details) },
      { title: "Consumers", num: true, cell: (q) => num(q.consumers) },
    ],
  });
}

export function overviewPage(ctx) {
  const head = el("p", { id: "node-facts", class: "muted" });
  const totalsBox = el("div");
  const queuedBox = el("div");
  const ratesBox = el("div");
  const nodesBox = el("div");
  const listenersBox = el("div");
  const queuesBox = el("div");
  const hashBox = el("div", { id: "hash-exchanges" });
  const observed = new Map(); // "vhost\u0000name" -> x-modulus-hash residue -> destination (from the live trace)
  const live = new LiveTrace(ctx, {
    onEntries: (x, entries) => {
      const key = x.vhost + "\u0000" + x.name;
      const seen = observed.get(key) || new Map();
      for (const e of entries) if (e.bucket !== null && e.destination) seen.set(e.bucket, e.destination.name);
      observed.set(key, seen);
    },
  });
  live.node.id = "hash-live";
  const monitor = ctx.user.monitor;
  append(ctx.main,
    el("h1", {}, "Overview"), head,
    panel("Totals", {}, totalsBox),
    panel("Queued messages", { dataset: { chart: "queued" } }, el("p", { class: "help" },
      "Up to the last ten minutes, one point per refresh."), queuedBox),
    panel("Message rates", { dataset: { chart: "rates" } }, el("p", { class: "help" },
      "Per second, as the broker samples them every 5 s."), ratesBox),
    monitor ? panel("Nodes", {}, nodesBox) : null,
    monitor ? panel("Ports and contexts", {}, listenersBox) : null,
    panel("Queues", {}, el("p", { class: "help" }, `The ${OVERVIEW_QUEUES} holding most messages; all on `,
      link("Queues", "queues"), "."), queuesBox),
    panel("Hash exchanges", {}, el("p", { class: "help" },
      "Bars: messages in each bound queue. Marker: the count the binding weights predict " +
      "(bucket share × messages in all of the exchange's queues). ", link("All hash exchanges", "hash"), "."), hashBox),
    panel("Live: messages through hash exchanges", {}, el("p", { class: "help" },
      "The last 25 of each, newest first."), live.node),
    ctx.user.admin ? panel("Definitions", {}, el("p", {}, link("Export or import definitions", "definitions"),
      " (exchanges, queues, bindings, users, virtual hosts, permissions and policies as one JSON file).")) : null,
  );
  return {
    async refresh() {
      const vh = ctx.vhost();
      const [overview, queues, exchanges, nodes] = await Promise.all([
        api.get("/overview"),
        api.get((vh ? api.path("queues", vh) : "/queues") + QUEUE_COLUMNS),
        api.get((vh ? api.path("exchanges", vh) : "/exchanges") + EXCHANGE_COLUMNS),
        monitor ? api.get("/nodes") : Promise.resolve([]),
      ]);
      sampleHistories(ctx.user.name, overview);
      head.textContent = `${overview.product_name} ${overview.product_version}, routes as RabbitMQ ` +
        `${overview.rabbitmq_version}` + (overview.node ? ` · node ${overview.node}` : "") +
        ` · ${overview.erlang_version}`;
      clear(totalsBox, totals(overview));
      clear(queuedBox, lineChart(queued, QUEUED, { name: "queued" }));
      clear(ratesBox, lineChart(rates, RATES, { name: "rates", unit: "/s" }));
      if (monitor) {
        clear(nodesBox, nodesTable(nodes));
        clear(listenersBox, listenersTable(overview));
      }
      clear(queuesBox, queuesTable(queues));
      const hashed = exchanges.filter((x) => HASH_TYPES.includes(x.type)).slice(0, OVERVIEW_HASH_EXCHANGES);
      const qmap = new Map(queues.map((q) => [q.vhost + "\u0000" + q.name, q]));
      const views = await Promise.all(hashed.map((x) => loadHashView(x, qmap)));
      clear(hashBox, views.length ? views.map((v) => hashCard(v, observed.get(v.vhost + "\u0000" + v.name)))
        : el("p", { class: "muted" }, "no x-consistent-hash or x-modulus-hash exchange declared"));
      live.follow(hashed);
    },
    dispose() { live.stop(); },
  };
}

/** Forget the charts' history (at logout, so the next user does not see it). */
export function forgetHistory() {
  historyOwner = null;
}
