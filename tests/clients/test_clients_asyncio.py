"""aio-pika and aiormq run the seed README's consistent-hash examples against hashbroker; per-queue
counts must equal RabbitMQ 3.10.8's (recorded reference for routing keys, live broker otherwise)."""

from __future__ import annotations

import asyncio
from typing import Any

import aio_pika
import aiormq
import pytest
from pamqp.commands import Basic

from tests.differential_support import (
    README_EXAMPLES,
    README_QUEUES,
    README_WEIGHTS,
    check_readme_counts,
    hashbroker_url,
    messages_for,
    readme_publish_args,
)

pytestmark = [pytest.mark.slow]


async def _aio_pika_publish(url: str, example: str, n: int) -> None:
    spec = README_EXAMPLES[example]
    conn = await aio_pika.connect(url, timeout=10)
    async with conn:
        ch = await conn.channel(publisher_confirms=False)
        x = await ch.declare_exchange(
            spec["exchange"], "x-consistent-hash", durable=True, arguments=spec["arguments"] or None
        )
        for name, weight in zip(README_QUEUES, README_WEIGHTS, strict=True):
            q = await ch.declare_queue(name, durable=True)
            await q.purge()
            await q.bind(x, routing_key=weight)
        for i in range(n):
            rk, props = readme_publish_args(example, i)
            await x.publish(aio_pika.Message(b"", **props), routing_key=rk)
        await ch.declare_queue(README_QUEUES[0], passive=True)  # round trip: all publishes were read


async def _aiormq_publish(url: str, example: str, n: int) -> None:
    spec = README_EXAMPLES[example]
    conn = await aiormq.connect(url)
    try:
        ch = await conn.channel(publisher_confirms=False)
        await ch.exchange_declare(
            spec["exchange"],
            exchange_type="x-consistent-hash",
            durable=True,
            arguments=spec["arguments"] or None,
        )
        for name, weight in zip(README_QUEUES, README_WEIGHTS, strict=True):
            await ch.queue_declare(name, durable=True)
            await ch.queue_purge(name)
            await ch.queue_bind(name, spec["exchange"], routing_key=weight)
        for i in range(n):
            rk, props = readme_publish_args(example, i)
            await ch.basic_publish(
                b"", exchange=spec["exchange"], routing_key=rk, properties=Basic.Properties(**props)
            )
        await ch.queue_declare(README_QUEUES[0], passive=True)
    finally:
        await conn.close()


def _run(coro: Any) -> None:
    asyncio.run(asyncio.wait_for(coro, 100))


PUBLISHERS = {"aio_pika": _aio_pika_publish, "aiormq": _aiormq_publish}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("example", list(README_EXAMPLES))
@pytest.mark.parametrize("client", list(PUBLISHERS))
def test_readme_example(client: str, example: str, request: pytest.FixtureRequest) -> None:
    url = hashbroker_url(request)
    n = messages_for(example, readme_client=False)
    _run(PUBLISHERS[client](url, example, n))
    check_readme_counts(request, url, example, n)
