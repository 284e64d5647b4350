"""The headers exchange against a port of RabbitMQ's merge algorithm and against a live RabbitMQ 3.10.8.

`oracle_match` follows `rabbit_exchange_type_headers:headers_match/5` clause by clause (both tables
stable-sorted by name, then merged) with an equality written in terms of type classes, whereas the
exchange pairs entries by occurrence and compares decoded Erlang terms; the two must agree. The
live tests then send the same typed tables to RabbitMQ (pika cannot produce most wire types, so its
table encoder is taught to write a `FieldTable` verbatim).
"""

from __future__ import annotations

import ast
import itertools
import random
import shutil
import struct
import subprocess
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pika
import pika.data
import pika.exceptions
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from amqpwire.errors import AmqpError
from amqpwire.fields import Field, FieldTable
from exchanges.base import Binding, Destination, SimpleMessage
from exchanges.erlang.format import erlang_float, format_term
from exchanges.registry import get_type
from exchanges.types.header_terms import erlang_term
from exchanges.types.headers import HeadersExchange

INT_TYPES = {
    "byte",
    "unsignedbyte",
    "short",
    "unsignedshort",
    "signedint",
    "unsignedint",
    "long",
    "timestamp",
}
NUMERIC_TYPES = INT_TYPES | {"float", "double"}


def S(text: str) -> Field:
    return Field("longstr", text.encode())


def I(value: int) -> Field:  # noqa: E743 - reads like the AMQP type tag
    return Field("signedint", value)


VOID = Field("void", None)


def table(*entries: tuple[str, Field]) -> FieldTable:
    return FieldTable(entries)


# --- oracle ---------------------------------------------------------------------------------------


def oracle_equal(pattern: Field, data: Field) -> bool:
    """Erlang `==` on two decoded field values, phrased as type classes rather than terms."""
    if pattern.type in NUMERIC_TYPES or data.type in NUMERIC_TYPES:
        return pattern.type in NUMERIC_TYPES and data.type in NUMERIC_TYPES and pattern.value == data.value
    if {pattern.type, data.type} <= {"longstr", "binary"}:
        return bytes(pattern.value) == bytes(data.value)
    if {pattern.type, data.type} == {"array", "table"}:
        return len(pattern.value) == 0 and len(data.value) == 0  # both are the empty list
    return pattern.type == data.type and pattern.value == data.value


def oracle_match(arguments: FieldTable, headers: FieldTable | None) -> bool:
    """`headers_match/5`, one loop iteration per clause it would take."""

    def name(entry: tuple[str, Field]) -> bytes:
        return entry[0].encode()

    pattern = sorted(arguments, key=name)  # rabbit_misc:sort_field_table is a stable keysort
    data = sorted(headers or (), key=name)
    x_match = arguments.get("x-match")
    kinds = {b"all": "all", b"any": "any", b"all-with-x": "all_with_x", b"any-with-x": "any_with_x"}
    kind = kinds.get(bytes(x_match.value), "all") if x_match and x_match.type == "longstr" else "all"
    all_kind = kind in ("all", "all_with_x")
    with_x = kind in ("all_with_x", "any_with_x")
    all_match, any_match, p, d = True, False, 0, 0
    while True:
        if all_kind and not all_match:
            return False
        if not all_kind and any_match:
            return True
        if p == len(pattern):
            return all_match if all_kind else any_match
        key, value = pattern[p]
        if key == "x-match" or (key.startswith("x-") and not with_x):
            p += 1
        elif d == len(data):
            all_match, p = False, len(pattern)
        elif name(pattern[p]) > name(data[d]):
            d += 1
        elif name(pattern[p]) < name(data[d]):
            all_match, p = False, p + 1
        else:
            if value.type == "void" or oracle_equal(value, data[d][1]):
                any_match = True
            else:
                all_match = False
            p, d = p + 1, d + 1


def exchange_with(arguments: Sequence[FieldTable]) -> HeadersExchange:
    exchange = HeadersExchange()
    for index, args in enumerate(arguments):
        exchange.add_binding(Binding(Destination.queue(str(index)), "", args))
    return exchange


def matched(exchange: HeadersExchange, headers: FieldTable | None) -> set[int]:
    return {int(d.name) for d in exchange.route(SimpleMessage([""], headers))}


# --- unit tests: behaviour observed on the live RabbitMQ 3.10.8 ---------------------------------------------

# Values that RabbitMQ matched against each other when one was the binding argument "h" and the
# other the header "h" (every pair was tried both ways; each group matched only within itself).
OBSERVED_EQUAL_GROUPS: list[list[Field]] = [
    [Field(t, 5) for t in sorted(INT_TYPES)] + [Field("float", 5.0), Field("double", 5.0)],
    [S("5"), Field("binary", b"5")],
    [Field("decimal", (1, 50))],
    [Field("decimal", (0, 5))],
    [Field("bool", True)],
    [Field("array", (I(5),))],
    [Field("array", (Field("long", 5),))],
    [Field("array", (Field("float", 5.0),))],
    [Field("array", (Field("double", 5.0),))],
    [Field("array", ()), Field("table", FieldTable())],
    [Field("table", table(("a", I(1)), ("b", I(2))))],
    [Field("table", table(("b", I(2)), ("a", I(1))))],
    [Field("signedint", 0), Field("double", -0.0)],
    [Field("long", 2**53 + 1)],
    [Field("double", float(2**53)), Field("long", 2**53)],
    [Field("bool", False)],
    [I(1), Field("double", 1.0)],
]


def test_typed_equality_is_erlang_equality_as_observed() -> None:
    values = [
        (group_index, value) for group_index, group in enumerate(OBSERVED_EQUAL_GROUPS) for value in group
    ]
    exchange = exchange_with([table(("h", value)) for _, value in values])
    for group_index, header in values:
        expected = {i for i, (group, _) in enumerate(values) if group == group_index}
        assert matched(exchange, table(("h", header))) == expected, header


def test_void_binding_argument_only_asks_for_presence() -> None:
    exchange = exchange_with([table(("h", VOID))])
    for value in itertools.chain.from_iterable(OBSERVED_EQUAL_GROUPS):
        assert matched(exchange, table(("h", value))) == {0}
    assert matched(exchange, table(("h", VOID))) == {0}  # observed: a void header is present too
    assert matched(exchange, table(("other", I(1)))) == set()


OBSERVED_BINDINGS = {
    "empty": table(),
    "all_only": table(("x-match", S("all"))),
    "any_only": table(("x-match", S("any"))),
    "allx_only": table(("x-match", S("all-with-x"))),
    "a1": table(("a", I(1))),
    "a1_any": table(("x-match", S("any")), ("a", I(1)), ("b", I(2))),
    "xf_all": table(("x-foo", S("bar"))),
    "xf_allx": table(("x-match", S("all-with-x")), ("x-foo", S("bar"))),
    "dup_a12": table(("a", I(1)), ("a", I(2))),
    "dup_a21": table(("a", I(2)), ("a", I(1))),
}
OBSERVED_ROUTES: dict[str, tuple[FieldTable | None, set[str]]] = {
    "no headers": (None, {"empty", "all_only", "allx_only", "xf_all"}),
    "empty headers": (table(), {"empty", "all_only", "allx_only", "xf_all"}),
    "a=1": (table(("a", I(1))), {"empty", "all_only", "allx_only", "xf_all", "a1", "a1_any"}),
    "x-foo": (table(("x-foo", S("bar"))), {"empty", "all_only", "allx_only", "xf_all", "xf_allx"}),
    "a=1,a=2": (
        table(("a", I(1)), ("a", I(2))),
        {"empty", "all_only", "allx_only", "xf_all", "a1", "a1_any", "dup_a12"},
    ),
    "a=2,a=1": (table(("a", I(2)), ("a", I(1))), {"empty", "all_only", "allx_only", "xf_all", "dup_a21"}),
}


@pytest.mark.parametrize("case", sorted(OBSERVED_ROUTES))
def test_modes_x_arguments_and_duplicates_route_as_observed(case: str) -> None:
    names = list(OBSERVED_BINDINGS)
    exchange = exchange_with([OBSERVED_BINDINGS[n] for n in names])
    headers, expected = OBSERVED_ROUTES[case]
    assert {names[i] for i in matched(exchange, headers)} == expected
    assert {n for n in names if oracle_match(OBSERVED_BINDINGS[n], headers)} == expected


@pytest.mark.parametrize("mode", ["all", "any", "all-with-x", "any-with-x"])
def test_accepted_x_match_values(mode: str) -> None:
    HeadersExchange().validate_binding(Binding(Destination.queue("q"), "", table(("x-match", S(mode)))))


# Reply texts RabbitMQ 3.10.8 sent (channel.close 406) for queue.bind with these x-match values.
OBSERVED_ERRORS: list[tuple[Field, str]] = [
    (S("foo"), 'Invalid x-match field value <<"foo">>; expected all, any, all-with-x, or any-with-x'),
    (S(""), "Invalid x-match field value <<>>; expected all, any, all-with-x, or any-with-x"),
    (S("€"), "Invalid x-match field value <<226,130,172>>; expected all, any, all-with-x, or any-with-x"),
    (I(5), "Invalid x-match field type signedint (value 5); expected longstr"),
    (Field("bool", True), "Invalid x-match field type bool (value true); expected longstr"),
    (VOID, "Invalid x-match field type void (value undefined); expected longstr"),
    (Field("double", 1e20), "Invalid x-match field type double (value 1.0e20); expected longstr"),
    (Field("decimal", (1, 50)), "Invalid x-match field type decimal (value {1,50}); expected longstr"),
    (
        Field("table", table(("a", I(1)), ("b", VOID))),
        'Invalid x-match field type table (value [{<<"a">>,signedint,1},\n'
        + " " * 41
        + '{<<"b">>,void,undefined}]); expected longstr',
    ),
]


@pytest.mark.parametrize(("value", "text"), OBSERVED_ERRORS)
def test_invalid_x_match_is_refused_with_rabbitmq_text(value: Field, text: str) -> None:
    binding = Binding(Destination.queue("q"), "", table(("x-match", value)))
    with pytest.raises(AmqpError) as caught:
        HeadersExchange().validate_binding(binding)
    assert (caught.value.reply_code, caught.value.explanation) == (406, text)
    assert caught.value.reply_text == f"PRECONDITION_FAILED - {text}"


def test_only_the_first_x_match_is_validated_and_used() -> None:
    args = table(("x-match", S("any")), ("x-match", S("bogus")), ("a", I(1)), ("b", I(7)))
    HeadersExchange().validate_binding(Binding(Destination.queue("q"), "", args))  # observed: accepted
    exchange = exchange_with([args])
    assert matched(exchange, table(("b", I(7)))) == {0}  # observed: "any" applies


def test_registered_as_headers() -> None:
    assert get_type("headers") is HeadersExchange


def test_unbinding_forgets_everything() -> None:
    tables = random_binding_tables(random.Random(5), 40)
    bindings = list(
        dict.fromkeys(Binding(Destination.queue(f"q{i % 3}"), "", t) for i, t in enumerate(tables))
    )
    exchange = HeadersExchange()
    for binding in bindings:
        exchange.add_binding(binding)
    exchange.remove_bindings(bindings[:20])
    assert exchange.bindings == bindings[20:]
    exchange.remove_bindings([*bindings[20:], bindings[0]])
    assert exchange.bindings == [] and exchange.state_summary == {"bindings": 0, "index_keys": 0}
    assert exchange.route(SimpleMessage([""], None)) == []


def test_destination_listed_once_in_first_seen_order() -> None:
    exchange = HeadersExchange()
    exchange.add_binding(Binding(Destination.queue("b"), "", table(("a", I(1)))))
    exchange.add_binding(Binding(Destination.queue("a"), "", table()))
    exchange.add_binding(Binding(Destination.queue("b"), "", table(("x-match", S("any")), ("a", VOID))))
    assert exchange.route(SimpleMessage([""], table(("a", I(1))))) == [
        Destination.queue("a"),
        Destination.queue("b"),
    ]


# --- property tests ---------------------------------------------------------------------------------

VALUE_POOL: list[Field] = [
    *itertools.chain.from_iterable(OBSERVED_EQUAL_GROUPS),
    VOID,
    S("ü"),
    Field("short", -3),
    Field("double", -3.0),
    Field("unsignedint", 4_000_000_000),
    Field("double", 4e9),
    Field("array", (S("x"), Field("array", ()))),
]
NAMES = ["a", "b", "x-foo", "x-match", "ä"]
MODES = ["all", "any", "all-with-x", "any-with-x"]


def random_binding_tables(rng: random.Random, count: int) -> list[FieldTable]:
    out = []
    for _ in range(count):
        entries = [
            (rng.choice(NAMES[:3] + NAMES[4:]), rng.choice(VALUE_POOL)) for _ in range(rng.randint(0, 3))
        ]
        if rng.random() < 0.8:
            entries.insert(rng.randint(0, len(entries)), ("x-match", S(rng.choice(MODES))))
        out.append(FieldTable(entries))
    return out


def random_header_tables(rng: random.Random, count: int) -> list[FieldTable | None]:
    out: list[FieldTable | None] = []
    for _ in range(count):
        if rng.random() < 0.1:
            out.append(None)
            continue
        out.append(FieldTable((rng.choice(NAMES), rng.choice(VALUE_POOL)) for _ in range(rng.randint(0, 4))))
    return out


FIELDS = st.sampled_from(VALUE_POOL)
BINDING_ENTRIES = st.tuples(st.sampled_from(NAMES), FIELDS) | st.tuples(
    st.just("x-match"), st.sampled_from(MODES).map(S)
)
HEADER_TABLES = st.none() | st.lists(st.tuples(st.sampled_from(NAMES), FIELDS), max_size=5).map(FieldTable)


@settings(max_examples=400, deadline=None)
@given(
    bindings=st.lists(st.lists(BINDING_ENTRIES, max_size=5).map(FieldTable), max_size=8),
    messages=st.lists(HEADER_TABLES, min_size=1, max_size=4),
)
def test_routes_like_the_merge_algorithm(
    bindings: list[FieldTable], messages: list[FieldTable | None]
) -> None:
    exchange = exchange_with(bindings)
    for headers in messages:
        assert matched(exchange, headers) == {
            i for i, args in enumerate(bindings) if oracle_match(args, headers)
        }


@settings(max_examples=100, deadline=None)
@given(
    bindings=st.lists(st.lists(BINDING_ENTRIES, max_size=4).map(FieldTable), min_size=1, max_size=10),
    removed=st.sets(st.integers(0, 9)),
    headers=HEADER_TABLES,
)
def test_routes_like_the_merge_algorithm_after_unbinding(
    bindings: list[FieldTable], removed: set[int], headers: FieldTable | None
) -> None:
    exchange = exchange_with(bindings)
    exchange.remove_bindings(
        [Binding(Destination.queue(str(i)), "", args) for i, args in enumerate(bindings) if i in removed]
    )
    expected = {i for i, args in enumerate(bindings) if i not in removed and oracle_match(args, headers)}
    assert matched(exchange, headers) == expected


# --- Erlang formatting against a local `erl`, when one is installed -----------------------------------------


def _erlang_source(term: Any) -> str:
    if isinstance(term, bytes):
        return "<<" + ",".join(map(str, term)) + ">>"
    if isinstance(term, float):
        return "<<" + ",".join(map(str, struct.pack(">d", term))) + ">>"  # decoded on the Erlang side
    if isinstance(term, tuple):
        return "{" + ",".join(map(_erlang_source, term)) + "}"
    if isinstance(term, list):
        return "[" + ",".join(map(_erlang_source, term)) + "]"
    return getattr(term, "name", None) or str(term)


ESCRIPT = """#!/usr/bin/env escript
show(Fmt, X) ->
    Text = list_to_binary(io_lib:format(Fmt, [X])),
    io:format("~w~n", [binary_to_list(Text)]).

main([Terms, Floats]) ->
    {ok, Ts} = file:consult(Terms),
    {ok, Fs} = file:consult(Floats),
    [show("x ~p; y", T) || T <- Ts],
    [show("~p", F) || <<F/float>> <- Fs].
"""


@pytest.mark.skipif(shutil.which("escript") is None, reason="no Erlang installation to compare with")
def test_pretty_printing_matches_erlang_io_lib(tmp_path: Path) -> None:
    """`~p` wraps lists, tuples and non-printable binaries at 80 columns, so the text depends on
    the term's shape and on the column it starts at; compare many random shapes with `erl`."""
    rng = random.Random(11)
    values = [random_field(rng) for _ in range(400)]
    values = [v for v in values if v.type not in ("float", "double")]
    floats = [rng.uniform(-1, 1) * 10 ** rng.randint(-30, 30) for _ in range(200)] + [1000.0, 0.0001, 2.0**53]
    (tmp_path / "terms").write_text("".join(f"{_erlang_source(erlang_term(v))}.\n" for v in values))
    (tmp_path / "floats").write_text("".join(f"{_erlang_source(f)}.\n" for f in floats))
    script = tmp_path / "fmt.escript"
    script.write_text(ESCRIPT)
    lines = subprocess.run(
        ["escript", str(script), str(tmp_path / "terms"), str(tmp_path / "floats")],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.splitlines()
    assert len(lines) == len(values) + len(floats)
    for value, line in zip(values, lines, strict=False):
        expected = bytes(ast.literal_eval(line))
        ours = ("x " + format_term(erlang_term(value), column=3) + "; y").encode("utf-8", "surrogateescape")
        assert ours == expected, value
    for number, line in zip(floats, lines[len(values) :], strict=True):
        assert erlang_float(number) == bytes(ast.literal_eval(line)).decode(), number


def random_field(rng: random.Random, depth: int = 0) -> Field:
    roll = rng.random()
    if depth < 2 and roll < 0.25:
        return Field("array", tuple(random_field(rng, depth + 1) for _ in range(rng.randint(0, 7))))
    if depth < 2 and roll < 0.4:
        entries = (
            (rng.choice(["a", "key", "ü"]), random_field(rng, depth + 1)) for _ in range(rng.randint(0, 5))
        )
        return Field("table", FieldTable(entries))
    if roll < 0.6:
        size = rng.choice([0, 3, 12, 30, 60])
        return Field(rng.choice(["longstr", "binary"]), bytes(rng.randrange(256) for _ in range(size)))
    if roll < 0.7:
        return Field(
            "longstr", rng.choice([b"plain text", "ünïcödé".encode(), b'q"\\\n\x1b']) * rng.randint(1, 8)
        )
    if roll < 0.85:
        return Field(rng.choice(sorted(INT_TYPES)), rng.randint(-(2**40), 2**40))
    return rng.choice([Field("bool", True), VOID, Field("decimal", (2, 12345))])


# --- live differential tests against RabbitMQ 3.10.8 ----------------------------------------------------


@pytest.fixture
def typed_pika(monkeypatch: pytest.MonkeyPatch) -> None:
    """Let pika send a `FieldTable` as is, so every AMQP type (and duplicate names) reach RabbitMQ."""
    original = pika.data.encode_table

    def encode_table(pieces: list[bytes], value: Any) -> int:
        if isinstance(value, FieldTable):
            body = value.encode()
            pieces.append(struct.pack(">I", len(body)))
            pieces.append(body)
            return 4 + len(body)
        return original(pieces, value)

    monkeypatch.setattr(pika.data, "encode_table", encode_table)


@contextmanager
def live_headers_exchange(
    url: str,
) -> Iterator[tuple[pika.adapters.blocking_connection.BlockingChannel, str]]:
    connection = pika.BlockingConnection(pika.URLParameters(url))
    exchange = f"hb.headers.{uuid.uuid4().hex[:10]}"
    try:
        channel = connection.channel()
        channel.exchange_declare(exchange, "headers")
        yield channel, exchange
    finally:
        if connection.is_open:
            connection.channel().exchange_delete(exchange)
            connection.close()


def live_route(
    url: str, bindings: Sequence[FieldTable], messages: Sequence[FieldTable | None]
) -> list[set[int]]:
    """Which bindings (by index, one exclusive queue each) received each message on RabbitMQ."""
    with live_headers_exchange(url) as (channel, exchange):
        for index, args in enumerate(bindings):
            channel.queue_declare(f"{exchange}.{index}", exclusive=True)
            channel.queue_bind(f"{exchange}.{index}", exchange, "", arguments=args)
        channel.confirm_delivery()
        for number, headers in enumerate(messages):
            props = pika.BasicProperties(message_id=str(number), headers=headers)
            channel.basic_publish(exchange, "", b"", props)
        received: list[set[int]] = [set() for _ in messages]
        for index in range(len(bindings)):
            while True:
                method, props, _ = channel.basic_get(f"{exchange}.{index}", auto_ack=True)
                if method is None:
                    break
                received[int(props.message_id)].add(index)
    return received


@pytest.mark.live
@pytest.mark.usefixtures("typed_pika")
@pytest.mark.parametrize("seed", [1, 2])
def test_routes_like_live_rabbitmq(rabbitmq_url: str, seed: int) -> None:
    rng = random.Random(seed)
    bindings = [*OBSERVED_BINDINGS.values(), *random_binding_tables(rng, 50)]
    messages = [headers for headers, _ in OBSERVED_ROUTES.values()] + random_header_tables(rng, 120)
    expected = live_route(rabbitmq_url, bindings, messages)
    exchange = exchange_with(bindings)
    for headers, from_rabbit in zip(messages, expected, strict=True):
        assert matched(exchange, headers) == from_rabbit, headers
        assert {i for i, args in enumerate(bindings) if oracle_match(args, headers)} == from_rabbit, headers


@pytest.mark.live
@pytest.mark.usefixtures("typed_pika")
def test_equality_of_every_pair_like_live_rabbitmq(rabbitmq_url: str) -> None:
    values = list(dict.fromkeys(VALUE_POOL))
    bindings = [table(("h", value)) for value in values]
    messages: list[FieldTable | None] = [table(("h", value)) for value in values]
    expected = live_route(rabbitmq_url, bindings, messages)
    exchange = exchange_with(bindings)
    for headers, from_rabbit in zip(messages, expected, strict=True):
        assert matched(exchange, headers) == from_rabbit, headers


def wire_text(text: str | bytes) -> bytes:
    """pika hands over reply texts that are not UTF-8 as `str(bytes)`; get the bytes back."""
    if isinstance(text, bytes):
        return text
    if text.startswith(("b'", 'b"')):
        return bytes(ast.literal_eval(text))
    return text.encode()


def shortstr(text: str) -> bytes:
    """The reply text as RabbitMQ puts it in channel.close: over 255 bytes it keeps 252 and adds "..."."""
    raw = text.encode("utf-8", "surrogateescape")
    return raw if len(raw) <= 255 else raw[:252] + b"..."


BAD_X_MATCH: list[Field] = [
    S("foo"),
    S("ALL"),
    S("naïve"),
    S("€uro"),
    S('q"\\\n\x1b'),
    Field("longstr", b"\xff\xfe\x01"),
    S("x" * 100),
    Field("longstr", "日本語のテキスト".encode()),
    Field("binary", b"all"),
    I(5),
    Field("unsignedbyte", 200),
    Field("timestamp", 1_700_000_000),
    Field("float", 1.5),
    Field("double", 1000.0),
    Field("double", 1e-7),
    Field("decimal", (2, 12345)),
    Field("bool", False),
    VOID,
    Field("array", ()),
    Field("array", (I(5), S("ab"))),
    Field("array", tuple(S("abcdefgh") for _ in range(12))),
    Field("table", table(("a", I(1)), ("b", VOID))),
    Field("table", table(("key", Field("array", (Field("table", table(("deep", S("x" * 30)))),))))),
]


@pytest.mark.live
@pytest.mark.usefixtures("typed_pika")
def test_invalid_x_match_errors_like_live_rabbitmq(rabbitmq_url: str) -> None:
    with live_headers_exchange(rabbitmq_url) as (channel, exchange):
        connection = channel.connection
        queue = channel.queue_declare("", exclusive=True).method.queue
        for value in BAD_X_MATCH:
            args = table(("x-match", value))
            with pytest.raises(pika.exceptions.ChannelClosedByBroker) as caught:
                channel.queue_bind(queue, exchange, "", arguments=args)
            channel = connection.channel()
            with pytest.raises(AmqpError) as ours:
                HeadersExchange().validate_binding(Binding(Destination.queue(queue), "", args))
            assert ours.value.reply_code == caught.value.reply_code == 406
            assert shortstr(ours.value.reply_text) == wire_text(caught.value.reply_text), value
        for mode in MODES:  # and the accepted values really are accepted
            channel.queue_bind(queue, exchange, "", arguments={"x-match": mode})


def test_headers_nested_10000_deep_route_without_recursion() -> None:
    """RabbitMQ accepts a header table nested 10,000 deep; matching on it must not crash."""
    deep = FieldTable([("leaf", Field("longstr", b"x"))])
    for _ in range(10_000):
        deep = FieldTable([("k", Field("table", deep))])
    same = FieldTable.decode(deep.encode())
    ex = HeadersExchange()
    ex.add_binding(Binding(Destination.queue("q-deep"), "", table(("d", Field("table", deep)))))
    ex.add_binding(
        Binding(Destination.queue("q-any"), "", table(("x-match", S("any")), ("d", Field("void", None))))
    )
    ex.add_binding(Binding(Destination.queue("q-other"), "", table(("d", S("x")))))
    routed = ex.route(SimpleMessage([""], FieldTable([("d", Field("table", same))])))
    assert sorted(d.name for d in routed) == ["q-any", "q-deep"]
    term = erlang_term(Field("table", same))
    for _ in range(10_000):
        assert isinstance(term, list) and len(term) == 1
        term = term[0][2]
    assert isinstance(term, list) and term[0][0] == b"leaf" and term[0][2] == b"x"
