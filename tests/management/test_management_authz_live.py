"""Management authorization, live-compared: every endpoint x identity answers as RabbitMQ 3.10.8.

The same throwaway users (one per tag, with and without permissions on a throwaway vhost) and the
same objects are made on the reference RabbitMQ (through its API, as guest) and on an embedded
hashbroker; then each request of the matrix runs as each identity against both. Status codes must be
equal; error bodies must be equal; for successful list reads, the names of the throwaway objects that
the identity can see must be equal (RabbitMQ filters lists by the vhosts a user may access, and
connections by owner unless the user is a monitor).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pika
import pytest

from broker.embedded import BrokerThread
from tests import conftest, management_support
from tests.conftest import rabbitmq_reachable
from tests.management_support import GUEST, q

RABBIT_API = conftest.RABBITMQ_API
RUN = uuid.uuid4().hex[:6]
V = f"hbaz-{RUN}"  # the vhost the identities with permissions may use
V2 = f"hbaz2-{RUN}"  # a vhost made and deleted by the matrix
TARGET = f"hbaz-target-{RUN}"  # a user the matrix creates, grants and deletes (never an identity)


def ident(tag: str, perms: bool) -> str:
    return f"hbaz-{RUN}-{tag or 'none'}{'' if perms else '-noperm'}"


# (label, user, tags, has permissions on V); anonymous and wrong password are added separately
IDENTITIES: list[tuple[str, str, str, bool]] = [
    (f"{tag or 'notags'}{'' if perms else '-noperm'}", ident(tag, perms), tag, perms)
    for tag in ("", "management", "policymaker", "monitoring", "administrator")
    for perms in (True, False)
]


def call(base: str, method: str, path: str, auth: str | None, body: Any = None) -> tuple[int, Any]:
    """The matrix names the identity before the body."""
    return management_support.call(base, method, path, body, auth)


@dataclass
class Case:
    method: str
    path: str
    body: Any = None
    setup: list[tuple[str, str, Any]] = field(default_factory=list)  # run as guest before each try

    @property
    def label(self) -> str:
        return f"{self.method} {self.path}"


VQ = q(V)
MSG = {"properties": {}, "routing_key": "q", "payload": "m", "payload_encoding": "string"}
GET = {"count": 1, "ackmode": "ack_requeue_true", "encoding": "auto"}
POLICY = {"pattern": "^zz", "definition": {"max-length": 5}, "apply-to": "queues"}
PERMS = {"configure": ".*", "write": ".*", "read": ".*"}
TARGET_PERMS = f"/api/permissions/{VQ}/{TARGET}"
MAKE_TARGET = ("PUT", f"/api/users/{TARGET}", {"password": "p", "tags": ""})
CASES: list[Case] = [
    Case("GET", "/api/overview"),
    Case("GET", "/api/whoami"),
    Case("GET", "/api/nodes"),
    Case("GET", "/api/connections"),
    Case("GET", "/api/channels"),
    Case("GET", "/api/exchanges"),
    Case("GET", f"/api/exchanges/{VQ}"),
    Case("GET", f"/api/exchanges/{VQ}/x"),
    Case("PUT", f"/api/exchanges/{VQ}/x2", {"type": "direct"}, [("DELETE", f"/api/exchanges/{VQ}/x2", None)]),
    Case("DELETE", f"/api/exchanges/{VQ}/x2", None, [("PUT", f"/api/exchanges/{VQ}/x2", {"type": "direct"})]),
    Case("POST", f"/api/exchanges/{VQ}/amq.default/publish", MSG),
    Case("GET", "/api/queues"),
    Case("GET", f"/api/queues/{VQ}"),
    Case("GET", f"/api/queues/{VQ}/q"),
    Case("PUT", f"/api/queues/{VQ}/q2", {"durable": False}, [("DELETE", f"/api/queues/{VQ}/q2", None)]),
    Case("DELETE", f"/api/queues/{VQ}/q2", None, [("PUT", f"/api/queues/{VQ}/q2", {"durable": False})]),
    Case("DELETE", f"/api/queues/{VQ}/q/contents"),
    Case("POST", f"/api/queues/{VQ}/q/get", GET),
    Case("GET", "/api/bindings"),
    Case("GET", f"/api/bindings/{VQ}"),
    Case("POST", f"/api/bindings/{VQ}/e/x/q/q", {"routing_key": "k2"}),
    Case("GET", "/api/vhosts"),
    Case("GET", f"/api/vhosts/{VQ}"),
    Case("PUT", f"/api/vhosts/{V2}", {}, [("DELETE", f"/api/vhosts/{V2}", None)]),
    Case("DELETE", f"/api/vhosts/{V2}", None, [("PUT", f"/api/vhosts/{V2}", {})]),
    Case("GET", "/api/users"),
    Case("GET", f"/api/users/{TARGET}"),
    Case(
        "PUT",
        f"/api/users/{TARGET}",
        {"password": "p", "tags": "administrator"},
        [("DELETE", f"/api/users/{TARGET}", None)],
    ),
    Case(
        "DELETE",
        f"/api/users/{TARGET}",
        None,
        [("PUT", f"/api/users/{TARGET}", {"password": "p", "tags": ""})],
    ),
    Case("GET", "/api/permissions"),
    Case("GET", f"/api/permissions/{VQ}/{TARGET}", None, [MAKE_TARGET, ("PUT", TARGET_PERMS, PERMS)]),
    Case("PUT", TARGET_PERMS, PERMS, [MAKE_TARGET, ("DELETE", TARGET_PERMS, None)]),
    Case("DELETE", TARGET_PERMS, None, [MAKE_TARGET, ("PUT", TARGET_PERMS, PERMS)]),
    Case("GET", "/api/policies"),
    Case("GET", f"/api/policies/{VQ}"),
    Case("GET", f"/api/policies/{VQ}/p"),
    Case("PUT", f"/api/policies/{VQ}/p2", POLICY, [("DELETE", f"/api/policies/{VQ}/p2", None)]),
    Case("DELETE", f"/api/policies/{VQ}/p2", None, [("PUT", f"/api/policies/{VQ}/p2", POLICY)]),
    Case("GET", "/api/parameters"),
    Case("GET", "/api/consumers"),
    Case("GET", f"/api/consumers/{VQ}"),
    Case("GET", "/api/nodes/rabbit@localhost"),
    Case("GET", f"/api/exchanges/{VQ}/x/bindings/source"),
    Case("GET", f"/api/queues/{VQ}/q/bindings"),
    Case("GET", f"/api/bindings/{VQ}/e/x/q/q"),
    Case(
        "DELETE",
        f"/api/bindings/{VQ}/e/x/q/q/k3",
        None,
        [("POST", f"/api/bindings/{VQ}/e/x/q/q", {"routing_key": "k3"})],
    ),
    Case("GET", f"/api/vhosts/{VQ}/permissions"),
    Case("GET", f"/api/users/{TARGET}/permissions", None, [MAKE_TARGET]),
    Case("POST", f"/api/definitions/{VQ}", {"queues": []}),
    Case("GET", "/api/definitions"),
    Case("GET", f"/api/definitions/{VQ}"),
    Case("POST", "/api/definitions", {"vhosts": [{"name": V}]}),
]

# every name the fixtures make; a list read is compared on which of these the identity sees
OUR_NAMES = {V, V2, "x", "q", "p", TARGET, *(u for _l, u, _t, _p in IDENTITIES)}


def setup_broker(base: str) -> None:
    """Users, the vhost, its objects and a connection per identity (so filtering can be seen)."""
    for path, body in [
        (f"/api/vhosts/{VQ}", {}),
        (f"/api/users/{TARGET}", {"password": "p", "tags": ""}),
        (f"/api/permissions/{VQ}/{TARGET}", PERMS),
        (f"/api/exchanges/{VQ}/x", {"type": "direct"}),
        (f"/api/queues/{VQ}/q", {"durable": False}),
        (f"/api/policies/{VQ}/p", POLICY),
    ]:
        status, got = call(base, "PUT", path, GUEST, body)
        assert status in (201, 204), (path, status, got)
    status, got = call(base, "POST", f"/api/bindings/{VQ}/e/x/q/q", GUEST, {"routing_key": "k"})
    assert status == 201, got
    for _label, user, tags, perms in IDENTITIES:
        status, got = call(base, "PUT", f"/api/users/{q(user)}", GUEST, {"password": "pw", "tags": tags})
        assert status in (201, 204), got
        if perms:
            status, got = call(base, "PUT", f"/api/permissions/{VQ}/{q(user)}", GUEST, PERMS)
            assert status in (201, 204), got


CONNECTED = [ident("management", True), ident("monitoring", True)]
KINDS = ("connections", "channels")


def connect(amqp_port: int, base: str) -> list[Any]:
    """One open connection with one channel per CONNECTED user, once the API lists them all."""
    conns = []
    for user in CONNECTED:
        params = pika.ConnectionParameters("127.0.0.1", amqp_port, V, pika.PlainCredentials(user, "pw"))
        conn = pika.BlockingConnection(params)
        conn.channel()
        conns.append(conn)
    deadline = time.monotonic() + 20  # RabbitMQ lists them with its next stats emission (5 s)
    while time.monotonic() < deadline:
        listed = [{c.get("user") for c in call(base, "GET", f"/api/{kind}", GUEST)[1]} for kind in KINDS]
        if all(set(CONNECTED) <= users for users in listed):
            return conns
        time.sleep(0.5)
    raise AssertionError(f"{base} never listed the connections and channels of {CONNECTED}")


def teardown_broker(base: str) -> None:
    for path in [f"/api/vhosts/{VQ}", f"/api/vhosts/{V2}", f"/api/users/{TARGET}"]:
        call(base, "DELETE", path, GUEST)
    for _label, user, _tags, _perms in IDENTITIES:
        call(base, "DELETE", f"/api/users/{q(user)}", GUEST)


def visible(body: Any) -> Any:
    """What a successful answer shows of the fixtures: the throwaway names in a list, else the body kind."""
    if isinstance(body, list):
        names = set()
        for item in body:
            if isinstance(item, dict):
                for key in ("name", "vhost", "user", "source", "destination"):
                    if item.get(key) in OUR_NAMES:
                        names.add(f"{key}={item[key]}")
        return sorted(names)
    if isinstance(body, dict) and "name" in body and "tags" in body and len(body) == 2:
        return body  # whoami
    if isinstance(body, dict) and "object_totals" in body:  # overview: what of the node it shows
        return [
            sorted(k for k in ("node", "listeners", "contexts") if k in body),
            sorted(body["object_totals"]),
        ]
    return type(body).__name__


def run_matrix(base: str) -> dict[tuple[str, str], tuple[int, Any]]:
    identities: list[tuple[str, str | None]] = [
        ("anonymous", None),
        ("wrong-password", f"{ident('administrator', True)}:bad"),
    ]
    identities += [(label, f"{user}:pw") for label, user, _t, _p in IDENTITIES]
    out: dict[tuple[str, str], tuple[int, Any]] = {}
    for case in CASES:
        for label, auth in identities:
            for method, path, body in case.setup:
                call(base, method, path, GUEST, body)
            status, body = call(base, case.method, case.path, auth, case.body)
            out[(case.label, label)] = (status, visible(body) if 200 <= status < 300 else body)
    return out


@pytest.fixture(scope="module")
def rabbit_matrix() -> Iterator[dict[tuple[str, str], tuple[int, Any]]]:
    if not rabbitmq_reachable():
        pytest.skip("the reference RabbitMQ is not reachable on 127.0.0.1:5672")
    try:
        call(RABBIT_API, "GET", "/api/overview", GUEST)
    except OSError:
        pytest.skip(f"RabbitMQ management API not answering on {RABBIT_API}")
    setup_broker(RABBIT_API)
    conns: list[Any] = []
    try:
        conns = connect(5672, RABBIT_API)
        yield run_matrix(RABBIT_API)
    finally:
        for conn in conns:
            conn.close()
        teardown_broker(RABBIT_API)


@pytest.mark.live
def test_every_endpoint_and_identity_as_rabbitmq(
    rabbit_matrix: dict[tuple[str, str], tuple[int, Any]],
) -> None:
    with BrokerThread(host="127.0.0.1", port=0, management_port=0) as b:
        base = f"http://127.0.0.1:{b.broker.management.port}"
        setup_broker(base)
        conns = connect(b.port, base)
        ours = run_matrix(base)
        for conn in conns:
            conn.close()
    diffs = [
        f"{key[0]} as {key[1]}: rabbitmq {rabbit_matrix[key]} hashbroker {ours[key]}"
        for key in rabbit_matrix
        if rabbit_matrix[key] != ours[key]
    ]
    assert not diffs, f"{len(diffs)} of {len(rabbit_matrix)} differ:\n" + "\n".join(diffs)


def test_a_user_without_tags_cannot_escalate_and_tags_take_effect_at_once() -> None:
    """The reported attack: a user made with no tags granting itself rights, reading hashes,
    changing guest's password. Tags set through the API or a definitions import take effect on the
    next request."""
    with BrokerThread(host="127.0.0.1", port=0, management_port=0) as b:
        base = f"http://127.0.0.1:{b.broker.management.port}"
        assert call(base, "PUT", "/api/users/mallory", GUEST, {"password": "m", "tags": ""})[0] == 201
        me = "mallory:m"
        refused = (401, {"error": "not_authorised", "reason": "Not management user"})
        assert (
            call(base, "PUT", "/api/users/mallory", me, {"password": "m", "tags": "administrator"}) == refused
        )
        assert call(base, "PUT", "/api/permissions/%2F/mallory", me, PERMS) == refused
        assert (
            call(base, "PUT", "/api/users/guest", me, {"password": "x", "tags": "administrator"}) == refused
        )
        assert call(base, "GET", "/api/users", me) == refused
        assert call(base, "GET", "/api/definitions", me) == refused
        assert call(base, "DELETE", "/api/vhosts/%2F", me) == refused
        assert b.call(lambda: b.broker.auth.users["mallory"].tags) == ()
        assert call(base, "GET", "/api/whoami", GUEST)[0] == 200  # guest's password unchanged
        # management: may read, not administer
        assert (
            call(base, "PUT", "/api/users/mallory", GUEST, {"password": "m", "tags": "management"})[0] == 204
        )
        assert call(base, "GET", "/api/whoami", me) == (200, {"name": "mallory", "tags": ["management"]})
        not_admin = (401, {"error": "not_authorised", "reason": "Not administrator user"})
        assert (
            call(base, "PUT", "/api/users/mallory", me, {"password": "m", "tags": "administrator"})
            == not_admin
        )
        assert call(base, "GET", "/api/nodes", me) == (
            401,
            {"error": "not_authorised", "reason": "Not monitor user"},
        )
        # a definitions import sets tags too
        doc = {"users": [{"name": "mallory", "password_hash": "", "tags": ["monitoring"]}]}
        assert call(base, "POST", "/api/definitions", GUEST, doc)[0] == 204
        assert call(base, "GET", "/api/nodes", me)[0] == 401  # the import replaced the password hash
        doc["users"][0]["password_hash"] = b.call(lambda: b.broker.auth.users["guest"].password_hash)
        assert call(base, "POST", "/api/definitions", GUEST, doc)[0] == 204
        assert call(base, "GET", "/api/nodes", "mallory:guest")[0] == 200
        exported = call(base, "GET", "/api/definitions", GUEST)[1]
        assert {"name": "mallory", "tags": ["monitoring"]}.items() <= next(
            u for u in exported["users"] if u["name"] == "mallory"
        ).items()
