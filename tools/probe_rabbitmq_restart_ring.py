"""Record how a live RabbitMQ 3.10.8 rebuilds x-consistent-hash rings when it restarts.

Writes tests/data/restart_ring_observations.json. Run from the repository root (needs the reference
broker on 127.0.0.1:5672, guest/guest, with rabbitmq_consistent_hash_exchange and a working
`rabbitmqctl`)::

    .venv/bin/python tools/probe_rabbitmq_restart_ring.py

It RESTARTS the broker's RabbitMQ application (`rabbitmqctl stop_app` + `start_app`, about ten
seconds), so nothing else should be using it meanwhile.

Why: the plugin keeps rings in a RAM table and rebuilds every durable exchange's ring on boot, so a
ring can come back different from the one built live, binding by binding. The plugin's recovery
replays `lists:usort` of the bindings (route-table order), but the broker's own binding recovery
runs first, concurrently; the topologies below cover what the order depends on: keys that sort
differently as bytes and as numbers ("10" < "2" < "9"), equal keys, an exchange-to-exchange
binding, a destination bound twice (live, the second binding adds nothing) and binding arguments.
Every object is named `hbrestart.*` and removed at start and at the end.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pika
import pika.exceptions

OUT = Path(__file__).resolve().parent.parent / "tests" / "data" / "restart_ring_observations.json"
PARAMS = pika.ConnectionParameters("127.0.0.1", 5672, "/", pika.PlainCredentials("guest", "guest"))
KEYS = 2000
PREFIX = "hbrestart."

# topology -> bindings (kind, destination, binding key, arguments) in the order they are made. A
# destination "x" of kind exchange is a fanout exchange feeding the queue "via".
TOPOLOGIES: dict[str, list[tuple[str, str, str, dict[str, Any]]]] = {
    "mixed": [
        ("queue", "z", "9", {}),
        ("queue", "b", "10", {}),
        ("queue", "a", "2", {}),
        ("exchange", "x", "3", {}),
        ("queue", "a", "1", {}),
        ("queue", "m", "10", {"note": "x"}),
        ("queue", "m", "4", {}),
    ],
    "reversed": [("queue", d, k, {}) for d, k in zip("fedcba", "654321", strict=True)],
    "equal-keys": [("queue", d, "1", {}) for d in "fedcba"],
    "bytes-not-numbers": [
        ("queue", "z", "9", {}),
        ("queue", "b", "10", {}),
        ("queue", "a", "2", {}),
        ("queue", "m", "10", {}),
    ],
    "ten-first": [
        ("queue", "b", "10", {}),
        ("queue", "z", "9", {}),
        ("queue", "a", "2", {}),
        ("queue", "m", "10", {}),
    ],
    "ten-last": [
        ("queue", "z", "9", {}),
        ("queue", "a", "2", {}),
        ("queue", "m", "10", {}),
        ("queue", "b", "10", {}),
    ],
    "two-digit": [
        ("queue", "z", "19", {}),
        ("queue", "b", "10", {}),
        ("queue", "a", "12", {}),
        ("queue", "m", "11", {}),
    ],
    "one-digit": [
        ("queue", "z", "9", {}),
        ("queue", "b", "8", {}),
        ("queue", "a", "2", {}),
        ("queue", "m", "7", {}),
    ],
}


def exchange_name(topology: str) -> str:
    return f"{PREFIX}{topology}"


def object_name(topology: str, short: str) -> str:
    return f"{PREFIX}{topology}.{short}"


def queues_of(topology: str) -> list[str]:
    """Short names of the queues to read back (the fanout's queue is "via")."""
    return sorted({d if kind == "queue" else "via" for kind, d, _k, _a in TOPOLOGIES[topology]})


def destinations_of(topology: str) -> list[str]:
    """`kind:short` per destination; per-key routings are digits indexing this list."""
    return sorted({f"{kind}:{d}" for kind, d, _k, _a in TOPOLOGIES[topology]})


def ctl(*args: str) -> str:
    proc = subprocess.run(["rabbitmqctl", *args], capture_output=True, text=True, timeout=180)
    if proc.returncode != 0:
        raise RuntimeError(f"rabbitmqctl {args}: {proc.stdout} {proc.stderr}")
    return proc.stdout


def ring_segments(topology: str) -> list[list[Any]]:
    """The plugin's bucket map read from its RAM table, as [[count, "kind:short"], ...] by bucket.

    (`rabbitmq-diagnostics consistent_hash_exchange_ring_state` crashes with a function_clause on a
    ring holding an exchange destination in 3.10.8, so the table is read directly.)"""
    program = (
        "[Rec] = mnesia:dirty_read(rabbit_exchange_type_consistent_hash_ring_state, "
        f'rabbit_misc:r(<<"/">>, exchange, <<"{exchange_name(topology)}">>)), '
        "[BM] = [E || E <- tuple_to_list(Rec), is_map(E)], "
        'io:format("~s~n", [rabbit_json:encode([[K, N] || {_, {resource, _, K, N}} '
        "<- lists:sort(maps:to_list(BM))])]), ok."
    )
    buckets = json.loads(ctl("eval", program, "--quiet").strip().splitlines()[0])
    segments: list[list[Any]] = []
    cut = len(object_name(topology, ""))
    for kind, name in buckets:
        dest = f"{kind}:{name[cut:]}"
        if segments and segments[-1][1] == dest:
            segments[-1][0] += 1
        else:
            segments.append([1, dest])
    return segments


def cleanup(ch: Any) -> None:
    for t in TOPOLOGIES:
        ch.exchange_delete(exchange_name(t))
        ch.exchange_delete(object_name(t, "x"))
        for q in queues_of(t):
            ch.queue_delete(object_name(t, q))


def declare(ch: Any) -> None:
    for t, bindings in TOPOLOGIES.items():
        ch.exchange_declare(exchange_name(t), "x-consistent-hash", durable=True)
        for q in queues_of(t):
            ch.queue_declare(object_name(t, q), durable=True)
        if "via" in queues_of(t):
            ch.exchange_declare(object_name(t, "x"), "fanout", durable=True)
            ch.queue_bind(object_name(t, "via"), object_name(t, "x"), "")
        for kind, dest, key, args in bindings:
            bind = ch.queue_bind if kind == "queue" else ch.exchange_bind
            bind(object_name(t, dest), exchange_name(t), key, arguments=args or None)


def route(ch: Any, topology: str) -> str:
    """Publish keys "0".."KEYS-1" with confirms and read every queue back: one digit per key."""
    destinations = destinations_of(topology)
    for q in queues_of(topology):
        ch.queue_purge(object_name(topology, q))
    for i in range(KEYS):
        ch.basic_publish(exchange_name(topology), str(i), str(i).encode())
    placed: dict[int, int] = {}
    for q in queues_of(topology):
        index = destinations.index("exchange:x" if q == "via" else f"queue:{q}")
        while True:
            method, _props, body = ch.basic_get(object_name(topology, q), auto_ack=True)
            if method is None:
                break
            placed[int(body)] = index
    if sorted(placed) != list(range(KEYS)):
        raise RuntimeError(f"{topology}: {KEYS - len(placed)} keys were not routed")
    return "".join(str(placed[i]) for i in range(KEYS))


def connect() -> tuple[pika.BlockingConnection, Any]:
    deadline = time.time() + 120
    while True:
        try:
            conn = pika.BlockingConnection(PARAMS)
            ch = conn.channel()
            ch.confirm_delivery()
            return conn, ch
        except pika.exceptions.AMQPConnectionError:
            if time.time() > deadline:
                raise
            time.sleep(1)


def main() -> int:
    version = ctl("eval", "rabbit:product_version().", "--quiet").strip().strip('"')
    conn, ch = connect()
    cleanup(ch)
    declare(ch)
    before = {t: (route(ch, t), ring_segments(t)) for t in TOPOLOGIES}
    conn.close()
    ctl("stop_app")
    ctl("start_app")
    ctl("await_startup")
    conn, ch = connect()
    try:
        after = {t: (route(ch, t), ring_segments(t)) for t in TOPOLOGIES}
    finally:
        cleanup(ch)
        conn.close()
    observations = {
        "rabbitmq_version": version,
        "restart": "rabbitmqctl stop_app; rabbitmqctl start_app",
        "keys": KEYS,
        "topologies": {
            t: {
                "bindings": [list(b) for b in bindings],
                "destinations": destinations_of(t),
                "ring_before": before[t][1],
                "ring_after": after[t][1],
                "before": before[t][0],
                "after": after[t][0],
            }
            for t, bindings in TOPOLOGIES.items()
        },
    }
    OUT.write_text(json.dumps(observations, indent=1) + "\n")
    for t in TOPOLOGIES:
        moved = sum(1 for x, y in zip(before[t][0], after[t][0], strict=True) if x != y)
        print(f"{t:<18} {moved:>5} of {KEYS} keys moved; ring after restart: {after[t][1]}")
    print(f"RabbitMQ {version} -> {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
