// Forms and the actions shared by several pages (publish, get, bind). Each form reports its outcome
// in its own `.form-result` (data-result="ok" or "error", the API's reason as text) and in the flash
// line at the top of the page, then asks the page to refresh.

import * as api from "./api.js";
import { append, clear, el, kvTable, num, panel, show } from "./dom.js";

// -- arguments (key = value rows with a type, RabbitMQ's "multifield") ----------------------------

const TYPES = [["string", "String"], ["number", "Number"], ["boolean", "Boolean"], ["list", "List"]];

function typed(value, type) {
  if (type === "number") {
    const n = Number(value);
    if (value.trim() === "" || Number.isNaN(n)) throw new Error(`"${value}" is not a number`);
    return n;
  }
  if (type === "boolean") {
    if (value !== "true" && value !== "false") throw new Error(`"${value}" is not true or false`);
    return value === "true";
  }
  if (type === "list") {
    const t = value.trim();
    if (t.startsWith("[")) return JSON.parse(t);
    return t === "" ? [] : t.split(",").map((s) => s.trim());
  }
  return value;
}

/**
 * Rows of key, value and type; a new empty row appears when the last one is used. `quick`: buttons
 * that fill a row with a known key ([label, key, type]). `node.value()` gives the object.
 */
export function argsEditor(name, quick = []) {
  const rows = el("div", { class: "args-rows" });
  const box = el("div", { class: "args", dataset: { args: name } }, rows);
  const addRow = (key = "", type = "string") => {
    const k = el("input", { class: "arg-key", placeholder: "key", size: 22 });
    const v = el("input", { class: "arg-value", placeholder: "value", size: 22 });
    const t = el("select", { class: "arg-type" }, TYPES.map(([value, label]) => el("option", { value }, label)));
    k.value = key;
    t.value = type;
    const row = el("div", { class: "arg-row" }, k, " = ", v, " ", t);
    const grow = () => {
      if (rows.lastChild === row && (k.value || v.value)) addRow();
    };
    k.addEventListener("input", grow);
    v.addEventListener("input", grow);
    rows.append(row);
    return row;
  };
  addRow();
  if (quick.length) {
    box.append(el("div", { class: "quick" }, "Add ", quick.map(([label, key, type]) => [
      el("button", {
        type: "button", class: "link", dataset: { quick: key },
        onclick: () => {
          let row = [...rows.children].find((r) => !r.querySelector(".arg-key").value);
          if (!row) row = addRow();
          row.querySelector(".arg-key").value = key;
          row.querySelector(".arg-type").value = type || "string";
          row.querySelector(".arg-value").focus();
          if (rows.lastChild === row) addRow();
        },
      }, label), " "])));
  }
  box.value = () => {
    const out = {};
    for (const row of rows.children) {
      const key = row.querySelector(".arg-key").value;
      if (!key) continue;
      out[key] = typed(row.querySelector(".arg-value").value, row.querySelector(".arg-type").value);
    }
    return out;
  };
  box.reset = () => {
    clear(rows);
    addRow();
  };
  return box;
}

// -- forms ---------------------------------------------------------------------------------------

function control(field, ctx) {
  const common = { name: field.name, id: field.id, required: field.required, ...field.attrs };
  switch (field.type) {
    case "select":
    case "vhost": {
      const options = field.type === "vhost" ? ctx.vhostNames() : field.options;
      const node = el("select", { ...common, dataset: field.type === "vhost" ? { vhosts: "" } : undefined },
        options.map((o) => {
          const [value, label] = Array.isArray(o) ? o : [o, o];
          return el("option", { value }, label);
        }));
      const initial = field.type === "vhost" ? ctx.defaultVhost() : field.value;
      if (initial !== undefined) node.value = initial;
      return node;
    }
    case "checkbox": {
      const node = el("input", { ...common, type: "checkbox" });
      node.checked = Boolean(field.value);
      return node;
    }
    case "textarea": {
      const node = el("textarea", { ...common, rows: field.rows || 4, cols: 50 });
      node.value = field.value ?? "";
      return node;
    }
    case "args":
      return argsEditor(field.name, field.quick || []);
    case "file":
      return el("input", { ...common, type: "file", accept: field.accept });
    default: {
      const node = el("input", { ...common, type: field.type || "text", size: field.size || 30,
        autocomplete: field.type === "password" ? "new-password" : "off" });
      node.value = field.value ?? "";
      return node;
    }
  }
}

function readValue(node, field) {
  if (field.type === "args") return node.value();
  if (field.type === "checkbox") return node.checked;
  if (field.type === "file") return node.files && node.files[0];
  return node.value;
}

/** Shows an action's outcome next to the form and in the page's flash line. */
export function report(ctx, resultNode, kind, message) {
  resultNode.dataset.result = kind;
  resultNode.className = `form-result ${kind}`;
  resultNode.textContent = message;
  ctx.flash(message, kind);
}

/** The message an exception shows: the API's reason, with its status for the refusals. */
export function describe(err) {
  if (err instanceof api.ApiError) {
    return err.status === 401 || err.status === 403 ? `Not allowed: ${err.reason}` : `${err.reason} (HTTP ${err.status})`;
  }
  return String(err && err.message ? err.message : err);
}

/**
 * A form: `fields` ([{name, label, type, options, value, help, required}]), a submit button, and
 * `onSubmit(values, form)` returning the success message (or throwing). `keep`: do not clear the
 * fields after success.
 */
export function form(ctx, { id, title, fields, submit, onSubmit, keep, confirmText, note }) {
  const controls = new Map();
  const result = el("p", { class: "form-result", role: "status" });
  const rows = fields.map((f) => {
    const node = control(f, ctx);
    controls.set(f.name, [node, f]);
    return el("tr", { class: f.hidden ? "hidden" : undefined },
      el("th", {}, el("label", {}, f.label + ":")),
      el("td", {}, node, f.required ? el("span", { class: "mand" }, " *") : null,
        f.help ? el("div", { class: "help" }, f.help) : null));
  });
  const button = el("button", { type: "submit" }, submit);
  const node = el("form", { class: "action", dataset: { form: id }, autocomplete: "off" },
    title ? el("h3", {}, title) : null, note || null,
    el("table", { class: "form" }, rows, el("tr", {}, el("th"), el("td", {}, button))), result);
  node.field = (name) => controls.get(name)[0];
  node.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const values = {};
    try {
      for (const [name, [control, f]] of controls) values[name] = readValue(control, f);
    } catch (err) {
      report(ctx, result, "error", describe(err));
      return;
    }
    if (confirmText && !window.confirm(typeof confirmText === "function" ? confirmText(values) : confirmText)) {
      return;
    }
    await runReported(ctx, result, button, async () => {
      const message = await onSubmit(values, node);
      if (!keep) {
        for (const [, [control, f]] of controls) {
          if (f.type === "args") control.reset();
          else if (f.type === "file" || (f.type !== "select" && f.type !== "vhost" && f.type !== "checkbox" && !f.sticky)) {
            control.value = f.type === "file" ? "" : (f.value ?? "");
          }
        }
      }
      return message;
    });
  });
  return node;
}

/** Run `work` with `button` disabled and report its outcome in `result`, as every form and action
 * button does: its message (or "Done.") once it succeeded, then a refresh; its error otherwise; a
 * lost login logs out instead. */
async function runReported(ctx, result, button, work) {
  button.disabled = true;
  try {
    report(ctx, result, "ok", (await work()) || "Done.");
    ctx.refreshSoon();
  } catch (err) {
    if (err instanceof api.ApiError && err.loginFailed) {
      ctx.loggedOut(err.reason);
      return;
    }
    report(ctx, result, "error", describe(err));
  } finally {
    button.disabled = false;
  }
}

/** A button that runs an action after a confirmation, reporting as forms do. */
export function actionButton(ctx, { label, action, confirmText, id, danger }) {
  const result = el("span", { class: "form-result", role: "status" });
  const button = el("button", {
    type: "button", class: danger ? "danger" : undefined, dataset: { action: id },
    onclick: async () => {
      if (confirmText && !window.confirm(confirmText)) return;
      await runReported(ctx, result, button, action);
    },
  }, label);
  return el("span", { class: "action-button" }, button, " ", result);
}

/** A button that deletes `noun` `name` (DELETE of the api.path of `path`) after a confirmation,
 *  then runs `then` (where the page goes next) and reports "<Noun> <name> deleted." */
export function deleteButton(ctx, { noun, name, path, id, then, label = "Delete", confirmText = null }) {
  return actionButton(ctx, {
    label, id, danger: true, confirmText: confirmText || `Delete ${noun.toLowerCase()} ${name}?`,
    action: async () => {
      await api.del(api.path(...path));
      if (then) await then();
      return `${noun} ${name} deleted.`;
    },
  });
}

/** The most rows a capped list page draws (a broker may hold far more exchanges or queues). */
const MAX_ROWS = 500;

/** A list page: its heading, a name filter over the rows `load(vhost)` fetches at each refresh, and
 * the table `table(rows, sortState)` makes of those that pass it (by default `load` asks for the API's
 * `resource`, of the vhost chosen or all). With `noun`, a line counts them and the table holds at
 * most MAX_ROWS; `after`: what follows the list (a form to add one). */
export function listPage(ctx, { title, resource, load = (vh) => api.get(vh ? api.path(resource, vh) : `/${resource}`),
  table, key = (row) => row.name, noun, after = null }) {
  const listBox = el("div");
  const filter = filterBox(() => draw());
  const sortState = { column: -1, descending: false };
  let rows = [];
  const draw = () => {
    const shown = rows.filter((row) => filter.matches(key(row)));
    if (!noun) {
      clear(listBox, table(shown, sortState));
      return;
    }
    clear(listBox, el("p", { class: "muted", dataset: { count: shown.length } },
      shown.length > MAX_ROWS ? `Showing the first ${MAX_ROWS} of ${shown.length} ${noun}s.` : `${shown.length} ${noun}(s).`),
    table(shown.slice(0, MAX_ROWS), sortState));
  };
  append(ctx.main, el("h1", {}, title), panel(`All ${title.toLowerCase()}`, {}, filter.node, listBox), after);
  return {
    async refresh() {
      rows = await load(ctx.vhost());
      draw();
    },
  };
}

/** A name filter (substring, or a regular expression when ticked) over a list page. */
export function filterBox(onChange) {
  const input = el("input", { type: "search", name: "filter", placeholder: "Filter by name", size: 30 });
  const regex = el("input", { type: "checkbox", name: "regex" });
  const box = { node: el("p", { class: "filter" }, input, " ", el("label", {}, regex, " Regex")) };
  let test = () => true;
  const update = () => {
    const text = input.value;
    input.classList.remove("invalid");
    if (!text) test = () => true;
    else if (regex.checked) {
      try {
        const re = new RegExp(text, "i");
        test = (name) => re.test(name);
      } catch {
        input.classList.add("invalid");
        test = () => true;
      }
    } else {
      const low = text.toLowerCase();
      test = (name) => name.toLowerCase().includes(low);
    }
    onChange();
  };
  input.addEventListener("input", update);
  regex.addEventListener("change", update);
  box.matches = (name) => test(name);
  return box;
}

// -- shared actions ------------------------------------------------------------------------------

export const QUEUE_ARGS = [
  ["Auto expire", "x-expires", "number"], ["Message TTL", "x-message-ttl", "number"],
  ["Overflow behaviour", "x-overflow"], ["Single active consumer", "x-single-active-consumer", "boolean"],
  ["Dead letter exchange", "x-dead-letter-exchange"], ["Dead letter routing key", "x-dead-letter-routing-key"],
  ["Max length", "x-max-length", "number"], ["Max length bytes", "x-max-length-bytes", "number"],
  ["Maximum priority", "x-max-priority", "number"], ["Lazy mode", "x-queue-mode"],
  ["Delivery limit", "x-delivery-limit", "number"], ["Initial cluster size", "x-quorum-initial-group-size", "number"],
  ["Dead letter strategy", "x-dead-letter-strategy"], ["Max age", "x-max-age"],
  ["Max segment size", "x-stream-max-segment-size-bytes", "number"],
];

const PROPERTIES = [
  ["content_type"], ["content_encoding"], ["priority", "number"], ["correlation_id"], ["reply_to"],
  ["expiration"], ["message_id"], ["timestamp", "number"], ["type"], ["user_id"], ["app_id"], ["cluster_id"],
].map(([key, type]) => [key, key, type]);

/**
 * Publish a message through POST /api/exchanges/{vhost}/{exchange}/publish. With `routingKey` the
 * key is fixed (a queue's page publishes to the default exchange with the queue's name).
 */
export function publishForm(ctx, { vhost, exchange, routingKey }) {
  const fields = [];
  if (routingKey === undefined) fields.push({ name: "routing_key", label: "Routing key", sticky: true });
  fields.push(
    { name: "delivery_mode", label: "Delivery mode", type: "select", value: "1",
      options: [["1", "1 - Non-persistent"], ["2", "2 - Persistent"]] },
    { name: "headers", label: "Headers", type: "args" },
    { name: "properties", label: "Properties", type: "args", quick: PROPERTIES },
    { name: "payload", label: "Payload", type: "textarea" },
    { name: "payload_encoding", label: "Payload encoding", type: "select", value: "string",
      options: [["string", "String (default)"], ["base64", "Base64"]] },
  );
  const note = routingKey === undefined ? null : el("p", { class: "help" },
    "The message goes to the default exchange with the queue's name as routing key.");
  return form(ctx, {
    id: "publish", fields, submit: "Publish message", note,
    onSubmit: async (v) => {
      const properties = { delivery_mode: Number(v.delivery_mode), ...v.properties };
      if (Object.keys(v.headers).length) properties.headers = v.headers;
      const answer = await api.post(api.path("exchanges", vhost, api.exchangeSegment(exchange), "publish"), {
        properties, routing_key: routingKey ?? v.routing_key, payload: v.payload,
        payload_encoding: v.payload_encoding,
      });
      return answer && answer.routed ? "Message published." : "Message published, but not routed.";
    },
  });
}

const ACK_MODES = [
  ["ack_requeue_true", "Nack message requeue true"], ["ack_requeue_false", "Automatic ack"],
  ["reject_requeue_true", "Reject requeue true"], ["reject_requeue_false", "Reject requeue false"],
];

/** Get messages through POST /api/queues/{vhost}/{name}/get, with the ack mode to use. */
export function getMessagesForm(ctx, { vhost, queue }) {
  const out = el("div", { class: "messages" });
  const f = form(ctx, {
    id: "get", keep: true, submit: "Get Message(s)",
    note: el("p", { class: "help" }, "Getting messages from a queue is a destructive action unless the " +
      "ack mode requeues them."),
    fields: [
      { name: "ackmode", label: "Ack mode", type: "select", value: "ack_requeue_true", options: ACK_MODES },
      { name: "encoding", label: "Encoding", type: "select", value: "auto",
        options: [["auto", "Auto string / base64"], ["base64", "base64"]] },
      { name: "count", label: "Messages", type: "number", value: "1", size: 5 },
      { name: "truncate", label: "Truncate payload after (bytes)", type: "number", value: "50000", size: 8 },
    ],
    onSubmit: async (v) => {
      const msgs = await api.post(api.path("queues", vhost, queue, "get"), {
        count: Number(v.count), ackmode: v.ackmode, encoding: v.encoding,
        truncate: v.truncate === "" ? undefined : Number(v.truncate),
      });
      clear(out, renderMessages(msgs));
      return msgs.length ? `${msgs.length} message(s) fetched.` : "Queue is empty.";
    },
  });
  f.append(out);
  return f;
}

function renderMessages(msgs) {
  if (!msgs.length) return el("p", { class: "muted", dataset: { empty: "1" } }, "Queue is empty.");
  return msgs.map((m, i) => {
    const props = Array.isArray(m.properties) ? {} : m.properties;
    return el("div", {
      class: "message", dataset: { index: i + 1, payload: m.payload, routingKey: m.routing_key },
    },
    el("h4", {}, `Message ${i + 1}`),
    el("p", {}, `The server reported ${num(m.message_count)} messages remaining.`),
    el("table", { class: "kv" },
      el("tr", {}, el("th", {}, "Exchange"), el("td", {}, m.exchange === "" ? "(AMQP default)" : m.exchange)),
      el("tr", {}, el("th", {}, "Routing Key"), el("td", {}, m.routing_key)),
      el("tr", {}, el("th", {}, "Redelivered"), el("td", {}, m.redelivered ? "●" : "○")),
      el("tr", {}, el("th", {}, "Properties"), el("td", {}, kvTable(props))),
      el("tr", {}, el("th", {}, "Payload"),
        el("td", {}, el("div", { class: "help" }, `${num(m.payload_bytes)} bytes, encoding: ${m.payload_encoding}`),
          el("pre", { class: "payload" }, show(m.payload))))));
  });
}

/** The "unbind" button of one binding row. */
export function unbindButton(ctx, b) {
  const kind = b.destination_type === "queue" ? "q" : "e";
  return actionButton(ctx, {
    label: "Unbind", id: "unbind",
    action: async () => {
      await api.del(api.path("bindings", b.vhost, "e", b.source, kind, b.destination, b.properties_key));
      return "Binding removed.";
    },
  });
}

/** Add a binding: from `source` (an exchange's page) or to `destination` (a queue's or exchange's). */
export function bindForm(ctx, { vhost, source, destination, destinationType }) {
  const fields = [];
  if (source !== undefined) {
    fields.push({ name: "dtype", label: "To", type: "select", value: "q", options: [["q", "To queue"], ["e", "To exchange"]] },
      { name: "destination", label: "Name", required: true });
  } else {
    fields.push({ name: "source", label: "From exchange", required: true });
  }
  fields.push({ name: "routing_key", label: "Routing key" }, { name: "arguments", label: "Arguments", type: "args" });
  return form(ctx, {
    id: "bind", title: source !== undefined ? "Add binding from this exchange" : "Add binding to this " +
      (destinationType === "queue" ? "queue" : "exchange"),
    fields, submit: "Bind",
    onSubmit: async (v) => {
      const src = source !== undefined ? source : v.source;
      const kind = source !== undefined ? v.dtype : (destinationType === "queue" ? "q" : "e");
      const dest = source !== undefined ? v.destination : destination;
      await api.post(api.path("bindings", vhost, "e", src, kind, dest), {
        routing_key: v.routing_key, arguments: v.arguments,
      });
      return "Binding added.";
    },
  });
}

/** Yes/no features as RabbitMQ abbreviates them (D, AD, I, Excl, Args), with the full text as title. */
export function features(obj, extra = []) {
  const tags = [];
  if (obj.durable) tags.push(["D", "durable"]);
  if (obj.auto_delete) tags.push(["AD", "auto-delete"]);
  if (obj.internal) tags.push(["I", "internal"]);
  if (obj.exclusive) tags.push(["Excl", "exclusive"]);
  const args = obj.arguments || {};
  const keys = Object.keys(args);
  if (keys.length) tags.push(["Args", keys.map((k) => `${k}: ${show(args[k])}`).join("\n")]);
  for (const t of extra) tags.push(t);
  return el("span", { class: "features" },
    tags.map(([abbr, title]) => el("abbr", { class: "feature", title }, abbr)), obj.policy ? [" ", el("abbr", { class: "policy", title: "policy" }, obj.policy)] : null);
}
