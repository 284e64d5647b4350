"""Record how a live RabbitMQ 3.10.8 rebuilds an x-consistent-hash ring when it restarts.

Writes tests/data/restart_ring_observations.json. Run from the repository root (needs the reference
broker on 127.0.0.1:5672, guest/guest, with rabbitmq_consistent_hash_exchange and a working
`rabbitmqctl`)::

    .venv/bin/python tools/probe_rabbitmq_restart_ring.py

It RESTARTS the broker's RabbitMQ application (`rabbitmqctl stop_app` + `start_app`, about ten
seconds), so nothing else should be using it meanwhile.

Why: the plugin keeps rings in a RAM table and on boot rebuilds each durable exchange's ring from
`lists:usort` of its bindings (route-table order), not in the order they were made. A topology
bound out of that order therefore routes differently after a restart; hashbroker reproduces this,
and this file is the observation its test compares against. The bindings mix everything the order
depends on: keys that sort differently as bytes and as numbers ("10" < "2" < "9"), an
exchange-to-exchange binding, a destination bound twice (live, the second binding adds nothing),
and binding arguments. All objects are named `hbrestart.*`, removed at start and at the end.
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
EXCHANGE = "hbrestart.ring"
FANOUT = "hbrestart.x"
VIA = "hbrestart.via"
QUEUES = ["hbrestart.z", "hbrestart.b", "hbrestart.a", "hbrestart.m", VIA]
DESTINATIONS = [f"queue:{q}" for q in QUEUES[:-1]] + [f"exchange:{FANOUT}"]
"""Per-key routings are stored as one digit per key: the index of the destination in this list."""
KEYS = 3000

# (kind, destination, binding key, arguments), in the order they are bound
BINDINGS: list[tuple[str, str, str, dict[str, Any]]] = [
    ("queue", "hbrestart.z", "9", {}),
    ("queue", "hbrestart.b", "10", {}),
    ("queue", "hbrestart.a", "2", {}),
    ("exchange", FANOUT, "3", {}),
    ("queue", "hbrestart.a", "1", {}),
    ("queue", "hbrestart.m", "10", {"note": "x"}),
    ("queue", "hbrestart.m", "4", {}),
]


def ctl(*args: str) -> str:
    proc = subprocess.run(["rabbitmqctl", *args], capture_output=True, text=True, timeout=180)
    if proc.returncode != 0:
        raise RuntimeError(f"rabbitmqctl {args}: {proc.stdout} {proc.stderr}")
    return proc.stdout


def ring_state() -> str:
    proc = subprocess.run(
        ["rabbitmq-diagnostics", "consistent_hash_exchange_ring_state", "-p", "/", EXCHANGE, "--quiet"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return (proc.stdout + proc.stderr).strip()


def cleanup(ch: Any) -> None:
    ch.exchange_delete(EXCHANGE)
    ch.exchange_delete(FANOUT)
    for q in QUEUES:
        ch.queue_delete(q)


def declare(ch: Any) -> None:
    ch.exchange_declare(EXCHANGE, "x-consistent-hash", durable=True)
    ch.exchange_declare(FANOUT, "fanout", durable=True)
    for q in QUEUES:
        ch.queue_declare(q, durable=True)
    ch.queue_bind(VIA, FANOUT, "")
    for kind, dest, key, args in BINDINGS:
        if kind == "queue":
            ch.queue_bind(dest, EXCHANGE, key, arguments=args or None)
        else:
            ch.exchange_bind(dest, EXCHANGE, key, arguments=args or None)


def destination_of(queue: str) -> str:
    return f"exchange:{FANOUT}" if queue == VIA else f"queue:{queue}"


def route(ch: Any) -> list[str]:
    """Publish keys "0".."KEYS-1" with confirms; read every queue back: the destination per key."""
    for q in QUEUES:
        ch.queue_purge(q)
    for i in range(KEYS):
        ch.basic_publish(EXCHANGE, str(i), str(i).encode(), mandatory=False)
    placed: dict[int, str] = {}
    for q in QUEUES:
        while True:
            method, _props, body = ch.basic_get(q, auto_ack=True)
            if method is None:
                break
            placed[int(body)] = destination_of(q)
    missing = [i for i in range(KEYS) if i not in placed]
    if missing:
        raise RuntimeError(f"{len(missing)} keys were not routed (first {missing[:5]})")
    return [placed[i] for i in range(KEYS)]


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
    before = route(ch)
    ring_before = ring_state()
    conn.close()
    ctl("stop_app")
    ctl("start_app")
    ctl("await_startup")
    conn, ch = connect()
    try:
        after = route(ch)
        ring_after = ring_state()
    finally:
        cleanup(ch)
        conn.close()
    moved = sum(1 for x, y in zip(before, after, strict=True) if x != y)

    def digits(routed: list[str]) -> str:
        return "".join(str(DESTINATIONS.index(d)) for d in routed)

    OUT.write_text(
        json.dumps(
            {
                "rabbitmq_version": version,
                "restart": "rabbitmqctl stop_app; rabbitmqctl start_app",
                "exchange": EXCHANGE,
                "fanout": FANOUT,
                "via": VIA,
                "bindings": [list(b) for b in BINDINGS],
                "keys": KEYS,
                "destinations": DESTINATIONS,
                "moved": moved,
                "ring_before": ring_before,
                "ring_after": ring_after,
                "before": digits(before),
                "after": digits(after),
            },
            indent=1,
        )
        + "\n"
    )
    print(f"RabbitMQ {version}: {moved} of {KEYS} keys changed destination across the restart -> {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
