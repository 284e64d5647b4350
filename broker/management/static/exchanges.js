// Exchanges: the list (type, features, rates) and an exchange's page (bindings in and out, bind,
// unbind, publish, delete; hash exchanges link to their distribution page).

import * as api from "./api.js";
import { History, lineChart } from "./charts.js";
import {
  append, boxes, clear, el, kvTable, link, listTable, objectHeading, panel, rate, rateOf, routeHref,
} from "./dom.js";
import { HASH_TYPES, hashCard, loadHashView } from "./hash.js";
import { bindForm, deleteButton, features, form, listPage, publishForm, unbindButton } from "./widgets.js";

function displayName(name) {
  return name === "" ? "(AMQP default)" : name;
}

export function exchangesPage(ctx) {
  return listPage(ctx, {
    title: "Exchanges", resource: "exchanges", noun: "exchange", after: addExchangeForm(ctx),
    table: (rows, sortState) => listTable({
      attrs: { id: "exchange-list" }, sortState, rows,
      rowAttrs: (x) => ({ dataset: { exchange: x.name, vhost: x.vhost, type: x.type } }),
      columns: [
        !ctx.vhost() ? { title: "Virtual host", cell: (x) => x.vhost, sort: (x) => x.vhost } : null,
        { title: "Name", cell: (x) => link(displayName(x.name), "exchanges", x.vhost, api.exchangeSegment(x.name)),
          sort: (x) => x.name },
        { title: "Type", cell: (x) => (HASH_TYPES.includes(x.type)
          ? [x.type, " ", el("a", { href: routeHref("hash", x.vhost, x.name), class: "hash-link" }, "distribution")]
          : x.type), sort: (x) => x.type },
        { title: "Features", cell: (x) => features(x) },
        { title: "Message rate in", num: true, cell: (x) => rate(x.message_stats && x.message_stats.publish_in_details),
          sort: (x) => rateOf(x.message_stats, "publish_in") },
        { title: "Message rate out", num: true, cell: (x) => rate(x.message_stats && x.message_stats.publish_out_details),
          sort: (x) => rateOf(x.message_stats, "publish_out") },
      ].filter(Boolean),
    }),
  });
}

const EXCHANGE_ARGS = [
  ["Alternate exchange", "alternate-exchange"], ["Hash header", "hash-header"],
  ["Hash property", "hash-property"], ["Delayed type", "x-delayed-type"],
];

function addExchangeForm(ctx) {
  const types = (ctx.overview.exchange_types || []).map((t) => t.name);
  return panel("Add a new exchange", {}, form(ctx, {
    id: "add-exchange", submit: "Add exchange",
    fields: [
      { name: "vhost", label: "Virtual host", type: "vhost" },
      { name: "name", label: "Name", required: true },
      { name: "type", label: "Type", type: "select", value: "direct", options: types.length ? types : ["direct"] },
      { name: "durable", label: "Durability", type: "select", value: "true",
        options: [["true", "Durable"], ["false", "Transient"]] },
      { name: "auto_delete", label: "Auto delete", type: "select", value: "false",
        options: [["false", "No"], ["true", "Yes"]] },
      { name: "internal", label: "Internal", type: "select", value: "false", options: [["false", "No"], ["true", "Yes"]] },
      { name: "arguments", label: "Arguments", type: "args", quick: EXCHANGE_ARGS },
    ],
    onSubmit: async (v) => {
      await api.put(api.path("exchanges", v.vhost, v.name), {
        type: v.type, durable: v.durable === "true", auto_delete: v.auto_delete === "true",
        internal: v.internal === "true", arguments: v.arguments,
      });
      return `Exchange ${v.name} added.`;
    },
  }));
}

const RATE_SERIES = [{ key: "publish_in", label: "Publish (in)" }, { key: "publish_out", label: "Publish (out)" }];

function bindingsTable(ctx, vhost, rows, side, id) {
  return listTable({
    attrs: { id }, rows, empty: "no bindings",
    rowAttrs: (b) => ({ dataset: { source: b.source, destination: b.destination, routingKey: b.routing_key } }),
    columns: [
      side === "out"
        ? { title: "To", cell: (b) => (b.destination_type === "queue"
          ? ["queue ", link(b.destination, "queues", vhost, b.destination)]
          : ["exchange ", link(b.destination, "exchanges", vhost, b.destination)]) }
        : { title: "From", cell: (b) => link(b.source, "exchanges", vhost, b.source) },
      { title: "Routing key", cell: (b) => b.routing_key },
      { title: "Arguments", cell: (b) => kvTable(b.arguments) },
      { title: "", cell: (b) => unbindButton(ctx, b) },
    ],
  });
}

export function exchangePage(ctx, vhost, segment) {
  const name = segment === "amq.default" ? "" : segment;
  const isDefault = name === "";
  const builtIn = isDefault || name.startsWith("amq.");
  const [facts, ratesBox, out, into, hashBox] = boxes(5);
  const history = new History();
  append(ctx.main,
    objectHeading("Exchange", displayName(name), { id: "exchange-name", vhost }),
    panel("Details", {}, facts),
    panel("Message rates", {}, ratesBox),
    hashBox,
    isDefault
      ? panel("Bindings", {}, el("p", { class: "help" }, "The default exchange is bound to every queue, with the " +
        "queue's name as routing key. No binding can be added to or removed from it, and it cannot be deleted."))
      : panel("Bindings", {}, el("h3", {}, "From this exchange"), out,
        el("h3", {}, "To this exchange"), into, bindForm(ctx, { vhost, source: name })),
    panel("Publish message", {}, publishForm(ctx, { vhost, exchange: name })),
    builtIn ? null : panel("Delete this exchange", {}, deleteButton(ctx, {
      noun: "Exchange", name, path: ["exchanges", vhost, name], id: "delete-exchange",
      then: () => ctx.navigate("#/exchanges"),
    })),
  );
  return {
    async refresh() {
      const x = await api.get(api.path("exchanges", vhost, api.exchangeSegment(name)));
      const [src, dst] = isDefault ? [[], []] : await Promise.all([
        api.get(api.path("exchanges", vhost, name, "bindings", "source")),
        api.get(api.path("exchanges", vhost, name, "bindings", "destination")),
      ]);
      history.add(Object.fromEntries(RATE_SERIES.map((s) => [s.key, rateOf(x.message_stats, s.key)])));
      clear(facts, el("table", { class: "kv", id: "exchange-details", dataset: { type: x.type } },
        el("tr", {}, el("th", {}, "Type"), el("td", {}, x.type)),
        el("tr", {}, el("th", {}, "Features"), el("td", {}, features(x))),
        el("tr", {}, el("th", {}, "Arguments"), el("td", {}, kvTable(x.arguments))),
        el("tr", {}, el("th", {}, "Policy"), el("td", {}, x.policy || ""))));
      clear(ratesBox, lineChart(history, RATE_SERIES, { name: "exchange-rates", unit: "/s" }));
      if (!isDefault) {
        clear(out, bindingsTable(ctx, vhost, src, "out", "bindings-out"));
        clear(into, bindingsTable(ctx, vhost, dst, "in", "bindings-in"));
      }
      if (HASH_TYPES.includes(x.type)) {
        const queues = await api.get(api.path("queues", vhost));
        const view = await loadHashView(x, new Map(queues.map((q) => [q.vhost + "\u0000" + q.name, q])));
        clear(hashBox, panel("Hash distribution", {}, hashCard(view),
          el("p", {}, link("Live trace and ring details", "hash", vhost, name))));
      }
    },
  };
}
