// The management HTTP API as the UI uses it: every call carries the logged-in user's basic-auth
// credentials, so the UI can do exactly what rabbitmqadmin could do as that user and nothing more.
// `credentials: "omit"` keeps the browser's own login prompt out of it (a 401 with
// WWW-Authenticate would otherwise open one).

export class ApiError extends Error {
  constructor(status, reason, path) {
    super(reason);
    this.status = status;
    this.reason = reason;
    this.path = path;
  }

  /** The credentials themselves were refused (wrong password, user deleted): back to the login form. */
  get loginFailed() {
    return this.status === 401 && /^(Login failed|User can only log in via localhost)/.test(this.reason);
  }
}

let authorization = null;

/** UTF-8 then base64, as HTTP basic auth of a non-ASCII user name or password needs. */
export function basic(user, password) {
  const bytes = new TextEncoder().encode(`${user}:${password}`);
  let binary = "";
  for (const b of bytes) binary += String.fromCharCode(b);
  return "Basic " + btoa(binary);
}

export function setAuthorization(value) {
  authorization = value;
}

export function getAuthorization() {
  return authorization;
}

function reasonOf(status, body) {
  if (body && typeof body === "object" && "reason" in body) {
    return typeof body.reason === "string" ? body.reason : JSON.stringify(body.reason);
  }
  return `HTTP ${status}`;
}

/**
 * One request; resolves to the decoded JSON body (null when empty) or rejects with an ApiError
 * carrying RabbitMQ's `reason`. `body`: an object (sent as JSON) or FormData (multipart).
 */
export async function request(method, path, { body, headers, auth } = {}) {
  const init = { method, credentials: "omit", cache: "no-store", headers: { ...headers } };
  const authHeader = auth || authorization;
  if (authHeader) init.headers.authorization = authHeader;
  if (body instanceof FormData) {
    init.body = body;
  } else if (body !== undefined) {
    init.body = JSON.stringify(body);
    init.headers["content-type"] = "application/json";
  }
  const resp = await fetch("/api" + path, init);
  const text = await resp.text();
  let decoded = null;
  if (text) {
    try { decoded = JSON.parse(text); } catch { decoded = text; }
  }
  if (!resp.ok) throw new ApiError(resp.status, reasonOf(resp.status, decoded), path);
  return decoded;
}

export const get = (path, options) => request("GET", path, options);
export const put = (path, body, options) => request("PUT", path, { ...options, body: body ?? {} });
export const post = (path, body, options) => request("POST", path, { ...options, body: body ?? {} });
export const del = (path, options) => request("DELETE", path, options);

/** "/queues/%2F/a%2Fb": each segment percent-encoded, so "/" inside a name stays in its segment. */
export function path(...segments) {
  return "/" + segments.map((s) => encodeURIComponent(s)).join("/");
}

/** The API names the default exchange "amq.default" in paths. */
export function exchangeSegment(name) {
  return name === "" ? "amq.default" : name;
}

/** A raw response (for downloads): the Response, or an ApiError. */
export async function fetchRaw(path) {
  const resp = await fetch("/api" + path, {
    credentials: "omit", cache: "no-store", headers: { authorization },
  });
  if (!resp.ok) {
    let body = null;
    try { body = await resp.json(); } catch { /* not JSON */ }
    throw new ApiError(resp.status, reasonOf(resp.status, body), path);
  }
  return resp;
}

/**
 * Endpoints a page can use once this broker's API offers them. While an entry is false the page says
 * the feature is not available, naming the endpoint, instead of calling it and failing.
 */
export const FEATURES = {
  closeConnection: true, // DELETE /api/connections/{name} (with an X-Reason header)
};
