// Queues: the list (with state, messages and rates) and a queue's page (consumers, bindings,
// publish, get, purge, delete).

import * as api from "./api.js";
import { History, lineChart } from "./charts.js";
import {
  append, boxes, bytes, clear, el, kvTable, link, listTable, num, objectHeading, panel, rate, rateOf, unavailable,
} from "./dom.js";
import {
  actionButton, bindForm, deleteButton, features, form, getMessagesForm, listPage, publishForm, QUEUE_ARGS,
  unbindButton,
} from "./widgets.js";

function stats(q, key) {
  return rate(q.message_stats && q.message_stats[key + "_details"]);
}

export function queuesPage(ctx) {
  return listPage(ctx, {
    title: "Queues", resource: "queues", noun: "queue", after: addQueueForm(ctx),
    table: (rows, sortState) => listTable({
      attrs: { id: "queue-list" }, sortState, rows,
      empty: "no queues",
      rowAttrs: (q) => ({ dataset: { queue: q.name, vhost: q.vhost, messages: q.messages ?? 0 } }),
      columns: [
        !ctx.vhost() ? { title: "Virtual host", cell: (q) => q.vhost, sort: (q) => q.vhost } : null,
        { title: "Name", cell: (q) => link(q.name, "queues", q.vhost, q.name), sort: (q) => q.name },
        { title: "Type", cell: (q) => q.type, sort: (q) => q.type },
        { title: "Features", cell: (q) => features(q) },
        { title: "State", cell: (q) => el("span", { class: `state ${q.state}` }, q.state), sort: (q) => q.state },
        { title: "Ready", num: true, cell: (q) => num(q.messages_ready), sort: (q) => q.messages_ready },
        { title: "Unacked", num: true, cell: (q) => num(q.messages_unacknowledged), sort: (q) => q.messages_unacknowledged },
        { title: "Total", num: true, cell: (q) => num(q.messages), sort: (q) => q.messages },
        { title: "incoming", num: true, cell: (q) => stats(q, "publish"), sort: (q) => rateOf(q.message_stats, "publish") },
        { title: "deliver / get", num: true, cell: (q) => stats(q, "deliver_get"), sort: (q) => rateOf(q.message_stats, "deliver_get") },
        { title: "ack", num: true, cell: (q) => stats(q, "ack"), sort: (q) => rateOf(q.message_stats, "ack") },
      ].filter(Boolean),
    }),
  });
}

function addQueueForm(ctx) {
  return panel("Add a new queue", {}, form(ctx, {
    id: "add-queue", submit: "Add queue",
    fields: [
      { name: "vhost", label: "Virtual host", type: "vhost" },
      { name: "type", label: "Type", type: "select", value: "classic",
        options: [["classic", "Classic"], ["quorum", "Quorum"], ["stream", "Stream"]] },
      { name: "name", label: "Name", required: true },
      { name: "durable", label: "Durability", type: "select", value: "true",
        options: [["true", "Durable"], ["false", "Transient"]] },
      { name: "auto_delete", label: "Auto delete", type: "select", value: "false",
        options: [["false", "No"], ["true", "Yes"]] },
      { name: "arguments", label: "Arguments", type: "args", quick: QUEUE_ARGS },
    ],
    onSubmit: async (v) => {
      const args = { ...v.arguments };
      if (v.type !== "classic") args["x-queue-type"] = v.type;
      await api.put(api.path("queues", v.vhost, v.name), {
        durable: v.durable === "true", auto_delete: v.auto_delete === "true", arguments: args,
      });
      return `Queue ${v.name} added.`;
    },
  }));
}

const RATE_SERIES = [
  { key: "publish", label: "Publish" }, { key: "deliver_get", label: "Deliver / get" },
  { key: "ack", label: "Consumer ack" }, { key: "redeliver", label: "Redelivered" },
];

export function queuePage(ctx, vhost, name) {
  const [facts, messages, ratesBox, consumers, bindings] = boxes(5);
  const history = new History();
  append(ctx.main,
    objectHeading("Queue", name, { id: "queue-name", vhost }),
    panel("Details", {}, facts),
    panel("Messages", {}, messages),
    panel("Message rates", {}, ratesBox),
    panel("Consumers", {}, consumers),
    panel("Bindings", {}, bindings, bindForm(ctx, { vhost, destination: name, destinationType: "queue" })),
    panel("Publish message", {}, publishForm(ctx, { vhost, exchange: "", routingKey: name })),
    panel("Get messages", {}, getMessagesForm(ctx, { vhost, queue: name })),
    panel("Move messages", {}, unavailable("Moving messages to another queue",
      "the shovel plugin's PUT /api/parameters/shovel/{vhost}/{name}")),
    panel("Delete", {}, deleteButton(ctx, {
      noun: "Queue", name, path: ["queues", vhost, name], id: "delete-queue", label: "Delete Queue",
      then: () => ctx.navigate("#/queues"),
    })),
    panel("Purge", {}, actionButton(ctx, {
      label: "Purge Messages", id: "purge-queue", danger: true,
      confirmText: `Purge all messages of ${name}?`,
      action: async () => {
        await api.del(api.path("queues", vhost, name, "contents"));
        return "Queue purged.";
      },
    })),
  );
  return {
    async refresh() {
      const [q, bs] = await Promise.all([
        api.get(api.path("queues", vhost, name)),
        api.get(api.path("queues", vhost, name, "bindings")),
      ]);
      const ms = q.message_stats || {};
      history.add(Object.fromEntries(RATE_SERIES.map((s) => [s.key, rateOf(ms, s.key)])));
      clear(facts, el("table", { class: "kv", id: "queue-details", dataset: { state: q.state, type: q.type } },
        el("tr", {}, el("th", {}, "Type"), el("td", {}, q.type)),
        el("tr", {}, el("th", {}, "Features"), el("td", {}, features(q))),
        el("tr", {}, el("th", {}, "Arguments"), el("td", {}, kvTable(q.arguments))),
        el("tr", {}, el("th", {}, "Policy"), el("td", {}, q.policy || "")),
        el("tr", {}, el("th", {}, "Effective policy definition"), el("td", {}, kvTable(q.effective_policy_definition))),
        el("tr", {}, el("th", {}, "State"), el("td", {}, q.state)),
        el("tr", {}, el("th", {}, "Node"), el("td", {}, q.node || "")),
        q.members ? el("tr", {}, el("th", {}, "Members"), el("td", {}, q.members.join(", "))) : null,
        el("tr", {}, el("th", {}, "Consumers"), el("td", {}, num(q.consumers))),
        el("tr", {}, el("th", {}, "Consumer capacity"), el("td", {}, `${Math.round(100 * (q.consumer_capacity || 0))}%`)),
        q.owner_pid_details ? el("tr", {}, el("th", {}, "Exclusive owner"),
          el("td", {}, link(q.owner_pid_details.name, "connections", q.owner_pid_details.name))) : null));
      clear(messages, el("table", {
        class: "list", id: "queue-messages",
        dataset: { messages: q.messages ?? 0, ready: q.messages_ready ?? 0, unacked: q.messages_unacknowledged ?? 0 },
      },
      el("tr", {}, ["", "Total", "Ready", "Unacked"].map((h) => el("th", {}, h))),
      el("tr", {}, el("th", {}, "Messages"), el("td", { class: "num" }, num(q.messages)),
        el("td", { class: "num" }, num(q.messages_ready)), el("td", { class: "num" }, num(q.messages_unacknowledged))),
      el("tr", {}, el("th", {}, "Message body bytes"), el("td", { class: "num" }, bytes(q.message_bytes)),
        el("td", { class: "num" }, bytes(q.message_bytes_ready)), el("td", { class: "num" }, bytes(q.message_bytes_unacknowledged)))));
      clear(ratesBox, lineChart(history, RATE_SERIES, { name: "queue-rates", unit: "/s" }));
      clear(consumers, listTable({
        attrs: { id: "consumers" }, rows: q.consumer_details || [], empty: "no consumers",
        rowAttrs: (c) => ({ dataset: { consumerTag: c.consumer_tag } }),
        columns: [
          { title: "Channel", cell: (c) => link(c.channel_details.name, "channels", c.channel_details.name) },
          { title: "Consumer tag", cell: (c) => c.consumer_tag },
          { title: "Ack required", cell: (c) => (c.ack_required ? "●" : "○") },
          { title: "Exclusive", cell: (c) => (c.exclusive ? "●" : "○") },
          { title: "Prefetch count", num: true, cell: (c) => num(c.prefetch_count) },
          { title: "Active", cell: (c) => (c.active ? "●" : "○") },
          { title: "Activity status", cell: (c) => c.activity_status },
          { title: "Arguments", cell: (c) => kvTable(c.arguments) },
        ],
      }));
      clear(bindings, listTable({
        attrs: { id: "queue-bindings" }, rows: bs, empty: "no bindings",
        rowAttrs: (b) => ({ dataset: { source: b.source, routingKey: b.routing_key } }),
        columns: [
          { title: "From", cell: (b) => (b.source === "" ? el("span", { class: "muted" }, "(Default exchange binding)")
            : link(b.source, "exchanges", vhost, b.source)) },
          { title: "Routing key", cell: (b) => b.routing_key },
          { title: "Arguments", cell: (b) => kvTable(b.arguments) },
          { title: "", cell: (b) => (b.source === "" ? "" : unbindButton(ctx, b)) },
        ],
      }));
    },
  };
}
