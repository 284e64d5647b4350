"""The hash-trace endpoint shows routing keys and hashed headers of the messages passing through an
exchange, so it asks for what consuming them would: read permission on the exchange. A management
user with write-only permissions on the vhost, or an administrator without permissions there, is
refused; a user who may read is served."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from broker.embedded import BrokerThread
from tests.management.test_management_api import http

TRACE = "/api/hashbroker/exchanges/%2F/trace-x/hash-trace"


@pytest.fixture(scope="module")
def api() -> Iterator[str]:
    with BrokerThread(port=0, management_port=0) as bt:
        base = f"http://127.0.0.1:{bt.broker.management.port}"
        put = http(base, "PUT", "/api/exchanges/%2F/trace-x", {"type": "x-consistent-hash"})
        assert put[0] in (201, 204)
        yield base


@pytest.mark.parametrize(
    ("tags", "permission", "status"),
    [
        ("management", {"configure": ".*", "write": ".*", "read": ""}, 401),
        ("management", {"configure": "", "write": "", "read": "^other$"}, 401),
        ("administrator", None, 401),
        ("management", {"configure": "", "write": "", "read": "^trace-x$"}, 200),
        ("administrator", {"configure": "", "write": "", "read": ".*"}, 200),
    ],
)
def test_trace_needs_read_permission(
    api: str, tags: str, permission: dict[str, str] | None, status: int
) -> None:
    user = f"tracer-{tags}-{status}-{bool(permission)}"
    assert http(api, "PUT", f"/api/users/{user}", {"password": "p", "tags": tags})[0] in (201, 204)
    try:
        if permission is not None:
            assert http(api, "PUT", f"/api/permissions/%2F/{user}", permission)[0] in (201, 204)
        got = http(api, "GET", TRACE, auth=(user, "p"))
        assert got[0] == status
        if status == 401:
            assert got[1] == {"error": "not_authorised", "reason": "Access refused."}
        else:
            assert got[1]["name"] == "trace-x" and got[1]["entries"] == []
    finally:
        http(api, "DELETE", f"/api/users/{user}")
