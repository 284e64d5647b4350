"""Record how RabbitMQ 3.10.8's management API answers a path it does not know, and which plugins
its /api/nodes lists, into unknown_path.json (run against a live node: `python
tests/data/plugins/record_unknown_path.py [host:port]`, default 127.0.0.1:15672).

A plugin's path with that plugin off is such an unknown path: the tests compare hashbroker's
answers for /api/stream/... without rabbitmq_stream_management with these."""

from __future__ import annotations

import base64
import http.client
import json
import sys
from pathlib import Path
from typing import Any

AUTH = {"authorization": "Basic " + base64.b64encode(b"guest:guest").decode()}
CASES = [
    (method, path, authed)
    for path in ("/api/nosuchpath", "/api/hashbroker-nosuch/a/b")
    for method in ("GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS")
    for authed in (False, True)
]
HEADERS = ("content-type", "allow", "www-authenticate")
"""The headers that matter to a client (server, date, vary and the CSP are cowboy's own)."""


def observe(host: str, port: int, method: str, path: str, authed: bool) -> dict[str, Any]:
    conn = http.client.HTTPConnection(host, port, timeout=10)
    headers = {**(AUTH if authed else {}), "content-type": "application/json"}
    conn.request(method, path, body=b"{}" if method in ("POST", "PUT") else None, headers=headers)
    resp = conn.getresponse()
    body = resp.read()
    conn.close()
    return {
        "method": method,
        "path": path,
        "authed": authed,
        "status": resp.status,
        "headers": {h: resp.getheader(h) for h in HEADERS if resp.getheader(h) is not None},
        "body": body.decode("utf-8"),
    }


def record(host: str, port: int) -> dict[str, Any]:
    conn = http.client.HTTPConnection(host, port, timeout=10)
    conn.request("GET", "/api/nodes", headers=AUTH)
    nodes = json.loads(conn.getresponse().read())
    return {
        "unknown_path": [observe(host, port, *case) for case in CASES],
        "nodes_enabled_plugins": nodes[0]["enabled_plugins"],
    }


if __name__ == "__main__":
    where = sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1:15672"
    h, _, p = where.rpartition(":")
    out = Path(__file__).with_name("unknown_path.json")
    out.write_text(json.dumps(record(h, int(p)), indent=1) + "\n")
    print(f"wrote {out}")
