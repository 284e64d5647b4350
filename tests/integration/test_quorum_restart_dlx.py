"""At-least-once dead letters held in a quorum queue's dead-letter store across a hashbroker restart
(data_dir store). With `x-dead-letter-strategy: at-least-once`, `x-overflow: reject-publish` and a
dead-letter exchange that routes nowhere, rejected messages wait in the queue's dead-letter store
(rabbit_fifo_dlx, in the Raft log): after a restart they are held again, still count toward the
queue's length limit, and the dead-letter worker forwards them (x-death reason `rejected`, count 1)
once a queue is bound: at its next retry, or at once when the worker starts with the binding in
place. A forwarded message is gone from the store: a further restart delivers nothing twice."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pika
import pytest

from broker.embedded import BrokerThread
from tests.management_support import call, mgmt_base, take_all
from tests.management_support import confirming_channel as channel

N = 3
QQ = {
    "x-queue-type": "quorum",
    "x-dead-letter-exchange": "dlx",
    "x-dead-letter-strategy": "at-least-once",
    "x-overflow": "reject-publish",
    "x-max-length": N,
}


def held(b: BrokerThread, name: str = "qq") -> tuple[int, int, int]:
    """(messages, messages_ready, messages_dlx) of the queue in the management API."""
    status, q = call(mgmt_base(b), "GET", f"/api/queues/%2F/{name}")
    assert status == 200, q
    return q["messages"], q["messages_ready"], q["messages_dlx"]


#: The order the messages are rejected in: RabbitMQ 3.10.8 forwards held dead letters in the order
#: they were dead-lettered, after a restart too (observed with rabbitmqctl stop_app / start_app).
REJECT_ORDER = ["m2", "m0", "m1"]


def hold_rejected(ch: Any) -> None:
    """N messages into qq, all fetched, then rejected without requeue (in `REJECT_ORDER`) while the
    DLX routes nowhere."""
    ch.exchange_declare("dlx", "direct", durable=True)
    ch.queue_declare("qq", durable=True, arguments=QQ)
    for i in range(N):
        ch.basic_publish("", "qq", f"m{i}".encode(), pika.BasicProperties(delivery_mode=2))
    tags = {}
    for _ in range(N):
        method, _props, body = ch.basic_get("qq", auto_ack=False)
        tags[body.decode()] = method.delivery_tag
    for body in REJECT_ORDER:
        ch.basic_reject(tags[body], requeue=False)


def accepted(ch: Any, body: bytes) -> bool:
    """Publish to qq with confirms: True if confirmed, False if nacked (reject-publish)."""
    try:
        ch.basic_publish("", "qq", body)
    except pika.exceptions.NackError:
        return False
    return True


def wait_depth(ch: Any, queue: str, n: int, timeout: float = 10.0) -> int:
    deadline = time.monotonic() + timeout
    depth = ch.queue_declare(queue, passive=True).method.message_count
    while depth < n and time.monotonic() < deadline:
        time.sleep(0.05)
        depth = ch.queue_declare(queue, passive=True).method.message_count
    return int(depth)


def drain(ch: Any, queue: str) -> list[tuple[str, dict[str, Any]]]:
    """(body, first x-death entry) of every message of `queue`."""
    return [(body.decode(), headers.get("x-death", [{}])[0]) for body, headers in take_all(ch, queue)]


def check_dead_letters(got: list[tuple[str, dict[str, Any]]]) -> None:
    assert [body for body, _death in got] == REJECT_ORDER
    for _body, death in got:
        assert (death["reason"], death["count"], death["queue"]) == ("rejected", 1, "qq")
        assert (death["exchange"], death["routing-keys"]) == ("", ["qq"])


def dead_lettered_once_after_a_restart(
    tmp_path: Path, wait: float, still_held: tuple[int, int, int], **settings: Any
) -> None:
    """One more restart and `wait` seconds later, held() is `still_held` and dlq has every rejected
    message once: a forwarded dead letter is not forwarded again."""
    with channel(tmp_path, **settings) as (b, ch):
        time.sleep(wait)
        assert held(b) == still_held
        got = drain(ch, "dlq")
    check_dead_letters(got)


@pytest.mark.timeout(120)
def test_held_dead_letters_survive_a_restart_and_go_once_a_queue_is_bound(tmp_path: Path) -> None:
    fast = {"dead_letter_worker_publisher_confirm_timeout": 0.5}
    with channel(tmp_path, **fast) as (b, ch):
        hold_rejected(ch)
        assert held(b) == (N, 0, N)
    with channel(tmp_path, **fast) as (b, ch):
        assert held(b) == (N, 0, N)  # held again, not back in the queue
        time.sleep(1.2)  # retries with no route keep them
        assert held(b) == (N, 0, N)
        # the held messages count toward x-max-length N: one publish over it, then refused
        assert accepted(ch, b"over")
        assert not accepted(ch, b"refused")
        ch.queue_declare("dlq", durable=True)
        ch.queue_bind("dlq", "dlx", routing_key="qq")
        assert wait_depth(ch, "dlq", N) == N  # the worker's next retry forwards them
        assert held(b) == (1, 1, 0)
        assert accepted(ch, b"room again")  # below the soft limit once they left
    dead_lettered_once_after_a_restart(tmp_path, 1.2, (2, 2, 0), **fast)


@pytest.mark.timeout(120)
def test_the_worker_forwards_held_dead_letters_when_it_starts(tmp_path: Path) -> None:
    """A queue bound to the DLX after the dead letters were held gets nothing before the worker's
    retry (180 s, RabbitMQ's default); a restart starts the worker, which forwards them at once."""
    with channel(tmp_path) as (b, ch):
        hold_rejected(ch)
        ch.queue_declare("dlq", durable=True)
        ch.queue_bind("dlq", "dlx", routing_key="qq")
        time.sleep(0.3)
        assert held(b) == (N, 0, N)
        assert ch.queue_declare("dlq", passive=True).method.message_count == 0
    with channel(tmp_path) as (b, ch):
        assert wait_depth(ch, "dlq", N) == N
        assert held(b) == (0, 0, 0)
    dead_lettered_once_after_a_restart(tmp_path, 0.3, (0, 0, 0))


@pytest.mark.timeout(120)
def test_a_purge_leaves_the_held_dead_letters(tmp_path: Path) -> None:
    """queue.purge empties the queue, not its dead-letter store (rabbit_fifo's purge leaves the
    dlx state alone), in the store too: they are held after the restart."""
    with channel(tmp_path) as (b, ch):
        hold_rejected(ch)
        assert accepted(ch, b"ready")
        assert held(b) == (N + 1, 1, N)
        assert ch.queue_purge("qq").method.message_count == 1
        assert held(b) == (N, 0, N)
    with channel(tmp_path) as (b, ch):
        assert held(b) == (N, 0, N)
