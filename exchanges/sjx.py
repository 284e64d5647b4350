"""The JMS topic exchange's selector evaluator, as rabbitmq_jms_topic_exchange 3.10.8's `sjx_evaluator`.

A JMS client compiles its SQL-92 selector to an Erlang term (`{'and', {'=', {ident, <<"colour">>},
<<"blue">>}, {'>', {ident, <<"weight">>}, 2500}}`) and sends its text in the binding argument
`rjms_erlang_selector`; the plugin evaluates that term against the message's headers. This module
evaluates it the same way, clause for clause, on Erlang terms as `exchanges.erlang.terms` models
them, so whatever term a client sends gives the plugin's answer:

- three-valued logic: a missing header is `undefined` (SQL NULL), `not`/`and`/`or` follow SQL's
  truth tables, comparisons and arithmetic with `undefined` give `undefined`;
- comparisons use Erlang's `==`, `/=`, `<`... over *all* terms (a string is greater than any
  number, `1 == 1.0`), `in` uses exact matching (`=:=`: `1` is not in `[1.0]`);
- `like` turns the pattern into a regular expression (`%` -> `.*`, `_` -> `.`, an escape
  character) that must match the whole binary;
- an operator it does not know gives the atom `error`; only the result `true` selects.

Where the plugin's Erlang code itself fails (adding a string to a number, a header of a type it
does not read, a `like` on a number...), evaluation raises `SelectorCrash`: the plugin crashes
while routing, which closes the publisher's connection with 541 INTERNAL_ERROR.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

from amqpwire.fields import FieldTable
from exchanges.erlang.atom import FALSE, TRUE, UNDEFINED, Atom
from exchanges.erlang.terms import ImproperList, term_order_key
from exchanges.hashing.terms import field_value_term, key_bytes

ERROR = Atom("error")
PLUS_INFINITY = Atom("plus_infinity")
MINUS_INFINITY = Atom("minus_infinity")
NAN = Atom("nan")

_READ_TYPES = frozenset({"longstr", "signedint", "float", "double", "byte", "short", "long", "bool"})
"""The header types `lookup_value` reads; a selected header of any other type crashes it."""


class SelectorCrash(Exception):
    """The plugin's evaluation raises here (badarith, function_clause, case_clause, badarg...)."""


Headers = dict[bytes, Any]
"""The message's headers as `lookup_value` sees them: name -> the first entry's field."""


def headers_of(table: FieldTable | None) -> Headers:
    """`rabbit_misc:sort_field_table` then `lists:keyfind`: the first entry of each name."""
    out: Headers = {}
    if table is not None:
        for name, field in table:
            out.setdefault(key_bytes(name), field)
    return out


def _bool(value: bool) -> Atom:
    return TRUE if value else FALSE


def _is_number(term: Any) -> bool:
    return isinstance(term, int | float) and not isinstance(term, bool)


def erl_eq(left: Any, right: Any) -> bool:
    """Erlang `==`: numbers by value (`1 == 1.0`), everything else structurally."""
    if _is_number(left) and _is_number(right):
        return bool(left == right)
    if isinstance(left, tuple) and isinstance(right, tuple):
        return len(left) == len(right) and all(erl_eq(a, b) for a, b in zip(left, right, strict=True))
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(erl_eq(a, b) for a, b in zip(left, right, strict=True))
    if isinstance(left, ImproperList) and isinstance(right, ImproperList):
        return erl_eq(list(left.items), list(right.items)) and erl_eq(left.tail, right.tail)
    if type(left) is not type(right) and not (_is_number(left) or _is_number(right)):
        return False
    return bool(left == right) and not (_is_number(left) or _is_number(right))


def exact_eq(left: Any, right: Any) -> bool:
    """Erlang `=:=`: like `==` but an integer never equals a float."""
    if isinstance(left, tuple | list) and isinstance(right, tuple | list):
        return (
            type(left) is type(right)
            and len(left) == len(right)
            and all(exact_eq(a, b) for a, b in zip(left, right, strict=True))
        )
    if isinstance(left, ImproperList) and isinstance(right, ImproperList):
        return exact_eq(list(left.items), list(right.items)) and exact_eq(left.tail, right.tail)
    return type(left) is type(right) and bool(left == right)


def _key(term: Any) -> Any:
    if isinstance(term, ImproperList):  # approximately: as the list of its items and its tail
        return (9, (*(term_order_key(i) for i in term.items), term_order_key(term.tail)))
    try:
        return term_order_key(term)
    except TypeError:
        raise SelectorCrash(f"unordered term {term!r}") from None


def erl_lt(left: Any, right: Any) -> bool:
    """Erlang `<` in the standard term order (number < atom < tuple < list < binary)."""
    if _is_number(left) and _is_number(right):
        return bool(left < right)
    return bool(_key(left) < _key(right))


def _arith(op: str, left: Any, right: Any) -> Any:
    if not (_is_number(left) and _is_number(right)):
        raise SelectorCrash("badarith")
    try:
        if op == "+":
            result = left + right
        elif op == "-":
            result = left - right
        elif op == "*":
            result = left * right
        else:
            result = float(left) / float(right)
    except (OverflowError, ZeroDivisionError):
        raise SelectorCrash("badarith") from None
    if isinstance(result, float) and not math.isfinite(result):
        raise SelectorCrash("badarith")  # Erlang floats never overflow to infinity
    return result


def lookup_value(headers: Headers, ident: Any) -> Any:
    field = headers.get(ident) if isinstance(ident, bytes) else None
    if field is None:
        return UNDEFINED
    if field.type not in _READ_TYPES:
        raise SelectorCrash(f"case_clause {field.type}")
    return field_value_term(field)


def _val_of(term: Any, headers: Headers) -> Any:
    if isinstance(term, tuple) and len(term) == 2 and term[0] == Atom("ident"):
        return lookup_value(headers, term[1])
    return term


def _not3(value: Any) -> Any:
    if value == TRUE:
        return FALSE
    if value == FALSE:
        return TRUE
    return UNDEFINED


def _logic3(left: Any, right: Any, dominant: Atom) -> Any:
    """and3 (`dominant` false) and or3 (`dominant` true): the dominant value on either side wins,
    the other one on both sides gives it, anything else is undefined."""
    if left == dominant or right == dominant:
        return dominant
    other = FALSE if dominant == TRUE else TRUE
    return other if left == other and right == other else UNDEFINED


def _una_op(op: Any, value: Any) -> Any:
    if value == UNDEFINED:
        return UNDEFINED
    if op in (Atom("-"), Atom("+")):
        if not _is_number(value):
            raise SelectorCrash("badarith")
        return -value if op == Atom("-") else value
    return ERROR


def _is_in(left: Any, items: Any) -> bool:
    if isinstance(items, ImproperList):
        if any(exact_eq(left, item) for item in items.items):
            return True
        return _is_in(left, items.tail)
    if not isinstance(items, list):
        raise SelectorCrash("function_clause isIn")
    return any(exact_eq(left, item) for item in items)


_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "=": erl_eq,
    "<>": lambda a, b: not erl_eq(a, b),
    ">": lambda a, b: erl_lt(b, a),
    "<": erl_lt,
    ">=": lambda a, b: not erl_lt(a, b),
    "<=": lambda a, b: not erl_lt(b, a),
}


def _bin_op(op: Any, left: Any, right: Any) -> Any:
    if left == UNDEFINED or right == UNDEFINED:
        return UNDEFINED
    name = op.name if isinstance(op, Atom) else None
    if name in _COMPARE:
        return _bool(_COMPARE[name](left, right))
    if name == "in":
        return _bool(_is_in(left, right))
    if name == "not_in":
        return _bool(not _is_in(left, right))
    if name in ("+", "-", "*"):
        return _arith(name, left, right)
    if name == "/":
        if not erl_eq(right, 0):
            return _arith("/", left, right)
        if erl_lt(0, left):
            return PLUS_INFINITY
        if erl_lt(left, 0):
            return MINUS_INFINITY
        return NAN
    return ERROR


_ESCAPED = frozenset(".*+?^=!:${}()|[]/\\")


def _like_regex(pattern: bytes, escape: Any) -> re.Pattern[bytes] | None:
    """gen_re + compile_re: None where the plugin gets `error` (an escape that is no one byte)."""
    if isinstance(escape, bytes) and len(escape) == 1:
        esc: int | None = escape[0]
    elif escape == Atom("no_escape"):
        esc = None
    else:
        return None
    out = bytearray()
    i, n = 0, len(pattern)
    while i < n:
        ch = pattern[i]
        if esc is not None and ch == esc and i + 1 < n:
            nxt = pattern[i + 1]
            out += b"\\" + bytes([nxt]) if chr(nxt) in _ESCAPED else bytes([nxt])
            i += 2
            continue
        if ch == ord("_"):
            out += b"."
        elif ch == ord("%"):
            out += b".*"
        elif chr(ch) in _ESCAPED:
            out += b"\\" + bytes([ch])
        else:
            out.append(ch)
        i += 1
    return re.compile(bytes(out))


def _patt_match(value: Any, regex: Any) -> Any:
    """re:run(L, MP, [{capture, first}]) must match all of L from its start."""
    if not isinstance(value, bytes):
        raise SelectorCrash("badarg byte_size")
    if isinstance(regex, re.Pattern):
        compiled = regex
    elif isinstance(regex, bytes) or (isinstance(regex, list) and all(isinstance(c, int) for c in regex)):
        source = regex if isinstance(regex, bytes) else bytes(c & 255 for c in regex)
        try:
            compiled = re.compile(source)
        except re.error:
            raise SelectorCrash("badarg re:run") from None
    else:
        raise SelectorCrash("badarg re:run")
    found = compiled.search(value)
    return _bool(found is not None and found.span() == (0, len(value)))


def _is_like(value: Any, pattern: Any, escape: Any) -> Any:
    if value == UNDEFINED:
        return UNDEFINED
    if pattern == Atom("regex"):
        return _patt_match(value, escape)
    if not isinstance(pattern, bytes):
        raise SelectorCrash("badarg binary_to_list")
    return _patt_match(value, _like_regex(pattern, escape))


def _between(value: Any, low: Any, high: Any) -> Any:
    if UNDEFINED in (value, low, high):
        return UNDEFINED
    return _bool(not erl_lt(value, low) and not erl_lt(high, value))


_NOT, _IDENT, _IS_NULL, _NOT_NULL = Atom("not"), Atom("ident"), Atom("is_null"), Atom("not_null")
_AND, _OR, _LIKE, _NOT_LIKE = Atom("and"), Atom("or"), Atom("like"), Atom("not_like")
_BETWEEN, _NOT_BETWEEN, _RANGE = Atom("between"), Atom("not_between"), Atom("range")


def evaluate(term: Any, headers: Headers) -> Any:
    """sjx_evaluator:evaluate/2, clause by clause: `true`, `false`, `undefined`, `error` or any
    other term (an arithmetic value, a literal); raises SelectorCrash where the plugin crashes."""
    if not isinstance(term, tuple):
        return term
    size = len(term)
    if size == 2:
        op, exp = term
        if op == _NOT:
            return _not3(evaluate(exp, headers))
        if op == _IDENT:
            return lookup_value(headers, exp)
        if op == _IS_NULL:
            return _bool(exact_eq(_val_of(exp, headers), UNDEFINED))
        if op == _NOT_NULL:
            return _bool(not exact_eq(_val_of(exp, headers), UNDEFINED))
        return _una_op(op, evaluate(exp, headers))
    if size == 3:
        op, left, right = term
        if op == _AND:
            return _logic3(evaluate(left, headers), evaluate(right, headers), FALSE)
        if op == _OR:
            return _logic3(evaluate(left, headers), evaluate(right, headers), TRUE)
        if isinstance(right, tuple) and len(right) == 3 and right[0] == _RANGE:
            return evaluate((op, left, right[1], right[2]), headers)
        return _bin_op(op, evaluate(left, headers), evaluate(right, headers))
    if size == 4:
        op, left, a, b = term
        if op == _LIKE:
            return _is_like(_val_of(left, headers), a, b)
        if op == _NOT_LIKE:
            return _not3(_is_like(_val_of(left, headers), a, b))
        if op == _BETWEEN:
            return _between(evaluate(left, headers), evaluate(a, headers), evaluate(b, headers))
        if op == _NOT_BETWEEN:
            return _not3(_between(evaluate(left, headers), evaluate(a, headers), evaluate(b, headers)))
    return term


def selects(term: Any, headers: Headers) -> bool:
    """selector_match: only the result `true` selects."""
    return bool(evaluate(term, headers) == TRUE)
