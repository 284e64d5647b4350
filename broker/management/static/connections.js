// Connections and channels. The API shows a user its own connections and channels, and a
// monitoring user or administrator all of them; the pages show what the API returns.

import * as api from "./api.js";
import {
  append, boxes, clear, el, gone, kvTable, link, listTable, num, objectHeading, panel, rate, unavailable, when,
} from "./dom.js";
import { form, listPage } from "./widgets.js";

function connectionLabel(c) {
  return c.user_provided_name ? [link(c.name, "connections", c.name), el("div", { class: "muted" }, c.user_provided_name)]
    : link(c.name, "connections", c.name);
}

export function connectionsPage(ctx) {
  return listPage(ctx, {
    title: "Connections",
    key: (c) => c.name + " " + (c.user_provided_name || ""),
    load: async (vh) => (await api.get("/connections")).filter((c) => !vh || c.vhost === vh),
    table: (rows, sortState) => listTable({
      attrs: { id: "connection-list" }, sortState, rows, empty: "no connections",
      rowAttrs: (c) => ({ dataset: { connection: c.name, user: c.user, vhost: c.vhost } }),
      columns: [
        !ctx.vhost() ? { title: "Virtual host", cell: (c) => c.vhost, sort: (c) => c.vhost } : null,
        { title: "Name", cell: connectionLabel, sort: (c) => c.name },
        { title: "User name", cell: (c) => c.user, sort: (c) => c.user },
        { title: "State", cell: (c) => c.state, sort: (c) => c.state },
        { title: "SSL / TLS", cell: (c) => (c.ssl ? "●" : "○") },
        { title: "Protocol", cell: (c) => c.protocol },
        { title: "Channels", num: true, cell: (c) => num(c.channels), sort: (c) => c.channels },
        { title: "From client", num: true, cell: (c) => rate(c.recv_oct_details) },
        { title: "To client", num: true, cell: (c) => rate(c.send_oct_details) },
      ].filter(Boolean),
    }),
  });
}

function channelsTable(ctx, rows, { id, sortState, showVhost }) {
  return listTable({
    attrs: { id }, sortState, rows, empty: "no channels",
    rowAttrs: (ch) => ({ dataset: { channel: ch.name, user: ch.user } }),
    columns: [
      showVhost ? { title: "Virtual host", cell: (ch) => ch.vhost, sort: (ch) => ch.vhost } : null,
      { title: "Channel", cell: (ch) => link(ch.name, "channels", ch.name), sort: (ch) => ch.name },
      { title: "User name", cell: (ch) => ch.user, sort: (ch) => ch.user },
      { title: "Mode", cell: (ch) => [ch.confirm ? el("abbr", { title: "Confirm" }, "C") : null,
        ch.transactional ? el("abbr", { title: "Transactional" }, "T") : null] },
      { title: "State", cell: (ch) => ch.state },
      { title: "Unconfirmed", num: true, cell: (ch) => num(ch.messages_unconfirmed) },
      { title: "Prefetch", num: true, cell: (ch) => num(ch.prefetch_count) },
      { title: "Unacked", num: true, cell: (ch) => num(ch.messages_unacknowledged), sort: (ch) => ch.messages_unacknowledged },
      { title: "Consumers", num: true, cell: (ch) => num(ch.consumer_count), sort: (ch) => ch.consumer_count },
      { title: "publish", num: true, cell: (ch) => rate(ch.message_stats && ch.message_stats.publish_details) },
      { title: "deliver / get", num: true, cell: (ch) => rate(ch.message_stats && ch.message_stats.deliver_get_details) },
      { title: "ack", num: true, cell: (ch) => rate(ch.message_stats && ch.message_stats.ack_details) },
    ].filter(Boolean),
  });
}

export function connectionPage(ctx, name) {
  const [facts, client, channels] = boxes(3);
  append(ctx.main,
    objectHeading("Connection", name, { id: "connection-name" }),
    panel("Details", {}, facts),
    panel("Client properties", {}, client),
    panel("Channels", {}, channels),
    panel("Close this connection", {}, api.FEATURES.closeConnection ? form(ctx, {
      id: "close-connection", submit: "Force Close", confirmText: `Close connection ${name}?`,
      fields: [{ name: "reason", label: "Reason", value: "Closed via management plugin", size: 40 }],
      onSubmit: async (v) => {
        await api.del(api.path("connections", name), { headers: { "x-reason": v.reason } });
        ctx.navigate("#/connections");
        return "Connection closed.";
      },
    }) : unavailable("Closing a connection", "DELETE /api/connections/{name}")),
  );
  return {
    async refresh() {
      // GET /api/connections/{name} is not offered: the connection is found in the list
      const [all, chans] = await Promise.all([api.get("/connections"), api.get("/channels")]);
      const c = all.find((x) => x.name === name);
      if (!c) {
        gone("connection", facts, client, channels);
        return;
      }
      clear(facts, el("table", { class: "kv", id: "connection-details" },
        [["User name", c.user], ["Virtual host", c.vhost], ["Protocol", c.protocol], ["State", c.state],
          ["Client", `${c.peer_host}:${c.peer_port}`], ["Server", `${c.host}:${c.port}`],
          ["Authentication", c.auth_mechanism], ["Heartbeat", `${c.timeout}s`], ["Frame max", `${num(c.frame_max)} bytes`],
          ["Channel limit", num(c.channel_max)], ["Connected at", when(c.connected_at)],
          ["Received", `${num(c.recv_oct)} bytes (${num(c.recv_cnt)} packets)`],
          ["Sent", `${num(c.send_oct)} bytes (${num(c.send_cnt)} packets)`]]
          .map(([k, v]) => el("tr", {}, el("th", {}, k), el("td", {}, v ?? "")))));
      clear(client, kvTable(c.client_properties, { id: "client-properties" }));
      clear(channels, channelsTable(ctx, chans.filter((ch) => ch.connection_details.name === name),
        { id: "connection-channels" }));
    },
  };
}

export function channelsPage(ctx) {
  const box = el("div");
  const sortState = { column: -1, descending: false };
  append(ctx.main,el("h1", {}, "Channels"), panel("All channels", {}, box));
  return {
    async refresh() {
      const vh = ctx.vhost();
      const rows = (await api.get("/channels")).filter((ch) => !vh || ch.vhost === vh);
      clear(box, channelsTable(ctx, rows, { id: "channel-list", sortState, showVhost: !vh }));
    },
  };
}

/** A channel's page, built from /api/channels and /api/consumers (there is no per-channel endpoint). */
export function channelPage(ctx, name) {
  const [facts, consumers] = boxes(2);
  append(ctx.main,
    objectHeading("Channel", name, { id: "channel-name" }),
    panel("Details", {}, facts),
    panel("Consumers", {}, consumers),
  );
  return {
    async refresh() {
      const [chans, cons] = await Promise.all([api.get("/channels"), api.get("/consumers")]);
      const ch = chans.find((x) => x.name === name);
      if (!ch) {
        gone("channel", facts, consumers);
        return;
      }
      clear(facts, el("table", { class: "kv", id: "channel-details" },
        [["Connection", link(ch.connection_details.name, "connections", ch.connection_details.name)],
          ["Number", ch.number], ["User name", ch.user], ["Virtual host", ch.vhost], ["State", ch.state],
          ["Mode", [ch.confirm ? "confirm" : "", ch.transactional ? "transactional" : ""].filter(Boolean).join(", ") || "none"],
          ["Prefetch count", num(ch.prefetch_count)], ["Global prefetch count", num(ch.global_prefetch_count)],
          ["Messages unacknowledged", num(ch.messages_unacknowledged)], ["Consumers", num(ch.consumer_count)]]
          .map(([k, v]) => el("tr", {}, el("th", {}, k), el("td", {}, v)))));
      clear(consumers, listTable({
        attrs: { id: "channel-consumers" }, empty: "no consumers",
        rows: cons.filter((c) => c.channel_details.name === name),
        rowAttrs: (c) => ({ dataset: { consumerTag: c.consumer_tag } }),
        columns: [
          { title: "Consumer tag", cell: (c) => c.consumer_tag },
          { title: "Queue", cell: (c) => link(c.queue.name, "queues", c.queue.vhost, c.queue.name) },
          { title: "Ack required", cell: (c) => (c.ack_required ? "●" : "○") },
          { title: "Exclusive", cell: (c) => (c.exclusive ? "●" : "○") },
          { title: "Prefetch count", num: true, cell: (c) => num(c.prefetch_count) },
          { title: "Active", cell: (c) => (c.active ? "●" : "○") },
        ],
      }));
    },
  };
}
