"""A catastrophic regex from a user who may set policies or permissions cannot stall the broker.

A `policymaker` confined to its own vhost sets a policy with pattern `^(a+)+$` and declares a queue
named "a" * 40 + "!": a backtracking engine needs ~2^40 steps to say "no match" (RabbitMQ's PCRE
gives up at its match limit after ~1.2 s, in the one process that asked). hashbroker matches user
patterns with RE2 (broker.entities.patterns), so the declare answers at once, and a client of
another vhost doing round trips meanwhile never waits more than 100 ms. The same pattern as a
permission regex is checked on the same declare path.

The broker runs as `hashbroker serve` in its own process, so the measurement does not share the
test's interpreter lock.
"""

from __future__ import annotations

import base64
import json
import struct
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from pamqp import commands

from tests.differential_support import RawAmqp
from tests.robustness.neighbour_support import Neighbour
from tests.serve_support import free_port, serving_quietly, wait_listening

EVIL_PATTERN = "^(a+)+$"
EVIL_NAME = "a" * 40 + "!"


@dataclass
class Served:
    amqp: int
    http: int

    def api(
        self, method: str, path: str, body: object = None, user: str = "guest", password: str = "guest"
    ) -> int:
        return self.call(method, path, body, user, password)[0]

    def call(
        self, method: str, path: str, body: object = None, user: str = "guest", password: str = "guest"
    ) -> tuple[int, bytes]:
        auth = base64.b64encode(f"{user}:{password}".encode()).decode()
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.http}{path}",
            method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={"Authorization": f"Basic {auth}", "content-type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return int(response.status), response.read()
        except urllib.error.HTTPError as exc:
            return int(exc.code), exc.read()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    http = free_port()
    args = ("--management-port", str(http), "--data-dir", str(tmp_path / "data"))
    with serving_quietly(*args) as (proc, amqp):
        wait_listening(proc, http, time.monotonic() + 20)
        yield Served(amqp, http)


def confined_user(served: Served, tags: str) -> None:
    """User "pm" with `tags`, all permissions on vhost "evil" and nothing elsewhere."""
    assert served.api("PUT", "/api/vhosts/evil") in (201, 204)
    assert served.api("PUT", "/api/users/pm", {"password": "pm", "tags": tags}) in (201, 204)
    perms = {"configure": ".*", "write": ".*", "read": ".*"}
    assert served.api("PUT", "/api/permissions/evil/pm", perms) in (201, 204)


def declare_frame(channel: int, queue: str) -> bytes:
    """queue.declare, encoded here: pamqp refuses a "!" in a queue name, which AMQP and RabbitMQ allow."""
    raw = queue.encode()
    payload = struct.pack(">HHH", 50, 10, 0) + bytes([len(raw)]) + raw + b"\x00" + struct.pack(">I", 0)
    return struct.pack(">BHI", 1, channel, len(payload)) + payload + b"\xce"


def timed_declare(port: int, name: str, user: str = "pm", password: str = "pm") -> tuple[float, object]:
    client = RawAmqp("127.0.0.1", port, user=user, password=password, vhost="evil", timeout=30)
    try:
        client.open_channel(1)
        start = time.perf_counter()
        client.send_bytes(declare_frame(1, name))
        try:
            _channel, reply = client.recv(timeout=10)
        except TimeoutError:
            reply = None
        return time.perf_counter() - start, reply
    finally:
        client.close()


def declare_beside_a_neighbour(port: int, name: str) -> tuple[float, object, float]:
    """`timed_declare` while a neighbour in vhost "/" does round trips: how long the declare took,
    its reply, and the neighbour's longest wait."""
    neighbour = Neighbour(port, call_timeout=15)
    neighbour.start()
    time.sleep(0.2)
    elapsed, reply = timed_declare(port, name)
    time.sleep(0.2)
    return elapsed, reply, neighbour.finish()


def test_policy_pattern_cannot_freeze_the_broker(served: Served) -> None:
    confined_user(served, "policymaker")
    policy = {"pattern": EVIL_PATTERN, "definition": {"max-length": 1}, "apply-to": "queues"}
    assert served.api("PUT", "/api/policies/evil/redos", policy, user="pm", password="pm") == 201

    elapsed, reply, worst = declare_beside_a_neighbour(served.amqp, EVIL_NAME)

    assert isinstance(reply, commands.Queue.DeclareOk), reply
    assert elapsed < 2.0, f"the declare took {elapsed:.2f} s"
    assert worst < 0.1, f"a neighbour in another vhost waited {worst * 1000:.0f} ms"
    # and the answer is RabbitMQ's: the pattern does not match (no policy on the queue)
    status, body = served.call("GET", f"/api/queues/evil/{EVIL_NAME}")
    assert status == 200 and json.loads(body)["policy"] is None


def test_permission_regex_cannot_freeze_the_broker(served: Served) -> None:
    confined_user(served, "")
    perms = {"configure": EVIL_PATTERN, "write": ".*", "read": ".*"}
    assert served.api("PUT", "/api/permissions/evil/pm", perms) == 204

    elapsed, reply, worst = declare_beside_a_neighbour(served.amqp, EVIL_NAME)

    assert isinstance(reply, commands.Channel.Close) and reply.reply_code == 403, reply
    assert elapsed < 2.0, f"the refusal took {elapsed:.2f} s"
    assert worst < 0.1, f"a neighbour in another vhost waited {worst * 1000:.0f} ms"


def test_backtracking_only_constructs_are_refused_by_name(served: Served) -> None:
    """RabbitMQ (PCRE) accepts a lookbehind; hashbroker refuses it with a reason naming it, and
    keeps the common leading negative lookahead."""
    body = {"pattern": "(?<=a)b", "definition": {"max-length": 1}}
    assert served.api("PUT", "/api/policies/%2F/lookbehind", body) == 400
    body = {"pattern": r"^(?!amq\.).*", "definition": {"max-length": 1}}
    assert served.api("PUT", "/api/policies/%2F/not-amq", body) == 201
