"""The three plugin types in the routing library, without a broker: the Erlang term reader, the
selector evaluator's Erlang semantics, x-random's shares and x-recent-history's keeping."""

from __future__ import annotations

import pytest

import exchanges
from amqpwire.errors import AmqpError
from amqpwire.fields import Field, FieldTable
from exchanges.base import Binding, Destination, SimpleMessage
from exchanges.erlang.atom import FALSE, TRUE, UNDEFINED, Atom
from exchanges.erlang.parse import TermSyntaxError, parse_term
from exchanges.erlang.terms import ImproperList
from exchanges.sjx import SelectorCrash, evaluate, headers_of
from exchanges.types.random import RandomExchange


@pytest.mark.parametrize(
    ("text", "term"),
    [
        ('{ident, <<"a">>}.', (Atom("ident"), b"a")),
        ("'and'.", Atom("and")),
        ("[1, -2, 3.5e1 | t].", ImproperList((1, -2, 35.0), Atom("t"))),
        ('"ab" "c".', [97, 98, 99]),
        ('<<"a", 256, -1, $b>>.', b"a\x00\xffb"),
        ("<<1:8, 258:16, -1:8>>.", b"\x01\x01\x02\xff"),
        ("1_000.", 1000),
        ("$\\n. % comment", 10),
        ("(foo).", Atom("foo")),
        ('<<"\\x{41}\\101">>.', b"AA"),
    ],
)
def test_erlang_terms(text: str, term: object) -> None:
    if term is None:
        with pytest.raises(TermSyntaxError):
            parse_term(text)
    else:
        assert parse_term(text) == term


@pytest.mark.parametrize(
    "text", ["X.", "and.", "1. 2.", "{a", "foo", "1.e5.", "16#ff + 0.", "'it''s'.", "- - 1."]
)
def test_what_parse_term_refuses(text: str) -> None:
    with pytest.raises(TermSyntaxError):
        parse_term(text)


HEADERS = headers_of(
    FieldTable(
        [
            ("s", Field("longstr", b"blue")),
            ("i", Field("signedint", 2)),
            ("f", Field("double", 2.0)),
            ("b", Field("bool", True)),
            ("t", Field("timestamp", 5)),
            ("s", Field("longstr", b"second entry is not read")),
        ]
    )
)


@pytest.mark.parametrize(
    ("selector", "result"),
    [
        ('{\'=\', {ident, <<"i">>}, {ident, <<"f">>}}.', TRUE),  # 2 == 2.0
        ("{'in', {ident, <<\"i\">>}, [2.0]}.", FALSE),  # =:= in lists
        ("{'>', {ident, <<\"s\">>}, 99999}.", TRUE),  # a binary sorts after every number
        ("{'<', true, <<\"a\">>}.", TRUE),  # atom < binary
        ('{\'=\', {ident, <<"s">>}, <<"blue">>}.', TRUE),
        ("{'=', {ident, <<\"none\">>}, 1}.", UNDEFINED),
        ("{'and', {ident, <<\"none\">>}, false}.", FALSE),
        ("{'or', {ident, <<\"none\">>}, true}.", TRUE),
        ("{'not', {ident, <<\"none\">>}}.", UNDEFINED),
        ("{'/', 1, 0}.", Atom("plus_infinity")),
        ("{'/', 0, 0.0}.", Atom("nan")),
        ("{'/', 3, 2}.", 1.5),
        ('{\'like\', {ident, <<"s">>}, <<"b!_%">>, <<"!">>}.', FALSE),
        ('{\'like\', {ident, <<"s">>}, <<"_l%">>, no_escape}.', TRUE),
        ('{\'like\', {ident, <<"s">>}, {<<"%">>, no_escape}}.', Atom("error")),  # 3-tuple form
        ("{'between', 2, {range, 1, 2}}.", TRUE),
        ("{'is_null', {'+', 1, 2}}.", FALSE),
        ("{'xor', 1, 2}.", Atom("error")),
        ('{ident, <<"b">>}.', TRUE),
    ],
)
def test_evaluation(selector: str, result: object) -> None:
    assert evaluate(parse_term(selector), HEADERS) == result


@pytest.mark.parametrize(
    "selector",
    [
        "{'+', {ident, <<\"s\">>}, 1}.",
        '{ident, <<"t">>}.',  # a timestamp header: the plugin reads no such type
        "{'like', 5, <<\"%\">>, no_escape}.",
        '{\'like\', {ident, <<"s">>}, <<"%">>, <<"ab">>}.',
        "{'in', 1, <<\"no list\">>}.",
        "{'*', 1.0e300, 1.0e300}.",
        "{'-', <<\"a\">>}.",
    ],
)
def test_evaluation_crashes(selector: str) -> None:
    with pytest.raises(SelectorCrash):
        evaluate(parse_term(selector), HEADERS)


def test_a_crash_while_routing_is_a_541() -> None:
    bindings = [("q", "k", {"rjms_erlang_selector": "{'+', {ident, <<\"a\">>}, 1}."})]
    with pytest.raises(AmqpError) as err:
        exchanges.predict("x-jms-topic", bindings, ["k"], headers={"a": "text"})
    assert (err.value.reply_code, err.value.hard) == (541, True)


def test_random_picks_each_binding_equally_and_repeatably() -> None:
    x = RandomExchange()
    for key in ("1", "2", "3"):
        x.add_binding(Binding(Destination.queue("a"), key))
    x.add_binding(Binding(Destination.queue("b"), "z"))
    x.seed(7)
    picks = [x.route(SimpleMessage(["k"]))[0].name for _ in range(4000)]
    x.seed(7)
    assert [x.route(SimpleMessage(["k"]))[0].name for _ in range(4000)] == picks
    share = picks.count("a") / len(picks)
    assert 0.7 < share < 0.8  # 3 of 4 bindings


def test_recent_history_keeps_the_newest_and_skips_no_store() -> None:
    x = exchanges.create_exchange("x-recent-history", {"x-recent-history-length": 2})
    messages = [SimpleMessage([str(i)]) for i in range(4)]
    messages[3].header_table = FieldTable.from_python({"x-recent-history-no-store": True})
    for m in messages:
        assert x.route(m) == []
    queue, exchange = Binding(Destination.queue("q")), Binding(Destination.exchange("e"))
    assert x.bound(queue) == [messages[1], messages[2]]  # oldest first into a queue
    assert x.bound(exchange) == [messages[2], messages[1]]  # newest first through an exchange
