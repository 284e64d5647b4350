"""x-random, x-recent-history and x-jms-topic on hashbroker against their RabbitMQ 3.10.8 plugins.

Every scenario runs on an embedded hashbroker with the three plugins on and is compared with the
observation recorded on the live RabbitMQ (tests/data/plugin_xtypes_observations.json), so a
clone without RabbitMQ still compares; where the live broker has the plugin, the scenario also runs
there and must still give the recorded observation (tests marked live; they skip naming the
`rabbitmq-plugins enable` command when the plugin is off). Re-record with
`python -m tests.differential.test_differential_xtypes`.
"""

from __future__ import annotations

import datetime
import json
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import pika
import pika.exceptions
import pytest

from tests.differential_support import (
    Ctx,
    Registry,
    assert_same_observation,
    attempt,
    attempt_each,
    bodies,
    get_all,
)
from tests.xtypes_support import JMS_TOPIC, RANDOM, RECENT_HISTORY, Typed, xtypes_broker

RECORDING = Path(__file__).resolve().parent.parent / "data" / "plugin_xtypes_observations.json"

registry = Registry()
PLUGIN: dict[str, str] = {}
"""The plugin each scenario needs, by scenario name."""


def needs(plugin: str) -> Any:
    def mark(fn: Any) -> Any:
        PLUGIN[fn.__name__.removeprefix("scenario_")] = plugin
        return registry.scenario(fn)

    return mark


def _publish(ch: Any, exchange: str, key: str, body: str, headers: dict[str, Any] | None = None) -> None:
    ch.basic_publish(exchange, key, body.encode(), pika.BasicProperties(headers=headers))


def _mandatory(ch: Any, exchange: str, body: str) -> str:
    """A mandatory publish on a confirm channel: "routed" or "returned"."""
    try:
        ch.basic_publish(exchange, "k", body.encode(), mandatory=True)
    except pika.exceptions.UnroutableError:
        return "returned"
    return "routed"


def _selector(term: str) -> dict[str, Any]:
    return {"rjms_erlang_selector": term}


# ------------------------------------------------------------------------------------------------
# x-random
# ------------------------------------------------------------------------------------------------


@needs(RANDOM)
def scenario_random_declare_and_bind(ctx: Ctx) -> Any:
    conn = ctx.connect()
    x, q = ctx.exchange("x"), ctx.queue("q")
    ch = conn.channel()
    ch.queue_declare(q)
    return {
        "declare": attempt(lambda: ch.exchange_declare(x, "x-random", arguments={"any": 1, "x-foo": "bar"})),
        "redeclare": attempt(
            lambda: ch.exchange_declare(x, "x-random", arguments={"any": 1, "x-foo": "bar"})
        ),
        "passive": attempt(lambda: ch.exchange_declare(x, "x-random", passive=True)),
        "bind_any_args": attempt(lambda: ch.queue_bind(q, x, "k", arguments={"weird": [1, "a"], "n": None})),
        "inequivalent": attempt(lambda: ch.exchange_declare(x, "x-random", arguments={"any": 2})),
        "as_other_type": attempt(lambda: conn.channel().exchange_declare(x, "fanout")),
    }


def _chi_square(counts: list[int], weights: list[int]) -> float:
    total, weight = sum(counts), sum(weights)
    return sum(
        (c - total * w / weight) ** 2 / (total * w / weight) for c, w in zip(counts, weights, strict=True)
    )


@needs(RANDOM)
def scenario_random_distribution(ctx: Ctx) -> Any:
    """Each message reaches exactly one destination, each binding equally likely: a queue bound
    with three keys gets 3/5, a queue bound once 1/5, an exchange bound once 1/5 (passed on to its
    queue). Chi-square with 2 degrees of freedom under 20 (p < 5e-5 to fail by chance)."""
    ch = ctx.confirm_channel(ctx.connect())
    x, inner = ctx.exchange("x"), ctx.exchange("inner")
    qa, qb, qc = ctx.queue("a"), ctx.queue("b"), ctx.queue("c")
    ch.exchange_declare(x, "x-random")
    ch.exchange_declare(inner, "fanout")
    for q in (qa, qb, qc):
        ch.queue_declare(q)
    for key in ("k1", "k2", "k3"):
        ch.queue_bind(qa, x, key)
    ch.queue_bind(qb, x, "zz")
    ch.exchange_bind(inner, x, "e")
    ch.queue_bind(qc, inner, "")
    n = 500
    for i in range(n):
        _publish(ch, x, f"rk{i % 7}", str(i))
    counts = [ch.queue_declare(q, passive=True).method.message_count for q in (qa, qb, qc)]
    return {
        "total": sum(counts),
        "every_destination_reached": all(counts),
        "chi_square_under_20": _chi_square(counts, [3, 1, 1]) < 20,
    }


@needs(RANDOM)
def scenario_random_one_or_no_binding(ctx: Ctx) -> Any:
    ch = ctx.confirm_channel(ctx.connect())
    x, q = ctx.exchange("x"), ctx.queue("q")
    ch.exchange_declare(x, "x-random")
    ch.queue_declare(q)
    unroutable = _mandatory(ch, x, "none")
    ch.queue_bind(q, x, "k")
    for i in range(5):
        _publish(ch, x, "any", f"one{i}")
    ch.queue_unbind(q, x, "k")
    _publish(ch, x, "any", "after-unbind")
    return {"mandatory_unroutable": unroutable, "single": bodies(ch, q)}


# ------------------------------------------------------------------------------------------------
# x-recent-history
# ------------------------------------------------------------------------------------------------

LENGTH_VALUES: dict[str, Any] = {
    "int_5": 5,
    "int_1": 1,
    "long": 2**40,
    "zero": 0,
    "negative": -1,
    "string": "abc",
    "bool": True,
    "decimal": Decimal("1.5"),
    "void": None,
    "bytes": b"ab",
    "table": {"a": 1},
    "array": [1, "a"],
    "timestamp": datetime.datetime(2020, 1, 1, tzinfo=datetime.UTC),
    "byte": Typed("byte", 3),
    "short": Typed("short", 300),
    "unsignedbyte": Typed("unsignedbyte", 3),
    "unsignedshort": Typed("unsignedshort", 3),
    "unsignedint": Typed("unsignedint", 3),
    "double": Typed("double", 2.0),
    "float": Typed("float", 1.5),
    "short_negative": Typed("short", -2),
}


@needs(RECENT_HISTORY)
def scenario_recent_history_length_argument(ctx: Ctx) -> Any:
    def declare(value: Any) -> Any:
        def run(ch: Any) -> Any:
            x = ctx.exchange("x")
            return ch.exchange_declare(x, "x-recent-history", arguments={"x-recent-history-length": value})

        return run

    return attempt_each(ctx, {label: declare(value) for label, value in LENGTH_VALUES.items()})


def _drain(ch: Any, q: str) -> list[list[Any]]:
    return [[m["body"], m["routing_key"], m["exchange"], m["redelivered"]] for m in get_all(ch, q)]


@needs(RECENT_HISTORY)
def scenario_recent_history_replay(ctx: Ctx) -> Any:
    """A new binding gets the kept messages: a queue oldest first, an exchange newest first; a
    binding that already exists gets nothing; only a boolean true no-store header skips keeping."""
    ch = ctx.confirm_channel(ctx.connect())
    x, fan = ctx.exchange("rh"), ctx.exchange("fan")
    q1, q2, q3 = ctx.queue("q1"), ctx.queue("q2"), ctx.queue("q3")
    ch.exchange_declare(x, "x-recent-history", arguments={"x-recent-history-length": 4})
    ch.exchange_declare(fan, "fanout")
    for q in (q1, q2, q3):
        ch.queue_declare(q)
    no_store: list[Any] = [None, True, False, 1, "true", Typed("byte", 1), None]
    for i, flag in enumerate(no_store):
        headers = None if flag is None else {"x-recent-history-no-store": flag, "i": i}
        _publish(ch, x, f"rk{i}", f"m{i}", headers)
    ch.queue_bind(q1, x, "a")
    first = _drain(ch, q1)
    ch.queue_bind(q1, x, "a")
    again = _drain(ch, q1)
    ch.queue_bind(q1, x, "b")
    other_key = _drain(ch, q1)
    ch.queue_bind(q2, fan, "")
    ch.exchange_bind(fan, x, "e")
    through_exchange = _drain(ch, q2)
    _publish(ch, x, "live", "live")
    live = {"q1": _drain(ch, q1), "q2": _drain(ch, q2)}
    ch.queue_bind(q3, x, "z")
    return {
        "queue": first,
        "rebind": again,
        "other_key": other_key,
        "exchange": through_exchange,
        "live": live,
        "after_live": _drain(ch, q3),
    }


@needs(RECENT_HISTORY)
def scenario_recent_history_default_length_and_lifetime(ctx: Ctx) -> Any:
    """20 kept by default; deleting the exchange forgets them (a new one of that name starts empty)."""
    ch = ctx.confirm_channel(ctx.connect())
    x, q, q2 = ctx.exchange("rh"), ctx.queue("q"), ctx.queue("q2")
    ch.exchange_declare(x, "x-recent-history")
    ch.queue_declare(q)
    ch.queue_declare(q2)
    for i in range(25):
        _publish(ch, x, "k", str(i))
    ch.queue_bind(q, x, "")
    kept = bodies(ch, q)
    ch.exchange_delete(x)
    ch.exchange_declare(x, "x-recent-history", arguments={"x-recent-history-length": 1})
    ch.queue_bind(q, x, "")
    after_redeclare = bodies(ch, q)
    for i in range(3):
        _publish(ch, x, "k", f"n{i}")
    ch.queue_bind(q2, x, "")
    return {"kept": kept, "after_redeclare": after_redeclare, "length_1": bodies(ch, q2), "q": bodies(ch, q)}


@needs(RECENT_HISTORY)
def scenario_recent_history_exchange_binding_refused(ctx: Ctx) -> Any:
    """Binding to an exchange that routes a kept message nowhere: 541 and no binding; with no
    kept message the same binding is made."""
    conn = ctx.connect()
    ch = ctx.confirm_channel(conn)
    x, fan, empty = ctx.exchange("rh"), ctx.exchange("fan"), ctx.exchange("empty")
    q = ctx.queue("q")
    ch.exchange_declare(x, "x-recent-history")
    ch.exchange_declare(fan, "fanout")
    ch.exchange_declare(empty, "x-recent-history")
    ch.queue_declare(q)
    _publish(ch, x, "k", "kept")
    refused = attempt(lambda: ch.exchange_bind(fan, x, "e"))
    ch = ctx.confirm_channel(ctx.connect())
    ch.queue_bind(q, fan, "")
    _publish(ch, x, "k", "after")  # reaches q only if the refused binding was made
    made_without_history = attempt(lambda: ch.exchange_bind(fan, empty, "e"))
    _publish(ch, empty, "k", "via-empty")
    return {"refused": refused, "q": bodies(ch, q), "made_without_history": made_without_history}


@needs(RECENT_HISTORY)
def scenario_recent_history_routes_as_fanout(ctx: Ctx) -> Any:
    ch = ctx.confirm_channel(ctx.connect())
    x, q1, q2 = ctx.exchange("rh"), ctx.queue("q1"), ctx.queue("q2")
    ch.exchange_declare(x, "x-recent-history", arguments={"x-recent-history-length": 2})
    ch.queue_declare(q1)
    ch.queue_declare(q2)
    returned = _mandatory(ch, x, "unroutable")
    ch.queue_bind(q1, x, "one")
    ch.queue_bind(q2, x, "two")
    _publish(ch, x, "other", "both")
    return {"returned": returned, "q1": bodies(ch, q1), "q2": bodies(ch, q2)}


# ------------------------------------------------------------------------------------------------
# x-jms-topic
# ------------------------------------------------------------------------------------------------

BIND_CASES: dict[str, Any] = {
    "no_argument": None,
    "valid": '{ident, <<"a">>}.',
    "atom": "foo.",
    "no_dot": '{ident, <<"a">>}',
    "garbage": "garbage(",
    "two_terms": "1. 2.",
    "variable": "X.",
    "reserved_word": "{and, true, true}.",
    "comment_after": "true. % ok",
    "binary_type": b"true.",
    "integer_type": 5,
    "string_list_binary": '{\'in\', {ident, <<"a">>}, ["x", <<1,2>>, $c, 16#ff, -2, 1.5e3, [a|b]]}.',
    "empty": "",
}


@needs(JMS_TOPIC)
def scenario_jms_bind_arguments(ctx: Ctx) -> Any:
    x, q = ctx.exchange("jms"), ctx.queue("q")
    setup = ctx.channel()
    setup.exchange_declare(x, "x-jms-topic")
    setup.queue_declare(q)

    def bind(value: Any) -> Any:
        def run(ch: Any) -> Any:
            args = {} if value is None else {"rjms_erlang_selector": value}
            return ch.queue_bind(q, x, ctx.token("key"), arguments=args)

        return run

    return attempt_each(ctx, {label: bind(value) for label, value in BIND_CASES.items()})


SELECTORS: dict[str, str] = {
    "eq_string": '{\'=\', {ident, <<"colour">>}, <<"blue">>}.',
    "gt_number": "{'>', {ident, <<\"weight\">>}, 2500}.",
    "eq_float_int": "{'=', {ident, <<\"f\">>}, 2}.",
    "between": "{'between', {ident, <<\"weight\">>}, {range, 10, 2501}}.",
    "not_between": "{'not_between', {ident, <<\"weight\">>}, {range, 10, 2501}}.",
    "in": '{\'in\', {ident, <<"colour">>}, [<<"blue">>, <<"green">>]}.',
    "not_in": '{\'not_in\', {ident, <<"colour">>}, [<<"blue">>, <<"green">>]}.',
    "in_exact": "{'in', {ident, <<\"weight\">>}, [2501.0, 7]}.",
    "like4": '{\'like\', {ident, <<"colour">>}, <<"bl%">>, no_escape}.',
    "like3": '{\'like\', {ident, <<"colour">>}, {<<"bl%">>, no_escape}}.',
    "like_escape": '{\'like\', {ident, <<"colour">>}, <<"b!_u%">>, <<"!">>}.',
    "not_like": '{\'not_like\', {ident, <<"colour">>}, <<"_l%">>, no_escape}.',
    "is_null": "{'is_null', {ident, <<\"colour\">>}}.",
    "not_null": "{'not_null', {ident, <<\"colour\">>}}.",
    "not_unknown": "{'not', {ident, <<\"missing\">>}}.",
    "or_unknown": '{\'or\', {ident, <<"missing">>}, {ident, <<"flag">>}}.',
    "and_unknown": "{'and', {ident, <<\"missing\">>}, false}.",
    "arith": "{'=', {'+', {ident, <<\"weight\">>}, {'*', 2, 3}}, 2507}.",
    "divide": "{'=', {'/', {ident, <<\"weight\">>}, 0}, plus_infinity}.",
    "string_gt_number": "{'>', {ident, <<\"colour\">>}, 1000000}.",
    "bool_ident": '{ident, <<"flag">>}.',
    "negate": "{'<', {'-', {ident, <<\"weight\">>}}, 0}.",
    "literal_true": "true.",
    "unknown_op": "{'xor', true, true}.",
}

JMS_MESSAGES: list[dict[str, Any] | None] = [
    None,
    {"colour": "blue", "weight": 2501, "flag": True},
    {"colour": "green", "weight": 7, "flag": False, "f": Typed("double", 2.0)},
    {"colour": "b_ue", "weight": Typed("short", 9), "f": Typed("float", 2.5)},
    {"colour": "red", "weight": Typed("long", 2501), "flag": True, "f": 2},
    {"colour": "bluest", "weight": Typed("byte", -3)},
    {"weight": 0, "flag": True},
]


@needs(JMS_TOPIC)
def scenario_jms_selectors_route(ctx: Ctx) -> Any:
    """Which selectors take which messages (routing keys play no part)."""
    ch = ctx.confirm_channel(ctx.connect())
    x = ctx.exchange("jms")
    ch.exchange_declare(x, "x-jms-topic")
    queues = {}
    for label, term in SELECTORS.items():
        q = queues[label] = ctx.queue(label)
        ch.queue_declare(q)
        ch.queue_bind(q, x, "only.this.key", arguments=_selector(term))
    for i, headers in enumerate(JMS_MESSAGES):
        _publish(ch, x, f"other.key.{i}", str(i), headers)
    return {label: bodies(ch, q) for label, q in queues.items()}


@needs(JMS_TOPIC)
def scenario_jms_evaluation_crashes(ctx: Ctx) -> Any:
    """An evaluation Erlang cannot do closes the publisher's connection with 541; a header of a type
    the plugin does not read fails only when a selector reads it."""
    setup = ctx.channel()
    x, q = ctx.exchange("jms"), ctx.queue("q")
    setup.exchange_declare(x, "x-jms-topic")
    setup.queue_declare(q)
    setup.queue_bind(q, x, "k", arguments=_selector("{'=', {'+', {ident, <<\"a\">>}, 1}, 2}."))
    setup.queue_bind(q, x, "k2", arguments=_selector('{\'like\', {ident, <<"b">>}, <<"%">>, no_escape}.'))
    cases = {
        "adds_one": {"a": 1},
        "string_plus_one": {"a": "s"},
        "timestamp_unread": {"a": 1, "t": datetime.datetime(2020, 1, 1, tzinfo=datetime.UTC)},
        "timestamp_read": {"a": datetime.datetime(2020, 1, 1, tzinfo=datetime.UTC)},
        "unsigned_read": {"a": Typed("unsignedint", 1)},
        "like_on_number": {"b": 5},
        "like_on_string": {"b": "x"},
        "float_overflow": {"a": Typed("double", 1.7e308)},
    }

    def publish(headers: dict[str, Any]) -> Any:
        def run(ch: Any) -> Any:
            ch.confirm_delivery()
            _publish(ch, x, "k", "m", headers)
            return ch.queue_purge(q).method.message_count

        return run

    return attempt_each(ctx, {label: publish(h) for label, h in cases.items()}, observe=lambda r: r)


@needs(JMS_TOPIC)
def scenario_jms_same_key_and_destination(ctx: Ctx) -> Any:
    """The plugin keeps one selector per (key, destination): the later one wins, and unbinding
    either forgets it."""
    ch = ctx.confirm_channel(ctx.connect())
    x, q = ctx.exchange("jms"), ctx.queue("q")
    ch.exchange_declare(x, "x-jms-topic")
    ch.queue_declare(q)
    ch.queue_bind(q, x, "k", arguments=_selector('{ident, <<"a">>}.'))
    ch.queue_bind(q, x, "k", arguments=_selector('{ident, <<"b">>}.'))
    _publish(ch, x, "k", "a", {"a": True})
    _publish(ch, x, "k", "b", {"b": True})
    both = bodies(ch, q)
    ch.queue_unbind(q, x, "k", arguments=_selector('{ident, <<"a">>}.'))
    _publish(ch, x, "k", "a2", {"a": True})
    _publish(ch, x, "k", "b2", {"b": True})
    return {"both_bound": both, "after_unbinding_first": bodies(ch, q)}


# ------------------------------------------------------------------------------------------------
# a type no enabled plugin registers
# ------------------------------------------------------------------------------------------------

UNKNOWN_TYPE = "x-hb-xtypes-unknown"


@registry.scenario
def scenario_unknown_type(ctx: Ctx) -> Any:
    """What a node answers for a type it does not know: a disabled plugin's type answers the same
    (tests/integration/test_xtypes_broker.py)."""
    x = ctx.exchange("x")
    return attempt(lambda: ctx.channel().exchange_declare(x, UNKNOWN_TYPE))


# ------------------------------------------------------------------------------------------------
# the drivers
# ------------------------------------------------------------------------------------------------


def recorded() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(RECORDING.read_text())
    return data


@pytest.fixture(scope="module")
def xtypes_url() -> Any:
    with xtypes_broker() as b:
        yield b.url


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", list(registry.scenarios))
def test_hashbroker_matches_recording(name: str, xtypes_url: str) -> None:
    assert_same_observation(name, registry.run(name, xtypes_url), recorded()[name])


def _live_params() -> list[Any]:
    return [
        pytest.param(
            name,
            id=name,
            marks=[
                pytest.mark.live,
                *([pytest.mark.rabbitmq_plugins(PLUGIN[name])] if name in PLUGIN else []),
            ],
        )
        for name in registry.scenarios
    ]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", _live_params())
def test_rabbitmq_still_matches_recording(name: str, rabbitmq_url: str) -> None:
    """The recording is what the live plugin does now (a stale recording fails here)."""
    assert_same_observation(name, registry.run(name, rabbitmq_url), recorded()[name])


def record(url: str) -> None:
    """Run every scenario on the RabbitMQ at `url` and write the recording."""
    out = {name: registry.run(name, url) for name in registry.scenarios}
    RECORDING.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    record(sys.argv[1] if len(sys.argv) > 1 else "amqp://guest:guest@127.0.0.1:5672/%2F")
