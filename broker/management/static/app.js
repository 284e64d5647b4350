// hashbroker's management UI: plain ES modules, no build step, no framework. The page is public; all
// data comes from the authenticated /api, with the logged-in user's credentials, so the UI can do
// exactly what that user could do with rabbitmqadmin. Pages are addressed by hash routes
// (#/queues/%2F/orders) and refresh every few seconds.
//
// For tests and tools, <body> carries data-page (the route's page), data-ready ("1" once the page
// has rendered its data), data-renders (a counter) and data-user.

import * as api from "./api.js";
import {
  channelPage, channelsPage, connectionPage, connectionsPage,
} from "./connections.js";
import { forgetHistory, overviewPage } from "./dashboard.js";
import { clear, el, panel } from "./dom.js";
import { exchangePage, exchangesPage } from "./exchanges.js";
import { hashExchangePage, hashListPage } from "./hash.js";
import { queuePage, queuesPage } from "./queues.js";
import {
  definitionsPage, limitsPage, policiesPage, policyPage, userPage, usersPage, vhostPage, vhostsPage,
} from "./admin.js";

const AUTH_KEY = "hashbroker.auth";
const LOGGED_OUT_KEY = "hashbroker.loggedOut";
const INTERVAL_KEY = "hashbroker.interval";
const VHOST_KEY = "hashbroker.vhost";

// -- who may see what (RabbitMQ's tag expansion: administrator ⊃ monitoring, policymaker ⊃ management)

export function userFlags(name, tags) {
  const admin = tags.includes("administrator");
  const monitor = admin || tags.includes("monitoring");
  const policymaker = admin || tags.includes("policymaker");
  const management = monitor || policymaker || tags.includes("management");
  return { name, tags, admin, monitor, policymaker, management };
}

function allowed(user, need) {
  return { management: user.management, monitoring: user.monitor, policymaker: user.policymaker,
    administrator: user.admin }[need];
}

// path pattern (":x" = one segment), the page, the tag it needs, the tab it belongs to, its name
function routeRow(pattern, page, need, tab = pattern[0], name = tab) {
  return [pattern, page, need, tab, name];
}

// a tab's list page and its one-object page (the object found by `keys`), named `one`
function listAndOne(tab, listPage, onePage, one, keys, need = "management") {
  return [routeRow([tab], listPage, need), routeRow([tab, ...keys], onePage, need, tab, one)];
}

const ROUTES = [
  routeRow([], overviewPage, "management", "overview"),
  ...listAndOne("connections", connectionsPage, connectionPage, "connection", [":name"]),
  ...listAndOne("channels", channelsPage, channelPage, "channel", [":name"]),
  ...listAndOne("exchanges", exchangesPage, exchangePage, "exchange", [":vhost", ":name"]),
  ...listAndOne("queues", queuesPage, queuePage, "queue", [":vhost", ":name"]),
  ...listAndOne("hash", hashListPage, hashExchangePage, "hash-exchange", [":vhost", ":name"]),
  ...listAndOne("users", usersPage, userPage, "user", [":name"], "administrator"),
  ...listAndOne("vhosts", vhostsPage, vhostPage, "vhost", [":name"], "administrator"),
  ...listAndOne("policies", policiesPage, policyPage, "policy", [":vhost", ":name"]),
  routeRow(["limits"], limitsPage, "management"),
  routeRow(["definitions"], definitionsPage, "administrator"),
];

// the tabs in order: id (the tab of the routes it leads to), label, the tab it sits under
const TABS = [
  ["overview", "Overview"], ["connections", "Connections"], ["channels", "Channels"], ["exchanges", "Exchanges"],
  ["queues", "Queues"], ["hash", "Hash exchanges"], ["admin", "Admin"],
  ["users", "Users", "admin"], ["vhosts", "Virtual Hosts", "admin"], ["policies", "Policies", "admin"],
  ["limits", "Limits", "admin"], ["definitions", "Definitions", "admin"],
];

/** Where a tab links and the tag it needs: its list page's route (the Admin tab has none: it opens
 *  its first sub-tab the user may open). */
function tabTarget(id) {
  const r = ROUTES.find(([pattern, , , tab]) => tab === id && pattern.length <= 1);
  return r ? { href: "#/" + r[0].join("/"), need: r[2] } : { href: null, need: "management" };
}

function parseHash(hash) {
  const raw = hash.replace(/^#\/?/, "");
  if (raw === "") return [];
  try {
    return raw.split("/").map((s) => decodeURIComponent(s));
  } catch {
    return null; // a malformed %-escape
  }
}

function findRoute(segments) {
  for (const [pattern, page, need, tab, name] of ROUTES) {
    if (pattern.length !== segments.length) continue;
    if (pattern.every((p, i) => p.startsWith(":") || p === segments[i])) {
      return { page, need, tab, name, params: segments.filter((_, i) => pattern[i].startsWith(":")) };
    }
  }
  return null;
}

function isLoopback() {
  const h = location.hostname;
  return h === "localhost" || h === "[::1]" || h === "::1" || /^127\./.test(h);
}

// -- the application -----------------------------------------------------------------------------

const $ = (id) => document.getElementById(id);

const state = {
  user: null, // userFlags
  overview: {},
  vhosts: [], // names
  current: null, // {page, hash}: the mounted page and the route it was mounted for
  timer: null, // the next refresh
  ticking: false, // a refresh is running
  again: false, // another refresh was asked for while one ran
};

function flash(message, kind = "ok") {
  const node = $("flash");
  node.textContent = message;
  node.className = `flash ${kind}`;
  node.dataset.kind = kind;
  node.hidden = false;
}

function selectedVhost() {
  const v = $("vhost-select").value;
  return state.vhosts.includes(v) ? v : "";
}

function interval() {
  return Number($("interval").value);
}

/** Refresh the vhost lists: the header's filter and every form's vhost select keep their choice. */
function syncVhostSelects() {
  const header = $("vhost-select");
  const chosen = header.value;
  clear(header, el("option", { value: "" }, "All"), state.vhosts.map((v) => el("option", { value: v }, v)));
  header.value = state.vhosts.includes(chosen) ? chosen : "";
  for (const select of document.querySelectorAll("select[data-vhosts]")) {
    const keep = select.value;
    clear(select, state.vhosts.map((v) => el("option", { value: v }, v)));
    select.value = state.vhosts.includes(keep) ? keep : defaultVhost();
  }
  for (const select of document.querySelectorAll("select[data-vhosts-all]")) {
    const keep = select.value;
    clear(select, el("option", { value: "" }, "All"), state.vhosts.map((v) => el("option", { value: v }, v)));
    select.value = keep === "" || state.vhosts.includes(keep) ? keep : "";
  }
}

function defaultVhost() {
  const v = selectedVhost();
  if (v) return v;
  return state.vhosts.includes("/") ? "/" : state.vhosts[0] || "/";
}

async function reloadVhosts() {
  const names = (await api.get("/vhosts")).map((v) => v.name);
  if (names.join("\u0000") !== state.vhosts.join("\u0000")) {
    state.vhosts = names;
    syncVhostSelects();
  }
}

function makeContext(main) {
  return {
    main,
    user: state.user,
    overview: state.overview,
    vhost: selectedVhost,
    vhostNames: () => state.vhosts.slice(),
    defaultVhost,
    flash,
    refreshSoon,
    navigate: (hash) => { location.hash = hash; },
    loggedOut: (reason) => logout(reason, false),
    reloadVhosts,
    passwordChanged: (password) => {
      const auth = api.basic(state.user.name, password);
      api.setAuthorization(auth);
      sessionStorage.setItem(AUTH_KEY, JSON.stringify({ user: state.user.name, auth }));
    },
  };
}

function renderTabs(route) {
  const user = state.user;
  const shown = (parent) => TABS.filter(([id, , under]) => under === parent && allowed(user, tabTarget(id).need));
  const adminTab = TABS.some(([id, , under]) => under === "admin" && id === route?.tab);
  const firstAdmin = tabTarget(shown("admin")[0][0]).href;
  const item = ([id, label], selected) => el("li", {},
    el("a", { href: tabTarget(id).href || firstAdmin, dataset: { tab: id }, class: selected ? "selected" : undefined },
      label));
  clear($("tabs"), shown(undefined).map((t) => item(t, t[0] === "admin" ? adminTab : route?.tab === t[0])));
  const sub = $("subtabs");
  sub.hidden = !adminTab;
  clear(sub, adminTab ? shown("admin").map((t) => item(t, route.tab === t[0])) : []);
}

function stopPage() {
  if (state.timer !== null) clearTimeout(state.timer);
  state.timer = null;
  if (state.current && state.current.page.dispose) state.current.page.dispose();
  state.current = null;
}

function route() {
  if (!state.user) return;
  stopPage();
  const main = $("main");
  clear(main);
  document.body.dataset.ready = "0";
  const segments = parseHash(location.hash);
  const found = segments && findRoute(segments);
  renderTabs(found);
  if (!found) {
    document.body.dataset.page = "not-found";
    document.title = "hashbroker: not found";
    main.append(panel("Not found", {}, el("p", {}, "There is no such page. "), el("a", { href: "#/" }, "Overview")));
    document.body.dataset.ready = "1";
    return;
  }
  document.body.dataset.page = found.name;
  document.title = `hashbroker: ${found.name}`;
  if (!allowed(state.user, found.need)) {
    // hidden, as RabbitMQ's UI hides it; nothing is asked of the API
    main.append(panel("Not allowed", { dataset: { denied: found.need } },
      el("p", {}, `This page is for users tagged ${found.need}; ${state.user.name} is tagged `,
        el("b", {}, state.user.tags.join(", ") || "nothing"), ".")));
    document.body.dataset.ready = "1";
    return;
  }
  const page = found.page(makeContext(main), ...found.params) || {};
  state.current = { page, hash: location.hash };
  tick();
}

/**
 * Refresh the mounted page. One refresh runs at a time: a call while one runs (an action's
 * refreshSoon, a new page) makes it run once more when done, so timers never pile up.
 */
async function tick() {
  if (state.ticking) {
    state.again = true;
    return;
  }
  const current = state.current;
  // gone, or about to be replaced (an action navigated away; its hashchange is on its way)
  if (!current || current.hash !== location.hash) return;
  state.ticking = true;
  state.again = false;
  if (state.timer !== null) clearTimeout(state.timer);
  state.timer = null;
  try {
    await Promise.all([current.page.refresh ? current.page.refresh() : null, reloadVhosts()]);
    if (state.current === current) {
      $("updated").textContent = `Refreshed ${new Date().toLocaleTimeString()}`;
      $("updated").classList.remove("error");
      delete document.body.dataset.error;
      document.body.dataset.renders = String(Number(document.body.dataset.renders || 0) + 1);
      document.body.dataset.ready = "1";
    }
  } catch (err) {
    if (err instanceof api.ApiError && err.loginFailed) {
      logout(err.reason, false);
    } else if (state.current === current) {
      const message = err instanceof api.ApiError && err.status === 404
        ? "Not found: it may have been deleted." : String(err.message || err);
      $("updated").textContent = message;
      $("updated").classList.add("error");
      document.body.dataset.error = message;
      document.body.dataset.ready = "1";
    }
  } finally {
    state.ticking = false;
  }
  if (!state.current) return;
  if (state.again || state.current !== current) {
    tick();
  } else if (interval() > 0) {
    state.timer = setTimeout(tick, interval());
  }
}

/** Refresh the page now (after an action), or as soon as the refresh that is running ends. */
function refreshSoon() {
  tick();
}

// -- login and logout ----------------------------------------------------------------------------

async function enter(user, auth, { remember }) {
  api.setAuthorization(auth);
  const who = await api.get("/whoami");
  state.user = userFlags(who.name, who.tags || []);
  state.overview = await api.get("/overview");
  state.vhosts = (await api.get("/vhosts")).map((v) => v.name);
  if (remember) sessionStorage.setItem(AUTH_KEY, JSON.stringify({ user, auth }));
  localStorage.removeItem(LOGGED_OUT_KEY);
  document.body.dataset.user = state.user.name;
  $("whoami").textContent = state.user.name;
  $("whoami").title = `tags: ${state.user.tags.join(", ") || "none"}`;
  $("cluster").textContent = state.overview.cluster_name || state.overview.node || "";
  $("version").textContent = `${state.overview.product_name || "hashbroker"} ${state.overview.product_version || ""}` +
    ` · RabbitMQ ${state.overview.rabbitmq_version || ""} compatible`;
  syncVhostSelects();
  const vhost = sessionStorage.getItem(VHOST_KEY);
  $("vhost-select").value = state.vhosts.includes(vhost) ? vhost : "";
  $("login-view").hidden = true;
  $("app").hidden = false;
  route();
}

function showLogin(reason) {
  $("app").hidden = true;
  $("login-view").hidden = false;
  document.body.dataset.page = "login";
  document.body.dataset.ready = "1";
  delete document.body.dataset.user;
  document.title = "hashbroker: login";
  const status = $("login-status");
  status.textContent = reason || "";
  status.hidden = !reason;
  if (isLoopback() && !$("login-user").value) {
    // RabbitMQ's default user, which may log in from localhost only
    $("login-user").value = "guest";
    $("login-password").value = "guest";
  }
}

function logout(reason, byUser) {
  stopPage();
  state.user = null;
  api.setAuthorization(null);
  sessionStorage.removeItem(AUTH_KEY);
  if (byUser) localStorage.setItem(LOGGED_OUT_KEY, "1");
  forgetHistory();
  clear($("main"));
  $("flash").hidden = true;
  showLogin(reason);
}

async function login(user, password, { quiet = false } = {}) {
  try {
    await enter(user, api.basic(user, password), { remember: true });
  } catch (err) {
    api.setAuthorization(null);
    state.user = null;
    showLogin(quiet ? "" : err instanceof api.ApiError ? err.reason : String(err.message || err));
  }
}

function start() {
  $("login-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    login($("login-user").value, $("login-password").value);
  });
  $("logout").addEventListener("click", () => logout("", true));
  $("interval").value = localStorage.getItem(INTERVAL_KEY) || "5000";
  $("interval").addEventListener("change", () => {
    localStorage.setItem(INTERVAL_KEY, $("interval").value);
    tick();
  });
  $("vhost-select").addEventListener("change", () => {
    sessionStorage.setItem(VHOST_KEY, $("vhost-select").value);
    route();
  });
  window.addEventListener("hashchange", route);
  const saved = sessionStorage.getItem(AUTH_KEY);
  if (saved) {
    const { user, auth } = JSON.parse(saved);
    enter(user, auth, { remember: false }).catch((err) => logout(err.reason || String(err), false));
  } else if (isLoopback() && !localStorage.getItem(LOGGED_OUT_KEY)) {
    // first visit from this machine: in as guest, as the broker's local dashboard always was
    login("guest", "guest", { quiet: true });
  } else {
    showLogin("");
  }
}

start();
