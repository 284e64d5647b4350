"""The management-API side of `hashbroker ctl`: the HTTP client and its errors.

rabbitmqctl talks Erlang distribution to the node; hashbroker has no Erlang, so ctl speaks HTTP to
the management API. An error carries rabbitmqctl's exit status (`broker.cli.status.Exit`).
"""

from __future__ import annotations

import base64
import json
from typing import Any
from urllib.parse import quote

from broker.cli.status import EX_NOPERM, EX_NOUSER, EX_SOFTWARE, EX_UNAVAILABLE, EX_USAGE

DEFAULT_URL = "http://127.0.0.1:15672"


class CtlError(Exception):
    """A failure to report as rabbitmqctl does ("Error:\\n<reason>" on stderr) with exit `code`."""

    def __init__(self, message: str, code: int = EX_SOFTWARE) -> None:
        super().__init__(message)
        self.code = code


class Client:
    """Minimal management-API client (urllib: no dependency, works before `pip install` extras)."""

    def __init__(self, url: str, user: str, password: str, timeout: float) -> None:
        self.base = url.rstrip("/")
        self.auth = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
        self.timeout = timeout

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        # Imported here: urllib.request pulls in http.client, email and ssl (~40 ms, ~3 MB), which
        # `hashbroker serve` (it builds this module's parser) should not pay for.
        import urllib.error
        import urllib.request

        data = None if body is None else json.dumps(body).encode()
        try:
            req = urllib.request.Request(self.base + "/api" + path, data=data, method=method)
        except ValueError:
            raise CtlError(
                f"--url {self.base}: not an http:// or https:// URL (e.g. http://127.0.0.1:15672)", EX_USAGE
            ) from None
        req.add_header("authorization", self.auth)
        if data is not None:
            req.add_header("content-type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                status, raw = resp.status, resp.read()
        except urllib.error.HTTPError as err:
            status, raw = err.code, err.read()
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise CtlError(
                f"unable to reach the management API at {self.base}: {reason}\n"
                "Is the broker running with --management-port? (set --url or HASHBROKER_MANAGEMENT_URL)",
                EX_UNAVAILABLE,
            ) from None
        try:
            decoded = json.loads(raw) if raw else None
        except ValueError:
            decoded = raw.decode("utf-8", "replace")
        if status == 401:
            raise CtlError("Access refused: check --user/--password", EX_NOPERM)
        return status, decoded

    def get(self, path: str) -> Any:
        status, data = self.request("GET", path)
        if status == 404:
            raise CtlError("not_found", EX_UNAVAILABLE)
        if status >= 400:
            raise CtlError(reason(data), EX_SOFTWARE)
        return data


def reason(data: Any) -> str:
    if isinstance(data, dict):
        return str(data.get("reason") or data.get("error") or data)
    return str(data)


def q(segment: str) -> str:
    """One URL path segment ("/" in a vhost or name must become %2F)."""
    return quote(segment, safe="")


def check(status: int, data: Any) -> None:
    if status == 404:
        raise CtlError("not_found", EX_UNAVAILABLE)
    if status >= 400:
        raise CtlError(reason(data), EX_SOFTWARE)


def vhost_exists(c: Client, vhost: str) -> bool:
    """rabbitmqctl lists nothing (exit 0) for an unknown vhost; the API would answer 404."""
    status, _ = c.request("GET", f"/vhosts/{q(vhost)}")
    return status == 200


def require_user_and_vhost(c: Client, user: str, vhost: str) -> None:
    if not vhost_exists(c, vhost):
        raise CtlError(f"Virtual host {vhost} does not exist", EX_UNAVAILABLE)
    status, _ = c.request("GET", f"/users/{q(user)}")
    if status == 404:
        raise CtlError(f"User {user} does not exist", EX_NOUSER)
