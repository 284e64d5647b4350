"""Differential tests: random hash-exchange topologies on the live RabbitMQ vs `exchanges`.

Each scenario applies the same bind/unbind sequence to a RabbitMQ exchange and to the library's
exchange object, publishes the same messages, and compares, message by message, the queues
RabbitMQ delivered to with what `route` returns.
"""

from __future__ import annotations

import datetime
import random
import uuid
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pika
import pytest

import exchanges
from exchanges import Binding, Destination, ExchangeType, FieldTable, SimpleMessage

pytestmark = pytest.mark.live

Message = tuple[str, dict[str, Any] | None, dict[str, Any]]


class Mirror:
    """Applies binding operations to RabbitMQ and to a library exchange in lock step."""

    def __init__(self, channel: Any, exchange_type: str, arguments: dict[str, Any] | None = None) -> None:
        self.channel = channel
        self.name = f"hb.diff.{exchange_type}.{uuid.uuid4().hex[:8]}"
        channel.exchange_declare(self.name, exchange_type, arguments=arguments, auto_delete=False)
        self.model: ExchangeType = exchanges.create_exchange(exchange_type, arguments)
        self.present: list[Binding] = []
        self.queues: list[str] = []
        self.downstream: dict[str, str] = {}  # destination exchange -> the queue it fans out to

    def queue(self, suffix: str) -> str:
        name = f"{self.name}.{suffix}"
        if name not in self.queues:
            self.channel.queue_declare(name, exclusive=True)
            self.queues.append(name)
        return name

    def bind(self, queue: str, key: str) -> None:
        self.channel.queue_bind(queue, self.name, routing_key=key)
        binding = Binding(Destination.queue(queue), key, FieldTable())
        self.model.validate_binding(binding)
        if binding not in self.present:
            self.present.append(binding)
            self.model.add_binding(binding)

    def bind_exchange(self, suffix: str, key: str) -> None:
        """An exchange as a destination (fanning out to one queue), to pin RabbitMQ's resource
        order: exchanges sort before queues in the route table."""
        name = f"{self.name}.{suffix}"
        queue = self.queue(f"{suffix}.sink")
        self.channel.exchange_declare(name, "fanout", auto_delete=False)
        self.channel.queue_bind(queue, name)
        self.downstream[name] = queue
        self.channel.exchange_bind(name, self.name, routing_key=key)
        binding = Binding(Destination.exchange(name), key, FieldTable())
        self.model.validate_binding(binding)
        self.present.append(binding)
        self.model.add_binding(binding)

    def unbind(self, queue: str, key: str) -> None:
        self.channel.queue_unbind(queue, self.name, routing_key=key)
        binding = Binding(Destination.queue(queue), key, FieldTable())
        if binding in self.present:
            self.present.remove(binding)
            self.model.remove_bindings([binding])

    def compare(self, messages: list[Message]) -> None:
        expected = []
        for key, headers, props in messages:
            message = SimpleMessage([key, *props.get("cc", [])], FieldTable.from_python(headers), props)
            expected.append(sorted(self.downstream.get(d.name, d.name) for d in self.model.route(message)))
        actual = observe(self.channel, self.name, self.queues, messages)
        mismatches = [
            (i, messages[i], actual[i], expected[i]) for i in range(len(messages)) if actual[i] != expected[i]
        ]
        assert mismatches == [], f"{len(mismatches)} of {len(messages)} differ, first: {mismatches[:3]}"

    def close(self) -> None:
        self.channel.exchange_delete(self.name)
        for exchange in self.downstream:
            self.channel.exchange_delete(exchange)
        for queue in self.queues:
            self.channel.queue_delete(queue)


def observe(channel: Any, exchange: str, queues: list[str], messages: list[Message]) -> list[list[str]]:
    """Publish with confirms, then drain every queue: which queues got message i."""
    for i, (key, headers, props) in enumerate(messages):
        extra = {k: v for k, v in props.items() if k in ("message_id", "correlation_id", "timestamp")}
        cc_headers = dict(headers or {})
        if props.get("cc"):
            cc_headers["CC"] = props["cc"]
        properties = pika.BasicProperties(headers=cc_headers or None, **extra)
        channel.basic_publish(exchange, key, str(i).encode(), properties)
    got: list[list[str]] = [[] for _ in messages]
    for queue in queues:
        while True:
            method, _, body = channel.basic_get(queue, auto_ack=True)
            if method is None:
                break
            got[int(body)].append(queue)
    return [sorted(g) for g in got]


@pytest.fixture
def channel(rabbitmq_url: str) -> Any:
    connection = pika.BlockingConnection(pika.URLParameters(rabbitmq_url))
    ch = connection.channel()
    ch.confirm_delivery()
    yield ch
    connection.close()


def random_key(rng: random.Random) -> str:
    choice = rng.random()
    if choice < 0.1:
        return ""
    if choice < 0.3:
        return "".join(rng.choice("héllo日本ßø€ab") for _ in range(rng.randint(1, 6)))
    if choice < 0.4:
        return "k" * rng.randint(12, 60) + str(rng.randint(0, 9))
    return str(rng.randint(0, 10**9))


@pytest.mark.parametrize("seed", range(4))
def test_consistent_hash_random_topology_with_churn(channel: Any, seed: int) -> None:
    rng = random.Random(seed)
    mirror = Mirror(channel, "x-consistent-hash")
    try:
        names = [mirror.queue(f"q{i}") for i in range(rng.randint(2, 8))]
        rng.shuffle(names)
        for name in names:
            mirror.bind(name, str(rng.randint(1, 5)))
        messages: list[Message] = [(random_key(rng), None, {}) for _ in range(250)]
        mirror.compare(messages)
        for _ in range(rng.randint(1, 3)):  # churn: unbind, rebind with another weight, add duplicates
            victim = rng.choice(mirror.present)
            mirror.unbind(victim.destination.name, victim.key)
            mirror.bind(victim.destination.name, str(rng.randint(1, 4)))
            extra = rng.choice(names)
            mirror.bind(extra, str(rng.randint(1, 3)))
        mirror.compare(messages)
    finally:
        mirror.close()


def test_consistent_hash_unbinding_a_duplicate_drops_the_destination(channel: Any) -> None:
    mirror = Mirror(channel, "x-consistent-hash")
    try:
        a, b, c = (mirror.queue(n) for n in "abc")
        mirror.bind(a, "2")
        mirror.bind(a, "1")
        mirror.bind(b, "1")
        mirror.bind(c, "3")
        mirror.unbind(a, "1")
        mirror.compare([(str(i), None, {}) for i in range(200)])
    finally:
        mirror.close()


EPOCH_2020 = datetime.datetime(2020, 1, 1, tzinfo=datetime.UTC)
HEADER_VALUES: list[Callable[[random.Random], Any]] = [
    lambda r: f"v{r.randint(0, 10**6)}",
    lambda r: r.randint(-(2**31), 2**31 - 1),
    lambda r: r.randint(2**31, 2**62),
    lambda r: r.random() < 0.5,
    lambda r: r.randbytes(r.randint(0, 8)),
    lambda r: {"n": r.randint(0, 9), "s": "x"},
    lambda r: [r.randint(0, 9), "a"],
    lambda r: None,
    lambda r: Decimal(r.randint(0, 9999)).scaleb(-2),
    lambda r: EPOCH_2020 + datetime.timedelta(seconds=r.randint(0, 10**8)),
]


def test_consistent_hash_on_header_of_every_type(channel: Any) -> None:
    rng = random.Random(7)
    mirror = Mirror(channel, "x-consistent-hash", {"hash-header": "hash-on"})
    try:
        for i in range(6):
            mirror.bind(mirror.queue(f"q{i}"), str(rng.randint(1, 3)))
        messages: list[Message] = []
        for i in range(300):
            make = HEADER_VALUES[i % len(HEADER_VALUES)]
            headers = {"hash-on": make(rng)} if i % 17 else {"other": 1}
            messages.append((random_key(rng), headers, {}))
        mirror.compare(messages)
    finally:
        mirror.close()


@pytest.mark.parametrize("prop", ["message_id", "correlation_id", "timestamp"])
def test_consistent_hash_on_property(channel: Any, prop: str) -> None:
    rng = random.Random(prop)
    mirror = Mirror(channel, "x-consistent-hash", {"hash-property": prop})
    try:
        for i in range(5):
            mirror.bind(mirror.queue(f"q{i}"), str(rng.randint(1, 3)))
        messages: list[Message] = []
        for i in range(200):
            value: Any = rng.randint(0, 2**40) if prop == "timestamp" else f"id-{rng.randint(0, 10**9)}"
            messages.append((random_key(rng), None, {prop: value} if i % 11 else {}))
        mirror.compare(messages)
    finally:
        mirror.close()


@pytest.mark.parametrize("seed", range(3))
def test_modulus_hash_random_topology(channel: Any, seed: int) -> None:
    rng = random.Random(100 + seed)
    mirror = Mirror(channel, "x-modulus-hash")
    try:
        names = [mirror.queue(f"{rng.choice('zab')}{i}") for i in range(rng.randint(1, 9))]
        rng.shuffle(names)
        for name in names:  # binding keys decide RabbitMQ's route-table order
            mirror.bind(name, rng.choice(["", "k", "a", "zz", "é"]))
        mirror.bind(names[0], "second")  # one destination twice: two entries
        mirror.bind_exchange("x-dest", rng.choice(["", "k", "zz"]))  # same key as queues: exchange first
        messages: list[Message] = [
            (random_key(rng), None, {"cc": [random_key(rng)]} if i % 5 == 0 else {}) for i in range(250)
        ]
        mirror.compare(messages)
        victim = rng.choice([b for b in mirror.present if b.destination.kind == "queue"])
        mirror.unbind(victim.destination.name, victim.key)
        mirror.compare(messages)
    finally:
        mirror.close()
