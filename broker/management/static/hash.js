// hashbroker's own pages: how an x-consistent-hash or x-modulus-hash exchange spreads messages over
// its destinations. The bar chart puts each destination's messages next to the count its share of
// the buckets predicts; the ring shows which buckets each destination owns. Data attributes
// (data-queue, data-messages, data-expected, data-share, data-bucket-first/last) make the rendered
// state checkable from a browser test.

import * as api from "./api.js";
import { COLOURS } from "./charts.js";
import { append, clear, el, link, num, objectHeading, panel, routeHref, show, svg } from "./dom.js";
import { HASH_TYPES, LiveTrace } from "./hash_live.js";

export { HASH_TYPES };

/**
 * The distribution of one hash exchange: x-consistent-hash from its ring
 * (GET /api/hashbroker/exchanges/{vhost}/{name}/ring); x-modulus-hash from its bindings, one
 * residue per binding (the ring endpoint reports no route table for it). `queues` maps
 * "vhost\u0000name" to the queue objects of /api/queues, for the message counts.
 */
export async function loadHashView(x, queues) {
  if (x.type === "x-consistent-hash") {
    const ring = await api.get(api.path("hashbroker", "exchanges", x.vhost, x.name, "ring"));
    return {
      vhost: ring.vhost, name: ring.name, type: ring.type, modulus: false, arguments: ring.arguments,
      hashOn: ring.state.hash_on, size: ring.ring_size, destinations: ring.destinations,
    };
  }
  const bindings = await api.get(api.path("exchanges", x.vhost, x.name, "bindings", "source"));
  const byName = new Map();
  for (const b of bindings) {
    const kind = b.destination_type;
    const key = kind + "\u0000" + b.destination;
    const d = byName.get(key) || { kind, name: b.destination, buckets: 0, first_bucket: null };
    d.buckets += 1;
    byName.set(key, d);
  }
  const destinations = [...byName.values()];
  for (const d of destinations) {
    d.share = bindings.length ? d.buckets / bindings.length : 0;
    const q = d.kind === "queue" ? queues.get(x.vhost + "\u0000" + d.name) : undefined;
    d.messages = q ? (q.messages_ready || 0) + (q.messages_unacknowledged || 0) : null;
  }
  return {
    vhost: x.vhost, name: x.name, type: x.type, modulus: true, arguments: x.arguments,
    hashOn: "routing keys", size: bindings.length, destinations,
  };
}

/** Bars: messages in each destination; a dark marker at the count the weights predict. */
export function barChart(view) {
  const dests = view.destinations;
  const total = dests.reduce((n, d) => n + (d.messages || 0), 0);
  const rowH = 26, labelW = 170, plotW = 380, width = labelW + plotW + 170;
  const height = Math.max(1, dests.length) * rowH + 30;
  const max = Math.max(1, ...dests.map((d) => Math.max(d.messages || 0, d.share * total)));
  const chart = svg("svg", { class: "bar-chart", width, height, viewBox: `0 0 ${width} ${height}`,
    dataset: { total } });
  chart.append(svg("text", { x: labelW, y: 12 }, `messages (total ${total}); | = predicted by the weights`));
  dests.forEach((d, i) => {
    const y = 20 + i * rowH;
    const actual = d.messages || 0;
    const expected = d.share * total;
    const g = svg("g", { class: "bar", dataset: {
      queue: d.name, kind: d.kind, messages: actual, expected: expected.toFixed(1),
      share: d.share.toFixed(6), buckets: d.buckets,
    } });
    g.append(svg("text", { x: labelW - 6, y: y + 15, "text-anchor": "end" }, d.name));
    g.append(svg("rect", { x: labelW, y: y + 3, height: rowH - 8, width: plotW * actual / max,
      fill: COLOURS[i % COLOURS.length] }));
    const mx = labelW + plotW * expected / max;
    g.append(svg("line", { x1: mx, x2: mx, y1: y, y2: y + rowH - 2, stroke: "#000", "stroke-width": 2 }));
    const pct = total ? (100 * actual / total).toFixed(1) : "0.0";
    g.append(svg("text", { x: labelW + plotW + 6, y: y + 15 },
      `${actual} (${pct}% vs ${(100 * d.share).toFixed(1)}%)`));
    chart.append(g);
  });
  return chart;
}

function arc(c, r, from, to, n) {
  const a0 = 2 * Math.PI * from / n - Math.PI / 2, a1 = 2 * Math.PI * to / n - Math.PI / 2;
  const p = (a) => `${(c + r * Math.cos(a)).toFixed(2)} ${(c + r * Math.sin(a)).toFixed(2)}`;
  return `M ${p(a0)} A ${r} ${r} 0 ${a1 - a0 > Math.PI ? 1 : 0} 1 ${p(a1)}`;
}

/**
 * The buckets as a donut. x-consistent-hash: each destination owns one contiguous run (bindings
 * append runs; unbinding shifts later runs down), listed in a bucket-range table. x-modulus-hash:
 * one residue per binding, coloured by the destination the live trace saw it route to
 * (`observed`: residue -> name); residues not seen yet are grey.
 */
export function ringView(view, observed) {
  const n = view.size, size = 220, r = 90, c = size / 2;
  const ring = svg("svg", { class: "ring", width: size, height: size, viewBox: `0 0 ${size} ${size}`,
    dataset: { ringSize: n } });
  const colourOf = new Map(view.destinations.map((d, i) => [d.name, COLOURS[i % COLOURS.length]]));
  const table = el("table", { class: "ring-ranges list" },
    el("tr", {}, el("th", {}, view.modulus ? "residue" : "buckets"), el("th", {}, "→ destination")));
  if (n === 0) {
    ring.append(svg("circle", { cx: c, cy: c, r, fill: "none", stroke: "#ddd", "stroke-width": 30 }));
  } else if (!view.modulus) {
    for (const d of view.destinations) {
      const first = d.first_bucket, last = d.first_bucket + d.buckets - 1;
      const colour = colourOf.get(d.name);
      const shape = d.buckets === n
        ? svg("circle", { cx: c, cy: c, r, fill: "none", stroke: colour, "stroke-width": 30 })
        : svg("path", { d: arc(c, r, first, last + 1, n), fill: "none", stroke: colour, "stroke-width": 30 });
      shape.dataset.queue = d.name;
      shape.dataset.bucketFirst = first;
      shape.dataset.bucketLast = last;
      shape.append(svg("title", {}, `buckets ${first}–${last} → ${d.name}`));
      ring.append(shape);
      table.append(el("tr", { dataset: { queue: d.name, bucketFirst: first, bucketLast: last } },
        el("td", { class: "num" }, first === last ? `${first}` : `${first}–${last}`),
        el("td", {}, el("span", { style: `color:${colour}` }, "■ "), `${d.kind} ${d.name}`)));
    }
  } else {
    for (let residue = 0; residue < n; residue++) {
      const name = observed ? observed.get(residue) : undefined;
      const colour = name !== undefined ? colourOf.get(name) || "#999" : "#ddd";
      const shape = n === 1
        ? svg("circle", { cx: c, cy: c, r, fill: "none", stroke: colour, "stroke-width": 30 })
        : svg("path", { d: arc(c, r, residue + 0.02, residue + 0.98, n), fill: "none", stroke: colour, "stroke-width": 30 });
      shape.dataset.residue = residue;
      if (name !== undefined) shape.dataset.queue = name;
      shape.append(svg("title", {}, `residue ${residue} → ${name ?? "not seen yet"}`));
      ring.append(shape);
      table.append(el("tr", { dataset: { residue, destination: name ?? "" } },
        el("td", { class: "num" }, residue),
        el("td", {}, name !== undefined ? [el("span", { style: `color:${colourOf.get(name) || "#999"}` }, "■ "), name]
          : el("span", { class: "muted" }, "not seen in the live trace yet"))));
    }
  }
  ring.append(svg("text", { x: c, y: c - 4, "text-anchor": "middle" }, `${n} ${view.modulus ? "residues" : "buckets"}`));
  ring.append(svg("text", { x: c, y: c + 12, "text-anchor": "middle" }, `hash on ${view.hashOn}`));
  return [ring, el("div", { class: "ring-table" }, table)];
}

/** One exchange's chart and ring, titled with a link to its hash page. */
export function hashCard(view, observed) {
  const dests = view.destinations.length;
  return el("div", { class: "hash-exchange", dataset: { exchange: view.name, vhost: view.vhost, type: view.type } },
    el("h3", {}, el("a", { href: routeHref("hash", view.vhost, view.name) }, view.name), " ",
      el("span", { class: "muted" }, `(vhost ${view.vhost}, ${view.type}, ${dests} destination${dests === 1 ? "" : "s"})`)),
    el("div", { class: "charts" }, barChart(view), ...ringView(view, observed)));
}

function queueMap(queues) {
  return new Map(queues.map((q) => [q.vhost + "\u0000" + q.name, q]));
}

const EXPLAIN = el.bind(null, "p", { class: "help" });

/** #/hash: every hash exchange of the selected vhost(s), with charts and the live trace. */
export function hashListPage(ctx) {
  const cards = el("div", { class: "hash-exchanges" });
  const live = new LiveTrace(ctx);
  append(ctx.main,
    panel("Hash exchanges", {},
      EXPLAIN("Bars: messages in each bound queue. Marker: the count the binding weights predict " +
        "(bucket share × messages in all of the exchange's queues). Ring: the buckets each destination owns."),
      cards),
    panel("Live: messages through hash exchanges", {}, EXPLAIN("The last 25 messages of each, newest first."), live.node));
  return {
    async refresh() {
      const vh = ctx.vhost();
      const [exchanges, queues] = await Promise.all([
        api.get(vh ? api.path("exchanges", vh) : "/exchanges"),
        api.get(vh ? api.path("queues", vh) : "/queues"),
      ]);
      const hashed = exchanges.filter((x) => HASH_TYPES.includes(x.type));
      const qs = queueMap(queues);
      const views = await Promise.all(hashed.map((x) => loadHashView(x, qs)));
      clear(cards, views.length ? views.map((v) => hashCard(v)) : el("p", { class: "muted" }, "no hash exchange declared"));
      live.follow(hashed);
    },
    dispose() { live.stop(); },
  };
}

/** #/hash/{vhost}/{name}: one exchange's distribution, ring, bindings' weights and live trace. */
export function hashExchangePage(ctx, vhost, name) {
  const observed = new Map(); // x-modulus-hash residue -> destination name, from the live trace
  let lastView = null;
  const card = el("div");
  const facts = el("div");
  const weights = el("div");
  const redraw = () => {
    if (lastView) clear(card, hashCard(lastView, observed));
  };
  const live = new LiveTrace(ctx, {
    keep: 50,
    onEntries: (_x, entries) => {
      let changed = false;
      for (const e of entries) {
        if (e.bucket !== null && e.destination && observed.get(e.bucket) !== e.destination.name) {
          observed.set(e.bucket, e.destination.name);
          changed = true;
        }
      }
      if (changed && lastView && lastView.modulus) redraw();
    },
  });
  append(ctx.main,
    objectHeading("Hash exchange:", name, { vhost }),
    el("p", {}, link("Exchange page (bindings, publish, delete)", "exchanges", vhost, name)),
    panel("Details", {}, facts),
    panel("Distribution", {}, EXPLAIN("Bars: messages in each destination; marker: what the bucket shares predict. " +
      "x-modulus-hash has one residue per binding; the ring colours a residue once the live trace has seen it."), card),
    panel("Bindings and weights", {}, weights),
    panel("Live: messages through this exchange", {}, EXPLAIN("The last 50 messages, newest first. While this " +
      "page is open the broker records what each message hashed to."), live.node));
  return {
    async refresh() {
      const [x, queues, bindings] = await Promise.all([
        api.get(api.path("exchanges", vhost, name)),
        api.get(api.path("queues", vhost)),
        api.get(api.path("exchanges", vhost, name, "bindings", "source")),
      ]);
      if (!HASH_TYPES.includes(x.type)) {
        clear(card, el("p", {}, `${name} is a ${x.type} exchange: it does not hash.`));
        return;
      }
      lastView = await loadHashView(x, queueMap(queues));
      redraw();
      const args = x.arguments || {};
      clear(facts, el("table", { class: "kv" },
        el("tr", {}, el("th", {}, "Type"), el("td", {}, x.type)),
        el("tr", {}, el("th", {}, "Hashes"), el("td", {}, args["hash-header"] !== undefined
          ? `the header ${show(args["hash-header"])}` : args["hash-property"] !== undefined
            ? `the property ${show(args["hash-property"])}` : x.type === "x-modulus-hash"
              ? "the routing key and CC/BCC keys" : "the routing key")),
        el("tr", {}, el("th", {}, lastView.modulus ? "Residues" : "Buckets"), el("td", {}, num(lastView.size))),
        el("tr", {}, el("th", {}, "Messages in destinations"),
          el("td", {}, num(lastView.destinations.reduce((n, d) => n + (d.messages || 0), 0))))));
      clear(weights, el("table", { class: "list" },
        el("tr", {}, el("th", {}, "To"), el("th", {}, x.type === "x-modulus-hash" ? "Routing key (ignored)" : "Weight (routing key)")),
        bindings.length ? bindings.map((b) => el("tr", { dataset: { destination: b.destination } },
          el("td", {}, b.destination_type === "queue" ? link(b.destination, "queues", vhost, b.destination)
            : link(b.destination, "exchanges", vhost, b.destination)),
          el("td", {}, b.routing_key)))
          : el("tr", {}, el("td", { colspan: 2, class: "muted" }, "no bindings"))));
      live.follow([{ vhost, name }]);
    },
    dispose() { live.stop(); },
  };
}
