"""Differential scenarios for what every path into queues shares (the vhost's delivery pipeline):
a dead letter meets its target queue's overflow as a publish does.

Observed on RabbitMQ 3.10.8: a dead letter routed to a full reject-publish queue is dropped, and one
routed to a full reject-publish-dlx queue is dead-lettered by that queue in turn (reason maxlen).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.differential_support import Ctx, Registry, bodies, run_differential, wait_for_count, x_death_obs

registry = Registry()
scenario = registry.scenario


@scenario
def scenario_dead_letter_meets_overflow(ctx: Ctx) -> Any:
    ch = ctx.confirm_channel(ctx.connect())
    src, full, refusing, last = ctx.queue("src"), ctx.queue("full"), ctx.queue("refusing"), ctx.queue("last")
    dlx = ctx.exchange("dlx")
    ch.exchange_declare(dlx, "fanout")
    ch.queue_declare(src, arguments={"x-dead-letter-exchange": dlx, "x-message-ttl": 0})
    ch.queue_declare(full, arguments={"x-max-length": 1, "x-overflow": "reject-publish"})
    refusing_args = {
        "x-max-length": 1,
        "x-overflow": "reject-publish-dlx",
        "x-dead-letter-exchange": "",
        "x-dead-letter-routing-key": last,
    }
    ch.queue_declare(refusing, arguments=refusing_args)
    ch.queue_declare(last)
    ch.queue_bind(full, dlx)
    ch.queue_bind(refusing, dlx)
    ch.basic_publish("", full, b"fill")
    ch.basic_publish("", refusing, b"fill")
    ch.basic_publish("", src, b"dead")
    wait_for_count(ch, last, 1)
    _method, props, body = ch.basic_get(last, auto_ack=True)
    return {
        "last": [body.decode(), x_death_obs(props.headers)],
        "full": bodies(ch, full),
        "refusing": bodies(ch, refusing),
        "src": bodies(ch, src),
    }


@pytest.mark.timeout(30)
@pytest.mark.parametrize(("name", "target"), registry.params())
def test_differential(name: str, target: str, request: pytest.FixtureRequest) -> None:
    run_differential(registry, name, target, request)
