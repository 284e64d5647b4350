// Admin pages: users, virtual hosts, permissions, policies, limits and definitions. Users, virtual
// hosts and definitions are for administrators (the API refuses anyone else); policies are listed
// for every management user and changed by policymakers, as in RabbitMQ's UI.

import * as api from "./api.js";
import {
  append, boxes, clear, el, kvTable, link, listTable, num, objectHeading, panel, rate, show, unavailable,
} from "./dom.js";
import { actionButton, deleteButton, describe, form, report } from "./widgets.js";

const TAG_CHOICES = ["administrator", "monitoring", "policymaker", "management", "impersonator"];

function tagsField(value = "") {
  return { name: "tags", label: "Tags", value, sticky: true,
    help: "Comma-separated. Administrator, monitoring, policymaker and management give access to this UI; " +
      "none of them: AMQP only." };
}

/** Buttons that fill a form's tags field, as RabbitMQ's "Set" links do. */
function tagButtons(formNode) {
  const input = formNode.field("tags");
  input.after(el("div", { class: "quick" }, "Set ", TAG_CHOICES.map((t) => [el("button", {
    type: "button", class: "link", dataset: { tag: t },
    onclick: () => {
      const tags = input.value.split(",").map((s) => s.trim()).filter(Boolean);
      if (!tags.includes(t)) tags.push(t);
      input.value = tags.join(", ");
    },
  }, t), " "]), el("button", { type: "button", class: "link", dataset: { tag: "" }, onclick: () => { input.value = ""; } }, "none")));
  return formNode;
}

// -- users ---------------------------------------------------------------------------------------

/** The password, its confirmation and the tags: the fields of both user forms. */
function passwordAndTagsFields() {
  return [
    { name: "password", label: "Password", type: "password" },
    { name: "confirm", label: "Password (confirm)", type: "password" },
    tagsField(),
  ];
}

/** The user a user form's values describe: its tags, and its password when one was typed (the two
 * entries must match). */
function userBody(v) {
  if (v.password !== v.confirm) throw new Error("The passwords do not match.");
  const body = { tags: v.tags };
  if (v.password !== "") body.password = v.password;
  return body;
}

export function usersPage(ctx) {
  const box = el("div");
  const add = tagButtons(form(ctx, {
    id: "add-user", submit: "Add user",
    fields: [
      { name: "username", label: "Username", required: true },
      ...passwordAndTagsFields(),
    ],
    onSubmit: async (v) => {
      await api.put(api.path("users", v.username), userBody(v));
      return `User ${v.username} added.`;
    },
  }));
  const sortState = { column: 0, descending: false };
  append(ctx.main,el("h1", {}, "Users"), panel("All users", {}, box), panel("Add a user", {}, add));
  return {
    async refresh() {
      const [users, perms] = await Promise.all([api.get("/users"), api.get("/permissions")]);
      clear(box, listTable({
        attrs: { id: "user-list" }, rows: users, sortState,
        rowAttrs: (u) => ({ dataset: { user: u.name, tags: u.tags.join(",") } }),
        columns: [
          { title: "Name", cell: (u) => link(u.name, "users", u.name), sort: (u) => u.name },
          { title: "Tags", cell: (u) => u.tags.join(", "), sort: (u) => u.tags.join(",") },
          { title: "Can access virtual hosts", cell: (u) => {
            const vhosts = perms.filter((p) => p.user === u.name).map((p) => p.vhost);
            return vhosts.length ? vhosts.join(", ") : el("span", { class: "muted" }, "No access");
          } },
          { title: "Has password", cell: (u) => (u.password_hash ? "●" : "○") },
        ],
      }));
    },
  };
}

function permissionForm(ctx, { user, vhost }) {
  const fields = [];
  if (user === undefined) fields.push({ name: "user", label: "User", type: "select", options: [], sticky: true });
  if (vhost === undefined) fields.push({ name: "vhost", label: "Virtual host", type: "vhost" });
  fields.push({ name: "configure", label: "Configure regexp", value: ".*" },
    { name: "write", label: "Write regexp", value: ".*" }, { name: "read", label: "Read regexp", value: ".*" });
  return form(ctx, {
    id: "set-permission", title: "Set permission", submit: "Set permission", fields, keep: true,
    onSubmit: async (v) => {
      const u = user ?? v.user, vh = vhost ?? v.vhost;
      await api.put(api.path("permissions", vh, u), { configure: v.configure, write: v.write, read: v.read });
      return `Permissions of ${u} on ${vh} set.`;
    },
  });
}

function permissionsTable(ctx, rows, { showUser }) {
  return listTable({
    attrs: { id: "permissions" }, rows, empty: "no permissions",
    rowAttrs: (p) => ({ dataset: { user: p.user, vhost: p.vhost } }),
    columns: [
      showUser ? { title: "User", cell: (p) => link(p.user, "users", p.user) }
        : { title: "Virtual host", cell: (p) => link(p.vhost, "vhosts", p.vhost) },
      { title: "Configure regexp", cell: (p) => p.configure },
      { title: "Write regexp", cell: (p) => p.write },
      { title: "Read regexp", cell: (p) => p.read },
      { title: "", cell: (p) => actionButton(ctx, {
        label: "Clear", id: "clear-permission",
        action: async () => {
          await api.del(api.path("permissions", p.vhost, p.user));
          return `Permissions of ${p.user} on ${p.vhost} cleared.`;
        },
      }) },
    ],
  });
}

/** What a user's page and a virtual host's page open with: the heading, the overview box, the
 *  permissions box with the form granting one (`scope`: { user } or { vhost }), and the panel of
 *  what this broker does not offer there (`missing`: title, what, endpoint). */
function permissionsHead(ctx, kind, name, scope, [title, what, endpoint]) {
  const [facts, perms] = boxes(2);
  const permForm = permissionForm(ctx, scope);
  const id = `${Object.keys(scope)[0]}-name`;
  return {
    facts, perms, permForm,
    head: [objectHeading(kind, name, { id }), panel("Overview", {}, facts), panel("Permissions", {}, perms, permForm),
      panel(title, {}, unavailable(what, endpoint))],
  };
}

export function userPage(ctx, name) {
  const { facts, perms, head } = permissionsHead(ctx, "User", name, { user: name },
    ["Topic permissions", "Topic permissions", "/api/topic-permissions"]);
  let current = null;
  const update = tagButtons(form(ctx, {
    id: "update-user", submit: "Update user", keep: true,
    note: el("p", { class: "help" }, "Leave the password empty to keep the current one."),
    fields: passwordAndTagsFields(),
    onSubmit: async (v) => {
      const body = userBody(v);
      if (v.password === "" && current && current.password_hash) {
        // a PUT replaces the whole user: without the hash the user could no longer log in
        body.password_hash = current.password_hash;
        body.hashing_algorithm = current.hashing_algorithm;
      }
      await api.put(api.path("users", name), body);
      update.field("password").value = "";
      update.field("confirm").value = "";
      if (name === ctx.user.name && v.password !== "") ctx.passwordChanged(v.password);
      return `User ${name} updated.`;
    },
  }));
  append(ctx.main, head,
    panel("Update this user", {}, update),
    panel("Delete this user", {}, deleteButton(ctx, {
      noun: "User", name, path: ["users", name], id: "delete-user",
      then: () => (name === ctx.user.name ? ctx.loggedOut("Your user was deleted.") : ctx.navigate("#/users")),
    })),
  );
  let first = true;
  return {
    async refresh() {
      const [u, p] = await Promise.all([api.get(api.path("users", name)), api.get(api.path("users", name, "permissions"))]);
      current = u;
      if (first) {
        update.field("tags").value = u.tags.join(", ");
        first = false;
      }
      clear(facts, el("table", { class: "kv", id: "user-details", dataset: { tags: u.tags.join(",") } },
        el("tr", {}, el("th", {}, "Tags"), el("td", {}, u.tags.join(", ") || el("span", { class: "muted" }, "none"))),
        el("tr", {}, el("th", {}, "Can log in with password"), el("td", {}, u.password_hash ? "●" : "○"))));
      clear(perms, permissionsTable(ctx, p, { showUser: false }));
    },
  };
}

// -- virtual hosts -------------------------------------------------------------------------------

export function vhostsPage(ctx) {
  const box = el("div");
  append(ctx.main,el("h1", {}, "Virtual Hosts"), panel("All virtual hosts", {}, box), panel("Add a new virtual host", {}, form(ctx, {
    id: "add-vhost", submit: "Add virtual host",
    fields: [
      { name: "name", label: "Name", required: true },
      { name: "description", label: "Description" },
      { name: "tags", label: "Tags", help: "Comma-separated." },
    ],
    onSubmit: async (v) => {
      const body = { description: v.description };
      if (v.tags) body.tags = v.tags;
      await api.put(api.path("vhosts", v.name), body);
      await ctx.reloadVhosts();
      return `Virtual host ${v.name} added.`;
    },
  })));
  return {
    async refresh() {
      const vhosts = await api.get("/vhosts");
      clear(box, listTable({
        attrs: { id: "vhost-list" }, rows: vhosts,
        rowAttrs: (v) => ({ dataset: { vhost: v.name, messages: v.messages ?? 0 } }),
        columns: [
          { title: "Name", cell: (v) => link(v.name, "vhosts", v.name), sort: (v) => v.name },
          { title: "Description", cell: (v) => v.description || "" },
          { title: "Tags", cell: (v) => (v.tags || []).join(", ") },
          { title: "Ready", num: true, cell: (v) => num(v.messages_ready), sort: (v) => v.messages_ready },
          { title: "Unacked", num: true, cell: (v) => num(v.messages_unacknowledged) },
          { title: "Total", num: true, cell: (v) => num(v.messages), sort: (v) => v.messages },
          { title: "publish", num: true, cell: (v) => rate(v.message_stats && v.message_stats.publish_details) },
          { title: "deliver / get", num: true, cell: (v) => rate(v.message_stats && v.message_stats.deliver_get_details) },
        ],
      }));
    },
  };
}

export function vhostPage(ctx, name) {
  const { facts, perms, permForm, head } = permissionsHead(ctx, "Virtual Host", name, { vhost: name },
    ["Limits", "Virtual host limits", "/api/vhost-limits"]);
  append(ctx.main, head,
    panel("Delete this virtual host", {}, deleteButton(ctx, {
      noun: "Virtual host", name, path: ["vhosts", name], id: "delete-vhost",
      confirmText: `Delete virtual host ${name}? All its exchanges, queues and messages go with it.`,
      then: async () => {
        await ctx.reloadVhosts();
        ctx.navigate("#/vhosts");
      },
    })),
  );
  return {
    async refresh() {
      const [v, p, users] = await Promise.all([
        api.get(api.path("vhosts", name)), api.get(api.path("vhosts", name, "permissions")), api.get("/users"),
      ]);
      const select = permForm.field("user");
      const chosen = select.value;
      clear(select, users.map((u) => el("option", { value: u.name }, u.name)));
      if (chosen) select.value = chosen;
      clear(facts, el("table", { class: "kv", id: "vhost-details" },
        el("tr", {}, el("th", {}, "Description"), el("td", {}, v.description || "")),
        el("tr", {}, el("th", {}, "Tags"), el("td", {}, (v.tags || []).join(", "))),
        el("tr", {}, el("th", {}, "Messages"), el("td", {}, `${num(v.messages)} (${num(v.messages_ready)} ready, ` +
          `${num(v.messages_unacknowledged)} unacked)`)),
        el("tr", {}, el("th", {}, "Tracing"), el("td", {}, v.tracing ? "on" : "off"))));
      clear(perms, permissionsTable(ctx, p, { showUser: true }));
    },
  };
}

// -- policies ------------------------------------------------------------------------------------

const POLICY_KEYS = [
  ["Max length", "max-length", "number"], ["Max length bytes", "max-length-bytes", "number"],
  ["Overflow behaviour", "overflow"], ["Message TTL", "message-ttl", "number"], ["Auto expire", "expires", "number"],
  ["Dead letter exchange", "dead-letter-exchange"], ["Dead letter routing key", "dead-letter-routing-key"],
  ["Queue mode", "queue-mode"], ["Delivery limit", "delivery-limit", "number"],
  ["Alternate exchange", "alternate-exchange"], ["Max age", "max-age"],
  ["Shards per node", "shards-per-node", "number"], ["Routing key (sharding)", "routing-key"],
];

const APPLY_TO = [["all", "Exchanges and queues"], ["exchanges", "Exchanges"], ["queues", "Queues"]];

export function policiesPage(ctx) {
  const box = el("div");
  const maker = ctx.user.policymaker;
  append(ctx.main,
    el("h1", {}, "Policies"),
    panel("User policies", {}, box),
    maker ? panel("Add / update a policy", {}, form(ctx, {
      id: "add-policy", submit: "Add / update policy",
      fields: [
        { name: "vhost", label: "Virtual host", type: "vhost" },
        { name: "name", label: "Name", required: true },
        { name: "pattern", label: "Pattern", required: true, help: "A regular expression matched against names." },
        { name: "apply-to", label: "Apply to", type: "select", value: "all", options: APPLY_TO },
        { name: "priority", label: "Priority", type: "number", value: "0", size: 5 },
        { name: "definition", label: "Definition", type: "args", quick: POLICY_KEYS },
      ],
      onSubmit: async (v) => {
        await api.put(api.path("policies", v.vhost, v.name), {
          pattern: v.pattern, "apply-to": v["apply-to"], priority: Number(v.priority || 0), definition: v.definition,
        });
        return `Policy ${v.name} set.`;
      },
    })) : null,
    panel("Operator policies", {}, unavailable("Operator policies", "/api/operator-policies")),
  );
  return {
    async refresh() {
      const vh = ctx.vhost();
      const policies = await api.get(vh ? api.path("policies", vh) : "/policies");
      clear(box, listTable({
        attrs: { id: "policy-list" }, rows: policies, empty: "no policies",
        rowAttrs: (p) => ({ dataset: { policy: p.name, vhost: p.vhost } }),
        columns: [
          !vh ? { title: "Virtual host", cell: (p) => p.vhost, sort: (p) => p.vhost } : null,
          { title: "Name", cell: (p) => link(p.name, "policies", p.vhost, p.name), sort: (p) => p.name },
          { title: "Pattern", cell: (p) => p.pattern },
          { title: "Apply to", cell: (p) => p["apply-to"] },
          { title: "Definition", cell: (p) => kvTable(p.definition) },
          { title: "Priority", num: true, cell: (p) => String(p.priority), sort: (p) => p.priority },
          maker ? { title: "", cell: (p) => deletePolicyButton(ctx, p.vhost, p.name) } : null,
        ].filter(Boolean),
      }));
    },
  };
}

function deletePolicyButton(ctx, vhost, name, after) {
  return deleteButton(ctx, { noun: "Policy", name, path: ["policies", vhost, name], id: "delete-policy", then: after });
}

export function policyPage(ctx, vhost, name) {
  const facts = el("div");
  append(ctx.main,
    objectHeading("Policy", name, { vhost }),
    panel("Overview", {}, facts),
    ctx.user.policymaker ? panel("Delete this policy", {}, deletePolicyButton(ctx, vhost, name, () => ctx.navigate("#/policies"))) : null,
  );
  return {
    async refresh() {
      const p = await api.get(api.path("policies", vhost, name));
      clear(facts, el("table", { class: "kv", id: "policy-details" },
        el("tr", {}, el("th", {}, "Pattern"), el("td", {}, p.pattern)),
        el("tr", {}, el("th", {}, "Apply to"), el("td", {}, p["apply-to"])),
        el("tr", {}, el("th", {}, "Definition"), el("td", {}, kvTable(p.definition))),
        el("tr", {}, el("th", {}, "Priority"), el("td", {}, show(p.priority)))));
    },
  };
}

// -- limits --------------------------------------------------------------------------------------

export function limitsPage(ctx) {
  append(ctx.main,
    el("h1", {}, "Limits"),
    panel("Virtual host limits", {}, unavailable("Setting virtual host limits (max-connections, max-queues)", "/api/vhost-limits")),
    panel("User limits", {}, unavailable("Setting user limits (max-connections, max-channels)", "/api/user-limits")),
  );
  return {};
}

// -- definitions ---------------------------------------------------------------------------------

function today() {
  const d = new Date();
  const pad = (n) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}`;
}

export function definitionsPage(ctx) {
  const exportResult = el("p", { class: "form-result", role: "status" });
  const vhostOptions = () => [["", "All"], ...ctx.vhostNames().map((v) => [v, v])];
  const exportVhost = el("select", { name: "vhost", dataset: { vhostsAll: "" } },
    vhostOptions().map(([v, l]) => el("option", { value: v }, l)));
  const fileName = el("input", { name: "filename", size: 40 });
  fileName.value = `${ctx.overview.node || "hashbroker"}_${today()}.json`.replace(/[^\w.@-]/g, "_");
  const download = el("form", { class: "action", dataset: { form: "export" },
    onsubmit: async (ev) => {
      ev.preventDefault();
      try {
        const vh = exportVhost.value;
        const name = fileName.value || "definitions.json";
        const resp = await api.fetchRaw((vh ? api.path("definitions", vh) : "/definitions") +
          `?download=${encodeURIComponent(name)}`);
        const blob = await resp.blob();
        const url = URL.createObjectURL(blob);
        const a = el("a", { href: url, download: name, hidden: true });
        document.body.append(a);
        a.click();
        a.remove();
        setTimeout(() => URL.revokeObjectURL(url), 10000);
        report(ctx, exportResult, "ok", `Definitions downloaded as ${name}.`);
      } catch (err) {
        report(ctx, exportResult, "error", describe(err));
      }
    } },
  el("table", { class: "form" },
    el("tr", {}, el("th", {}, el("label", {}, "Virtual host:")), el("td", {}, exportVhost)),
    el("tr", {}, el("th", {}, el("label", {}, "Filename for download:")), el("td", {}, fileName)),
    el("tr", {}, el("th"), el("td", {}, el("button", { type: "submit" }, "Download broker definitions")))),
  exportResult);
  const upload = form(ctx, {
    id: "import", submit: "Upload broker definitions",
    fields: [
      { name: "vhost", label: "Virtual host", type: "select", options: vhostOptions(), value: "" },
      { name: "file", label: "Definitions file", type: "file", accept: ".json,application/json", required: true },
    ],
    onSubmit: async (v) => {
      if (!v.file) throw new Error("Choose a definitions file first.");
      const body = new FormData();
      body.append("file", v.file, v.file.name); // the multipart upload RabbitMQ's own form sends
      await api.post(v.vhost ? api.path("definitions", v.vhost) : "/definitions", body);
      await ctx.reloadVhosts();
      return "Your definitions were imported successfully.";
    },
  });
  upload.field("vhost").dataset.vhostsAll = ""; // kept in step with the vhost list, as the export's is
  append(ctx.main,
    el("h1", {}, "Definitions"),
    panel("Export definitions", {}, el("p", { class: "help" }, "Exchanges, queues, bindings, users, virtual hosts, " +
      "permissions and policies as one JSON file (for one virtual host: its objects only)."), download),
    panel("Import definitions", {}, el("p", { class: "help" }, "A file exported from hashbroker or RabbitMQ; " +
      "definitions that already exist are updated."), upload),
  );
  return {};
}
