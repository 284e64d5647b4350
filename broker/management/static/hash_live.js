// The live view of hash exchanges: the last messages through each x-consistent-hash /
// x-modulus-hash exchange, what was hashed, the bucket it hit and where it went. Polls
// GET /api/hashbroker/exchanges/{vhost}/{name}/hash-trace?since=SEQ every second; each poll keeps
// the broker's watch of that exchange alive (it records nothing once nobody polls for 30 s).
// Rows carry data-* attributes (data-seq, data-routing-key, data-bucket, data-destination,
// data-queues) so the rendered state is machine-checkable from a browser test.

import * as api from "./api.js";
import { clear, el, show } from "./dom.js";

const LIVE_MS = 1000;
export const HASH_TYPES = ["x-consistent-hash", "x-modulus-hash"];

export class LiveTrace {
  /**
   * `keep`: rows shown per exchange. `onEntries(exchange, entries)` sees every new entry (the hash
   * page learns the x-modulus-hash residue → destination map from them).
   */
  constructor(ctx, { keep = 25, onEntries } = {}) {
    this.ctx = ctx;
    this.keep = keep;
    this.onEntries = onEntries;
    this.exchanges = [];
    this.views = new Map(); // "vhost\u0000name" -> {seq, rows, trace}
    this.node = el("div", { class: "hash-live-list" });
    this.timer = null;
    this.polling = false;
    this.stopped = false;
  }

  /** The exchanges to follow ([{vhost, name}]). */
  follow(exchanges) {
    this.exchanges = exchanges;
    if (this.timer === null && !this.polling && !this.stopped) this.poll(); // one poll loop, ever
  }

  stop() {
    this.stopped = true;
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
  }

  async poll() {
    this.timer = null;
    this.polling = true;
    try {
      const order = [];
      for (const x of this.exchanges) {
        const key = x.vhost + "\u0000" + x.name;
        const view = this.views.get(key) || { seq: 0, rows: [] };
        const trace = await api.get(api.path("hashbroker", "exchanges", x.vhost, x.name, "hash-trace") +
          `?since=${view.seq}`);
        if (trace.seq < view.seq) view.rows = []; // the exchange was re-created
        if (this.onEntries && trace.entries.length) this.onEntries(x, trace.entries);
        view.rows = view.rows.concat(trace.entries).slice(-this.keep);
        view.seq = trace.seq;
        view.trace = trace;
        this.views.set(key, view);
        order.push(view);
      }
      if (this.stopped) return;
      this.render(order);
      this.node.dataset.polls = String(Number(this.node.dataset.polls || 0) + 1);
    } catch (err) {
      this.node.dataset.error = String(err.message || err);
      if (err instanceof api.ApiError && err.loginFailed) {
        this.stopped = true;
        this.ctx.loggedOut(err.reason);
      }
    } finally {
      this.polling = false;
      if (!this.stopped) this.timer = setTimeout(() => this.poll(), LIVE_MS);
    }
  }

  render(order) {
    if (!order.length) {
      clear(this.node, el("p", { class: "muted" }, "no x-consistent-hash or x-modulus-hash exchange declared"));
      return;
    }
    clear(this.node, order.map(({ trace, rows }) => el("div", {
      class: "hash-live", dataset: { exchange: trace.name, vhost: trace.vhost },
    },
    el("h3", {}, `${trace.name} `, el("span", { class: "muted" },
      `(vhost ${trace.vhost}, ${trace.type}, hash on ${trace.hash_on})`)),
    el("table", { class: "list" },
      el("thead", {}, el("tr", {}, ["#", "time", "routing key", "hashed", "bucket", "→ destination", "queues"]
        .map((h) => el("th", {}, h)))),
      el("tbody", {}, rows.length ? rows.slice().reverse().map((e) => el("tr", {
        dataset: {
          seq: e.seq, routingKey: e.routing_key, bucket: e.bucket ?? "",
          destination: e.destination ? e.destination.name : "", queues: e.queues.join(","),
        },
      },
      el("td", { class: "num" }, e.seq), el("td", {}, new Date(e.time).toLocaleTimeString()),
      el("td", {}, e.routing_key), el("td", {}, show(e.hashed)),
      el("td", { class: "num" }, e.bucket === null ? "" : `${e.bucket} / ${e.buckets}`),
      el("td", {}, e.destination ? `${e.destination.kind} ${e.destination.name}` : "(nothing bound)"),
      el("td", {}, e.queues.join(", "))))
        : el("tr", {}, el("td", { colspan: 7, class: "muted" }, "waiting for messages…")))))));
  }
}
