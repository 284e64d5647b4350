"""Record how the live RabbitMQ 3.10.8 sharding plugin behaves, into tests/data/sharding_observations.json.

Run from the repository root (needs the reference broker on 127.0.0.1:5672, guest/guest, with
rabbitmq_sharding, rabbitmq_consistent_hash_exchange and a working `rabbitmqctl`)::

    .venv/bin/python tools/probe_rabbitmq_sharding.py            # (re)write the file
    .venv/bin/python tools/probe_rabbitmq_sharding.py --skip-hash  # skip the 2 x 10,000 routings

Why: the sans-I/O modules `broker/entities/policy.py` and `broker/entities/sharding.py` must answer
exactly as the
plugin does (shard names, which shard a consumer is attached to, error texts, what happens on policy
changes); reading the Erlang is not enough to be sure, so every claim the tests rely on is observed
here. Every object this script creates is named `hbshard.*` / `hbprobe.*` (and the plugin's
`sharding: hbshard.* - ...` queues); it removes them at start and at the end, so it is re-runnable
and does not disturb other users of the broker.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pika
import pika.exceptions

OUT = Path(__file__).resolve().parent.parent / "tests" / "data" / "sharding_observations.json"
PARAMS = pika.ConnectionParameters("127.0.0.1", 5672, "/", pika.PlainCredentials("guest", "guest"))
PREFIX = "hbshard."
POLICY_PREFIX = "hbprobe."


def ctl(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(["rabbitmqctl", *args], capture_output=True, text=True, timeout=120)
    if check and proc.returncode != 0:
        raise RuntimeError(f"rabbitmqctl {args}: {proc.stdout} {proc.stderr}")
    return proc


def ctl_json(*args: str) -> list[dict[str, Any]]:
    out = ctl(*args, "--formatter", "json", "--quiet").stdout
    return json.loads(out) if out.strip() else []


def node_name() -> str:
    return ctl("eval", "node().", "--quiet").stdout.strip()


def set_policy(name: str, pattern: str, definition: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return ctl("set_policy", *extra, name, pattern, definition, check=False)


def policy_error(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """rabbitmqctl's exit code and the error text (the lines after 'Error:' minus 'Validation failed')."""
    text = proc.stdout + proc.stderr
    if proc.returncode == 0:
        return {"rc": 0, "error": None}
    tail = text.split("Error:", 1)[1] if "Error:" in text else text
    lines = [line.strip() for line in tail.strip().splitlines() if line.strip()]
    validation = bool(lines) and lines[0] == "Validation failed"
    message = " ".join(lines[1:] if validation else lines)
    return {"rc": proc.returncode, "validation_failed": validation, "error": message}


def our_queues() -> list[dict[str, Any]]:
    rows = ctl_json(
        "list_queues", "name", "durable", "auto_delete", "arguments", "messages", "consumers", "policy"
    )
    return sorted((r for r in rows if PREFIX in r["name"]), key=lambda r: r["name"].encode())


def cleanup() -> None:
    for p in ctl_json("list_policies"):
        if p["name"].startswith(POLICY_PREFIX):
            ctl("clear_policy", p["name"], check=False)
    conn = pika.BlockingConnection(PARAMS)
    ch = conn.channel()
    for row in ctl_json("list_queues", "name"):
        if row["name"].startswith(PREFIX) or row["name"].startswith("sharding: " + PREFIX):
            ch.queue_delete(row["name"])
    for row in ctl_json("list_exchanges", "name"):
        if row["name"].startswith(PREFIX):
            ch.exchange_delete(row["name"])
    conn.close()


def bindings_of(exchange: str) -> list[list[str]]:
    rows = ctl_json("list_bindings", "source_name", "destination_name", "destination_kind", "routing_key")
    return [[r["destination_name"], r["routing_key"]] for r in rows if r["source_name"] == exchange]


def wait_for_shards(exchange: str, count: int) -> None:
    for _ in range(100):
        names = [q["name"] for q in our_queues() if q["name"].startswith(f"sharding: {exchange} - ")]
        if len(names) >= count:
            return
        time.sleep(0.1)
    raise RuntimeError(f"shards of {exchange} did not appear")


def channel_error(fn: Any) -> dict[str, Any]:
    """Run fn(channel) on a fresh channel; return the reply or the close code/text."""
    conn = pika.BlockingConnection(PARAMS)
    ch = conn.channel()
    try:
        result = fn(ch)
        return {"ok": True, "result": result}
    except pika.exceptions.ChannelClosedByBroker as exc:
        return {"ok": False, "scope": "channel", "reply_code": exc.reply_code, "reply_text": exc.reply_text}
    except pika.exceptions.ConnectionClosedByBroker as exc:
        return {
            "ok": False,
            "scope": "connection",
            "reply_code": exc.reply_code,
            "reply_text": exc.reply_text,
        }
    finally:
        if conn.is_open:
            conn.close()


# --------------------------------------------------------------------------------------------------


POLICY_DEFINITIONS = [
    "{bad",
    "[]",
    "{}",
    '{"foo": 1}',
    '{"foo":1,"bar":2}',
    '{"max-length":"a","message-ttl":"b","foo":1}',
    '{"max-length":"a","message-ttl":"b"}',
    '{"max-length":"a","shards-per-node":"b"}',
    '{"alternate-exchange":1,"shards-per-node":-1}',
    '{"shards-per-node": "x"}',
    '{"shards-per-node": -1}',
    '{"shards-per-node": 0}',
    '{"shards-per-node": 1.5}',
    '{"routing-key": "a"}',
    '{"shards-per-node": 2, "routing-key": 5}',
    '{"shards-per-node": 2, "routing-key": "k"}',
    '{"message-ttl": -1}',
    '{"message-ttl": 0}',
    '{"message-ttl": "x"}',
    '{"message-ttl": 1.5}',
    '{"max-length": -5}',
    '{"max-length": 0}',
    '{"max-length": "a"}',
    '{"max-length": true}',
    '{"dead-letter-exchange": 5}',
    '{"dead-letter-exchange": "dlx"}',
    '{"dead-letter-routing-key": 5}',
    '{"dead-letter-routing-key": "k"}',
    '{"expires": 0}',
    '{"expires": 1}',
    '{"expires": -1}',
    '{"expires": "x"}',
    '{"alternate-exchange": 3}',
    '{"alternate-exchange": "ae"}',
]


def probe_policy_validation() -> dict[str, Any]:
    name = POLICY_PREFIX + "err"
    pattern = r"^hbprobe\.nomatch$"
    definitions = {}
    for definition in POLICY_DEFINITIONS:
        definitions[definition] = policy_error(set_policy(name, pattern, definition))
        ctl("clear_policy", name, check=False)
    options = {}
    for label, extra in {
        "apply-to foo": ("--apply-to", "foo"),
        "priority -3": ("--priority", "-3"),
    }.items():
        options[label] = policy_error(set_policy(name, pattern, '{"max-length":1}', *extra))
        ctl("clear_policy", name, check=False)
    options["bad regex ^hb("] = policy_error(set_policy(name, "^hb(", '{"max-length":1}'))
    ctl("clear_policy", name, check=False)
    # list_policies row shape
    set_policy(
        name, "^x$", '{"shards-per-node":2,"max-length":1}', "--priority", "-3", "--apply-to", "exchanges"
    )
    rows = [r for r in ctl_json("list_policies") if r["name"] == name]
    table = ctl("list_policies", "--quiet").stdout
    ctl("clear_policy", name, check=False)
    missing = policy_error(ctl("clear_policy", POLICY_PREFIX + "does-not-exist", check=False))
    return {
        "definitions": definitions,
        "options": options,
        "list_policies_json": rows,
        "list_policies_table": [
            line for line in table.splitlines() if name in line or line.startswith("vhost")
        ],
        "clear_missing": missing,
    }


def probe_priority_ties() -> dict[str, Any]:
    """Which of two equally-prioritised matching policies applies (and that priority wins)."""
    conn = pika.BlockingConnection(PARAMS)
    ch = conn.channel()
    results = []
    cases = [("tie.a", "tie.b"), ("tie.b", "tie.a"), ("tie.zz", "tie.aa"), ("tie.1", "tie.2")]
    for i, (first, second) in enumerate(cases):
        queue = f"{PREFIX}tieq{i}"
        ch.queue_declare(queue)
        for policy in (first, second):
            set_policy(
                POLICY_PREFIX + policy,
                f"^{queue}$".replace(".", r"\."),
                '{"max-length": 5}',
                "--apply-to",
                "queues",
            )
        time.sleep(0.3)
        applied = {q["name"]: q["policy"] for q in our_queues()}[queue]
        results.append(
            {
                "created_first": POLICY_PREFIX + first,
                "created_second": POLICY_PREFIX + second,
                "applied": applied,
            }
        )
        for policy in (first, second):
            ctl("clear_policy", POLICY_PREFIX + policy, check=False)
    queue = f"{PREFIX}prioq"
    ch.queue_declare(queue)
    set_policy(POLICY_PREFIX + "prio.low", r"^hbshard\.prioq$", '{"max-length": 5}', "--priority", "1")
    set_policy(POLICY_PREFIX + "prio.high", r"^hbshard\.prio", '{"max-length": 6}', "--priority", "2")
    time.sleep(0.3)
    applied_priority = {q["name"]: q["policy"] for q in our_queues()}[queue]
    ctl("clear_policy", POLICY_PREFIX + "prio.low", check=False)
    ctl("clear_policy", POLICY_PREFIX + "prio.high", check=False)
    conn.close()
    return {"equal_priority": results, "higher_priority_wins": applied_priority}


def probe_names_and_declare(node: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    conn = pika.BlockingConnection(PARAMS)
    ch = conn.channel()
    ch.exchange_declare(PREFIX + "names", "x-modulus-hash", durable=True)
    ch.exchange_declare(PREFIX + "transient", "direct", durable=False)
    set_policy(
        POLICY_PREFIX + "names", r"^hbshard\.names$", '{"shards-per-node": 12}', "--apply-to", "exchanges"
    )
    set_policy(
        POLICY_PREFIX + "transient",
        r"^hbshard\.transient$",
        '{"shards-per-node": 1, "routing-key": "rk"}',
        "--apply-to",
        "exchanges",
    )
    wait_for_shards(PREFIX + "names", 12)
    wait_for_shards(PREFIX + "transient", 1)
    out["queues_names"] = [q for q in our_queues() if q["name"].startswith("sharding: hbshard.names")]
    out["bindings_names"] = bindings_of(PREFIX + "names")
    out["queues_transient"] = [q for q in our_queues() if q["name"].startswith("sharding: hbshard.transient")]
    out["bindings_transient"] = bindings_of(PREFIX + "transient")
    conn.close()
    return out


def attach_sequence(exchange: str, spn: int, consumers: int) -> list[dict[str, Any]]:
    conn = pika.BlockingConnection(PARAMS)
    ch = conn.channel()
    ch.exchange_declare(exchange, "x-modulus-hash", durable=True)
    set_policy(
        POLICY_PREFIX + exchange,
        "^" + exchange.replace(".", r"\.") + "$",
        json.dumps({"shards-per-node": spn}),
        "--apply-to",
        "exchanges",
    )
    wait_for_shards(exchange, spn)
    steps = []
    for i in range(consumers):
        tag = ch.basic_consume(exchange, lambda *a: None, consumer_tag=f"c{i + 1}")
        time.sleep(0.2)
        rows = ctl_json("list_consumers", "queue_name", "consumer_tag")
        attached = {
            r["consumer_tag"]: r["queue_name"]
            for r in rows
            if r["queue_name"].startswith("sharding: " + exchange)
        }
        counts = {
            q["name"]: q["consumers"]
            for q in our_queues()
            if q["name"].startswith(f"sharding: {exchange} - ")
        }
        steps.append({"consumer_tag": tag, "queue": attached.get(tag), "consumers_per_shard": counts})
    conn.close()
    ctl("clear_policy", POLICY_PREFIX + exchange, check=False)
    return steps


def probe_pseudo_queue(node: str) -> dict[str, Any]:
    x = PREFIX + "pq"
    out: dict[str, Any] = {}
    conn = pika.BlockingConnection(PARAMS)
    ch = conn.channel()
    ch.exchange_declare(x, "x-modulus-hash", durable=True)
    set_policy(
        POLICY_PREFIX + "pq",
        r"^hbshard\.pq$",
        '{"shards-per-node": 3, "routing-key": "r"}',
        "--apply-to",
        "exchanges",
    )
    wait_for_shards(x, 3)
    shards = [f"sharding: {x} - {node} - {i}" for i in range(3)]
    # put different numbers of messages in each shard: publish to the shards directly (default exchange)
    for i, q in enumerate(shards):
        for j in range(i + 2):
            ch.basic_publish("", q, f"{i}-{j}".encode())
    time.sleep(0.3)
    out["messages_per_shard"] = {q["name"]: q["messages"] for q in our_queues() if q["name"] in shards}
    # one consumer on shard 0 (via the pseudo-queue) so that shard counts differ
    ch2 = conn.channel()
    ch2.basic_qos(prefetch_count=1)
    ch2.basic_consume(x, lambda *a: None, consumer_tag="holder")
    time.sleep(0.3)
    out["holder_on"] = {
        r["consumer_tag"]: r["queue_name"] for r in ctl_json("list_consumers", "queue_name", "consumer_tag")
    }.get("holder")

    def declare(**kw: Any) -> Any:
        return raw_declare(x, **kw)

    out["declare_passive"] = channel_error(declare(passive=True))
    out["declare_durable"] = channel_error(declare(durable=True))
    out["declare_non_durable"] = channel_error(declare(durable=False))
    out["declare_with_args"] = channel_error(declare(durable=True, arguments={"x-max-length": 5}))

    def get(c: Any) -> Any:
        m, _props, body = c.basic_get(x, auto_ack=False)
        if m is None:
            return None
        return {
            "body": body.decode(),
            "message_count": m.message_count,
            "routing_key": m.routing_key,
            "exchange": m.exchange,
        }

    out["get"] = channel_error(get)
    out["bind"] = channel_error(lambda c: c.queue_bind(x, "amq.direct", "k") and None)
    out["unbind"] = channel_error(lambda c: c.queue_unbind(x, "amq.direct", "k") and None)
    out["purge"] = channel_error(lambda c: c.queue_purge(x) and None)
    out["delete"] = channel_error(lambda c: c.queue_delete(x) and None)
    out["bind_to_pseudo_exchange_ok"] = channel_error(
        lambda c: (c.queue_declare(PREFIX + "plain"), c.queue_bind(PREFIX + "plain", x, "k"), None)[2]
    )
    conn.close()
    # consume / get when no shard exists: a sharded exchange with shards-per-node 0
    ch_conn = pika.BlockingConnection(PARAMS)
    c = ch_conn.channel()
    c.exchange_declare(PREFIX + "zero", "x-modulus-hash", durable=True)
    ch_conn.close()
    set_policy(
        POLICY_PREFIX + "zero", r"^hbshard\.zero$", '{"shards-per-node": 0}', "--apply-to", "exchanges"
    )
    time.sleep(0.5)
    out["zero_shards_queues"] = [
        q["name"] for q in our_queues() if q["name"].startswith("sharding: hbshard.zero")
    ]
    out["zero_consume"] = channel_error(lambda c: c.basic_consume(PREFIX + "zero", lambda *a: None) and None)
    out["zero_get"] = channel_error(lambda c: c.basic_get(PREFIX + "zero") and None)
    out["zero_declare"] = channel_error(declare_other(PREFIX + "zero"))
    ctl("clear_policy", POLICY_PREFIX + "zero", check=False)
    return out


def raw_declare(name: str, **kw: Any) -> Any:
    """queue.declare that accepts a declare-ok for another queue name.

    pika waits for a DeclareOk whose `queue` equals the requested name; the plugin answers a declare
    of the pseudo-queue with shard 0's name, so pika's own queue_declare would wait forever.
    """

    def run(c: Any) -> Any:
        replies: list[Any] = []
        impl = c._impl
        impl._rpc(
            pika.spec.Queue.Declare(
                0,
                name,
                kw.get("passive", False),
                kw.get("durable", False),
                False,
                False,
                False,
                kw.get("arguments") or {},
            ),
            lambda frame: replies.append(frame.method),
            [pika.spec.Queue.DeclareOk],
        )
        deadline = time.monotonic() + 10
        while not replies and c.is_open and time.monotonic() < deadline:
            c.connection.process_data_events(time_limit=0.1)
        if c.is_closed and isinstance(c._closing_reason, pika.exceptions.ChannelClosedByBroker):
            raise c._closing_reason
        if not replies:
            return {"timeout": True}
        r = replies[0]
        return {"queue": r.queue, "message_count": r.message_count, "consumer_count": r.consumer_count}

    return run


def declare_other(name: str) -> Any:
    return raw_declare(name, durable=True)


def probe_policy_changes(node: str) -> dict[str, Any]:
    x = PREFIX + "chg"
    out: dict[str, Any] = {}
    conn = pika.BlockingConnection(PARAMS)
    ch = conn.channel()
    ch.exchange_declare(x, "x-modulus-hash", durable=True)
    pol = POLICY_PREFIX + "chg"
    pattern = r"^hbshard\.chg$"

    def snap(label: str) -> None:
        time.sleep(0.5)
        out[label] = {
            "queues": {
                q["name"]: q["messages"] for q in our_queues() if q["name"].startswith(f"sharding: {x} - ")
            },
            "bindings": bindings_of(x),
        }

    set_policy(pol, pattern, '{"shards-per-node": 3, "routing-key": "a"}', "--apply-to", "exchanges")
    wait_for_shards(x, 3)
    for i in range(30):
        ch.basic_publish(x, str(i), b"m")
    snap("spn3_rk_a")
    set_policy(pol, pattern, '{"shards-per-node": 2, "routing-key": "a"}', "--apply-to", "exchanges")
    snap("spn2_rk_a")
    ch2 = conn.channel()
    ch2.basic_consume(x, lambda *a: None, consumer_tag="after-lower-1")
    ch2.basic_consume(x, lambda *a: None, consumer_tag="after-lower-2")
    ch2.basic_consume(x, lambda *a: None, consumer_tag="after-lower-3")
    time.sleep(0.3)
    out["consume_after_lowering"] = {
        r["consumer_tag"]: r["queue_name"]
        for r in ctl_json("list_consumers", "queue_name", "consumer_tag")
        if r["consumer_tag"].startswith("after-lower")
    }
    ch2.close()
    set_policy(pol, pattern, '{"shards-per-node": 4, "routing-key": "a"}', "--apply-to", "exchanges")
    snap("spn4_rk_a")
    set_policy(pol, pattern, '{"shards-per-node": 4, "routing-key": "b"}', "--apply-to", "exchanges")
    snap("spn4_rk_b")
    set_policy(pol, pattern, '{"shards-per-node": 2, "routing-key": "c"}', "--apply-to", "exchanges")
    snap("spn2_rk_c")
    ctl("clear_policy", pol)
    snap("policy_cleared")
    out["consume_after_clear"] = channel_error(lambda c: c.basic_consume(x, lambda *a: None) and None)
    out["declare_after_clear"] = channel_error(declare_other(x))
    set_policy(pol, pattern, '{"shards-per-node": 2}', "--apply-to", "exchanges")
    snap("policy_reset_spn2_no_rk")
    ctl("clear_policy", pol)
    ch.exchange_delete(x)
    snap("exchange_deleted")
    conn.close()
    return out


def probe_hash(node: str, exchange_type: str, routing_key: str, count: int) -> dict[str, Any]:
    x = f"{PREFIX}{'mod' if exchange_type == 'x-modulus-hash' else 'ch'}"
    pol = POLICY_PREFIX + x
    conn = pika.BlockingConnection(PARAMS)
    ch = conn.channel()
    ch.exchange_declare(x, exchange_type, durable=True)
    set_policy(
        pol,
        "^" + x.replace(".", r"\.") + "$",
        json.dumps({"shards-per-node": 3, "routing-key": routing_key}),
        "--apply-to",
        "exchanges",
    )
    wait_for_shards(x, 3)
    time.sleep(0.3)
    bindings = bindings_of(x)
    ch.confirm_delivery()
    for key in range(count):
        ch.basic_publish(x, str(key), str(key).encode())
    shard_of: dict[str, str] = {}
    prefix = f"sharding: {x} - {node} - "
    for i in range(3):
        q = prefix + str(i)
        while True:
            m, _, body = ch.basic_get(q, auto_ack=True)
            if m is None:
                break
            shard_of[body.decode()] = str(i)
    conn.close()
    ctl("clear_policy", pol, check=False)
    return {
        "exchange_type": exchange_type,
        "policy": {"shards-per-node": 3, "routing-key": routing_key},
        "bindings": bindings,
        "keys": count,
        "shard_index": "".join(shard_of.get(str(k), "-") for k in range(count)),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-hash", action="store_true", help="keep the recorded hash routings")
    args = parser.parse_args()
    previous = json.loads(OUT.read_text()) if OUT.exists() else {}
    node = node_name()
    cleanup()
    data: dict[str, Any] = {
        "rabbitmq_version": ctl("eval", "rabbit_misc:version().", "--quiet").stdout.strip().strip('"'),
        "node": node,
    }
    try:
        data["policy_validation"] = probe_policy_validation()
        data["policy_priority"] = probe_priority_ties()
        data["names"] = probe_names_and_declare(node)
        data["attach"] = {
            "spn2": attach_sequence(PREFIX + "att2", 2, 6),
            "spn3": attach_sequence(PREFIX + "att3", 3, 6),
            "spn12": attach_sequence(PREFIX + "att12", 12, 12),
        }
        data["pseudo_queue"] = probe_pseudo_queue(node)
        data["policy_changes"] = probe_policy_changes(node)
        if args.skip_hash and "hash" in previous:
            data["hash"] = previous["hash"]
        else:
            data["hash"] = {
                "x-modulus-hash": probe_hash(node, "x-modulus-hash", "", 10_000),
                "x-consistent-hash": probe_hash(node, "x-consistent-hash", "1", 10_000),
            }
    finally:
        cleanup()
    OUT.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
