"""End to end: the broker persists durable state in its data dir and rebuilds it on start.

* crash test: `hashbroker serve --data-dir D` is SIGKILLed 20 times while a confirming publisher
  and an acking consumer run; after every restart each confirmed message is there exactly once or
  was acked, and nothing else appears;
* restart test: the seed topology (x-consistent-hash `e`, q1..q4 bound "1","1","2","2") routes
  100,000 keys identically before and after a restart (the ring is rebuilt in binding order);
* what survives (as RabbitMQ): durable exchanges/queues/bindings and persistent messages in durable
  queues, with acks, rejects, dead-lettering, purge and TTL applied; nothing transient survives;
* publisher confirms wait for the commit and stay in order.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pika
import pytest

from broker.embedded import BrokerThread
from tests.serve_support import free_port, start_serve

PERSISTENT = pika.BasicProperties(delivery_mode=2)
QUEUES = ("q1", "q2", "q3", "q4")
WEIGHTS = ("1", "1", "2", "2")


def declare_seed(ch: pika.adapters.blocking_connection.BlockingChannel) -> None:
    ch.exchange_declare("e", "x-consistent-hash", durable=True)
    for q, w in zip(QUEUES, WEIGHTS, strict=True):
        ch.queue_declare(q, durable=True)
        ch.queue_bind(q, "e", w)


def counts(ch: pika.adapters.blocking_connection.BlockingChannel, names: tuple[str, ...]) -> dict[str, int]:
    return {q: ch.queue_declare(q, passive=True).method.message_count for q in names}


def drain(ch: pika.adapters.blocking_connection.BlockingChannel, queue: str) -> list[bytes]:
    out = []
    while True:
        method, _props, body = ch.basic_get(queue, auto_ack=True)
        if method is None:
            return out
        out.append(body)


@contextlib.contextmanager
def broker(data_dir: Path) -> Iterator[BrokerThread]:
    with BrokerThread(host="127.0.0.1", port=0, data_dir=str(data_dir)) as b:
        yield b


@contextlib.contextmanager
def channel(b: BrokerThread) -> Iterator[pika.adapters.blocking_connection.BlockingChannel]:
    conn = pika.BlockingConnection(pika.URLParameters(b.url))
    try:
        yield conn.channel()
    finally:
        with contextlib.suppress(Exception):
            conn.close()


# -- restart: routing and contents ---------------------------------------------------------------------


def route_all(b: BrokerThread, n: int) -> dict[str, str]:
    """Publish keys "0".."n-1" (transient) to `e`, drain q1..q4: key -> queue."""
    with channel(b) as ch:
        for i in range(n):
            ch.basic_publish("e", str(i), str(i).encode())
        deadline = time.time() + 60
        while sum(counts(ch, QUEUES).values()) < n:
            assert time.time() < deadline
            time.sleep(0.05)
        placed: dict[str, str] = {}
        for q in QUEUES:
            for method, _props, body in ch.consume(q, auto_ack=True, inactivity_timeout=0.5):
                if method is None:
                    break
                placed[body.decode()] = q
            ch.cancel()
    return placed


@pytest.mark.slow
def test_restart_keeps_consistent_hash_routing(tmp_path: Path) -> None:
    n = 100_000
    data = tmp_path / "data"
    with broker(data) as b:
        with channel(b) as ch:
            declare_seed(ch)
        before = route_all(b, n)
    assert len(before) == n
    assert set(before.values()) == set(QUEUES)
    with broker(data) as b:
        with channel(b) as ch:
            assert counts(ch, QUEUES) == dict.fromkeys(QUEUES, 0)
        after = route_all(b, n)
    assert after == before


def test_restart_keeps_durable_contents_only(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with broker(data) as b, channel(b) as ch:
        declare_seed(ch)
        ch.exchange_declare("transient-x", "fanout", durable=False)
        ch.queue_declare("tq", durable=False)
        ch.queue_bind("tq", "amq.fanout")
        ch.queue_bind("q1", "amq.fanout")
        ch.queue_bind("q1", "transient-x")  # source not durable: not kept
        ch.confirm_delivery()
        for i in range(20):
            ch.basic_publish("amq.fanout", "", f"p{i}".encode(), PERSISTENT)
            ch.basic_publish("amq.fanout", "", f"t{i}".encode())  # transient message
        assert counts(ch, ("q1", "tq")) == {"q1": 40, "tq": 40}
    with broker(data) as b, channel(b) as ch:
        vh = b.broker.vhosts["/"]
        assert "transient-x" not in vh.exchanges and "tq" not in vh.queues
        assert [m.decode() for m in drain(ch, "q1")] == [f"p{i}" for i in range(20)]
        # durable bindings came back: amq.fanout still reaches q1, the seed ring is intact
        assert {(bd.destination.name, bd.key) for bd in vh.exchanges["amq.fanout"].binding_set} == {
            ("q1", "q1")
        }
        assert len(vh.exchanges["e"].binding_set) == 4


def test_acks_rejects_dead_letters_purge_and_ttl_survive_restart(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with broker(data) as b, channel(b) as ch:
        ch.exchange_declare("dlx", "fanout", durable=True)
        ch.queue_declare("dlq", durable=True)
        ch.queue_bind("dlq", "dlx")
        ch.queue_declare("src", durable=True, arguments={"x-dead-letter-exchange": "dlx"})
        ch.queue_declare("ttl", durable=True, arguments={"x-message-ttl": 50})
        ch.queue_declare("purged", durable=True)
        ch.queue_declare("capped", durable=True, arguments={"x-max-length": 2})
        ch.confirm_delivery()
        for i in range(6):
            ch.basic_publish("", "src", f"m{i}".encode(), PERSISTENT)
        for _ in range(3):
            ch.basic_publish("", "ttl", b"x", PERSISTENT)
            ch.basic_publish("", "purged", b"x", PERSISTENT)
        for i in range(5):
            ch.basic_publish("", "capped", f"c{i}".encode(), PERSISTENT)  # drop-head keeps c3, c4
        m0 = ch.basic_get("src")[0]
        ch.basic_ack(m0.delivery_tag)  # m0 acked: gone
        m1 = ch.basic_get("src")[0]
        ch.basic_reject(m1.delivery_tag, requeue=False)  # m1 -> dlq (a new persistent copy)
        ch.basic_get("src", auto_ack=True)  # m2 delivered without ack: gone
        m3 = ch.basic_get("src")[0]
        ch.basic_nack(m3.delivery_tag, requeue=True)  # m3 back, redelivered
        m3b = ch.basic_get("src")[0]  # delivered again, left unacked: back after restart
        assert m3b.redelivered
        ch.queue_purge("purged")
        time.sleep(0.2)
        assert counts(ch, ("ttl",)) == {"ttl": 0}  # expired
    with broker(data) as b, channel(b) as ch:
        assert counts(ch, ("ttl", "purged")) == {"ttl": 0, "purged": 0}
        assert drain(ch, "capped") == [b"c3", b"c4"]
        got = []
        while True:
            method, props, body = ch.basic_get("src", auto_ack=True)
            if method is None:
                break
            got.append((body, method.redelivered))
        assert got == [(b"m3", True), (b"m4", False), (b"m5", False)]
        method, props, body = ch.basic_get("dlq", auto_ack=True)
        assert body == b"m1" and props.delivery_mode == 2
        assert props.headers["x-death"][0]["reason"] == "rejected"


def test_deletes_and_unbinds_are_kept(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with broker(data) as b, channel(b) as ch:
        declare_seed(ch)
        ch.queue_unbind("q2", "e", "1")
        ch.queue_delete("q4")
        ch.exchange_declare("ad", "direct", durable=True, auto_delete=True)
        ch.queue_bind("q1", "ad", "k")
        ch.queue_unbind("q1", "ad", "k")  # last binding gone: ad auto-deleted
        ch.exchange_declare("gone", "topic", durable=True)
        ch.exchange_delete("gone")
        ch.queue_declare("excl", durable=True, exclusive=True)  # exclusive: never kept
    with broker(data) as b:
        vh = b.broker.vhosts["/"]
        assert "ad" not in vh.exchanges and "gone" not in vh.exchanges
        assert "q4" not in vh.queues and "excl" not in vh.queues
        assert sorted((bd.destination.name, bd.key) for bd in vh.exchanges["e"].binding_set) == [
            ("q1", "1"),
            ("q3", "2"),
        ]


def test_tx_commit_and_confirms_wait_for_the_store(tmp_path: Path) -> None:
    """Confirms stay in publish order while a slow commit holds an earlier persistent publish."""
    import aiormq

    async def run(url: str, b: BrokerThread) -> list[int]:
        conn = await aiormq.connect(url)
        ch = await conn.channel(publisher_confirms=True)
        await ch.queue_declare("dq", durable=True)
        store = b.broker.store
        assert store is not None and store.persistent
        store._commit_hook = lambda: time.sleep(0.3)  # type: ignore[attr-defined]
        order: list[int] = []
        futs = []
        for i in range(1, 7):
            persistent = i % 3 == 1  # 1 and 4 persistent; the rest transient or unroutable
            key = "dq" if i % 2 else "nowhere"
            props = aiormq.spec.Basic.Properties(delivery_mode=2 if persistent else 1)
            fut = asyncio.ensure_future(ch.basic_publish(b"x", routing_key=key, properties=props))
            fut.add_done_callback(lambda f, i=i: order.append(i))
            futs.append(fut)
        t0 = time.monotonic()
        results = await asyncio.gather(*futs)
        assert time.monotonic() - t0 >= 0.25  # waited for the (slow) commit
        assert all(isinstance(r, aiormq.spec.Basic.Ack) for r in results)
        store._commit_hook = None  # type: ignore[attr-defined]
        await conn.close()
        return order

    with broker(tmp_path / "data") as b:
        order = asyncio.run(run(b.url, b))
        assert order == sorted(order)
        with channel(b) as ch:
            ch.tx_select()
            ch.basic_publish("", "dq", b"tx", PERSISTENT)
            ch.tx_commit()
            assert counts(ch, ("dq",)) == {"dq": 4}


# -- crash test ------------------------------------------------------------------------------------------


def start_server(port: int, data: Path) -> subprocess.Popen[bytes]:
    args = ("--host", "127.0.0.1", "--data-dir", str(data), "--log-level", "ERROR")
    return start_serve(*args, port=port, wait=15)[0]


async def publish_and_consume(
    url: str, round_no: int, confirmed: set[int], acked: set[int], published: set[int]
) -> None:
    """Publish persistent messages with confirms (window 200) and ack q1's messages, until killed."""
    import aio_pika

    conn = await aio_pika.connect(url)
    try:
        pub = await conn.channel(publisher_confirms=True)
        sub = await conn.channel()
        await sub.set_qos(prefetch_count=50)
        ex = await pub.get_exchange("e")
        q1 = await sub.get_queue("q1")

        async def on_message(message: aio_pika.abc.AbstractIncomingMessage) -> None:
            acked.add(int(message.body))
            await message.ack()

        await q1.consume(on_message)
        sem = asyncio.Semaphore(200)
        tasks: set[asyncio.Future[None]] = set()
        failed = asyncio.Event()

        async def one(mid: int) -> None:
            try:
                await ex.publish(
                    aio_pika.Message(str(mid).encode(), delivery_mode=aio_pika.DeliveryMode.PERSISTENT),
                    routing_key=str(mid),
                )
                confirmed.add(mid)
            except Exception:
                failed.set()  # the broker is gone: stop publishing
            finally:
                sem.release()

        mid = round_no * 1_000_000
        while not failed.is_set():
            await sem.acquire()
            if failed.is_set():
                break
            published.add(mid)
            t = asyncio.ensure_future(one(mid))
            tasks.add(t)
            t.add_done_callback(tasks.discard)
            mid += 1
    finally:
        with contextlib.suppress(Exception):
            await conn.close()


async def crash_round(
    url: str, proc: subprocess.Popen[bytes], round_no: int, rng: random.Random
) -> tuple[set[int], set[int], set[int]]:
    confirmed: set[int] = set()
    acked: set[int] = set()
    published: set[int] = set()
    task = asyncio.ensure_future(publish_and_consume(url, round_no, confirmed, acked, published))
    await asyncio.sleep(rng.uniform(0.15, 0.9))
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    with contextlib.suppress(BaseException):
        await asyncio.wait_for(task, 3)
    return confirmed, acked, published


def drain_committed(url: str) -> list[int]:
    """Take everything from q1..q4 with acks committed in a transaction (tx.commit waits for disk)."""
    conn = pika.BlockingConnection(pika.URLParameters(url))
    try:
        ch = conn.channel()
        ch.tx_select()
        found: list[int] = []
        for q in QUEUES:
            while True:
                method, _props, body = ch.basic_get(q)
                if method is None:
                    break
                found.append(int(body))
                ch.basic_ack(method.delivery_tag)
        ch.tx_commit()
        return found
    finally:
        conn.close()


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_sigkill_loses_no_confirmed_message(tmp_path: Path) -> None:
    data = tmp_path / "data"
    port = free_port()
    url = f"amqp://guest:guest@127.0.0.1:{port}/%2F"
    rng = random.Random(int(os.environ.get("HASHBROKER_CRASH_SEED", "5")))
    t0 = time.monotonic()
    proc = start_server(port, data)
    try:
        conn = pika.BlockingConnection(pika.URLParameters(url))
        declare_seed(conn.channel())
        conn.close()
        totals = Counter[str]()
        for round_no in range(1, 21):
            confirmed, acked, published = asyncio.run(crash_round(url, proc, round_no, rng))
            proc = start_server(port, data)
            found = drain_committed(url)
            dupes = [m for m, c in Counter(found).items() if c > 1]
            assert not dupes, f"round {round_no}: duplicated after restart: {dupes[:5]}"
            lost = confirmed - acked - set(found)
            assert not lost, f"round {round_no}: {len(lost)} confirmed messages lost: {sorted(lost)[:5]}"
            strangers = set(found) - published
            assert not strangers, f"round {round_no}: unknown/earlier messages: {sorted(strangers)[:5]}"
            totals.update(
                confirmed=len(confirmed),
                published=len(published),
                acked=len(acked),
                found=len(found),
                unconfirmed_found=len(set(found) - confirmed),
            )
        elapsed = time.monotonic() - t0
        print(f"\ncrash test: 20 SIGKILLs in {elapsed:.1f}s, {dict(totals)}")
        assert totals["confirmed"] > 0 and totals["acked"] > 0
        assert elapsed < 90
    finally:
        proc.kill()
        proc.wait()
