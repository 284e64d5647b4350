"""Erlang term text to terms, as `erl_scan:string/1` then `erl_parse:parse_term/1` read it.

RabbitMQ plugins that take an Erlang term inside an AMQP argument (the JMS topic exchange's
compiled selector) decode it this way; text either of them refuses raises `TermSyntaxError` (the
plugin's `{ok, _} = ...` match then crashes). Covered: atoms (plain and quoted), integers (with
`_` separators and `Base#digits`), floats, `$c` characters, strings (adjacent ones joined),
binaries of string and integer segments (`V:Size` in whole bytes), tuples, proper and improper
lists, parentheses and a sign before a number, `%` comments. Maps, records, bit syntax with types
or sizes that are no whole bytes, and every non-literal expression raise as unsupported, like the
variables and operators parse_term itself refuses.

Terms are Python values as `exchanges.erlang.terms` maps them: bytes (binary), int, float, Atom,
tuple, list (a string is a list of character codes), ImproperList.
"""

from __future__ import annotations

import math
import re
from typing import Any

from exchanges.erlang.atom import Atom
from exchanges.erlang.terms import ImproperList


class TermSyntaxError(ValueError):
    """The text is no single Erlang term followed by a dot (or uses syntax not covered here)."""


RESERVED = frozenset(
    [
        "after",
        "and",
        "andalso",
        "band",
        "begin",
        "bnot",
        "bor",
        "bsl",
        "bsr",
        "bxor",
        "case",
        "catch",
        "cond",
        "div",
        "end",
        "fun",
        "if",
        "let",
        "not",
        "of",
        "or",
        "orelse",
        "receive",
        "rem",
        "try",
        "when",
        "xor",
    ]
)
"""erl_scan's reserved words (OTP 24/25): keywords, never atoms unless quoted."""

_DIGITS = r"[0-9]+(?:_[0-9]+)*"
_FLOAT = re.compile(rf"{_DIGITS}\.{_DIGITS}(?:[eE][+-]?{_DIGITS})?")
_BASED = re.compile(rf"({_DIGITS})#([0-9a-zA-Z]+(?:_[0-9a-zA-Z]+)*)")
_INTEGER = re.compile(_DIGITS)
_SIMPLE_ESCAPES = {"b": 8, "d": 127, "e": 27, "f": 12, "n": 10, "r": 13, "s": 32, "t": 9, "v": 11}


def _white(c: str) -> bool:
    """erl_scan's white space: 0..32 and 128..160."""
    o = ord(c)
    return o <= 32 or 128 <= o <= 160


def _lower(c: str) -> bool:
    o = ord(c)
    return "a" <= c <= "z" or (223 <= o <= 255 and o != 247)


def _upper(c: str) -> bool:
    o = ord(c)
    return "A" <= c <= "Z" or c == "_" or (192 <= o <= 222 and o != 215)


def _name_char(c: str) -> bool:
    o = ord(c)
    return (c.isascii() and (c.isalnum() or c in "_@")) or (192 <= o <= 255 and o not in (215, 247))


def _escape(text: str, i: int) -> tuple[int, int]:
    """The character code of the escape sequence after the backslash at text[i - 1]; next index."""
    if i >= len(text):
        raise TermSyntaxError("unterminated escape")
    c = text[i]
    if c in "01234567":
        j = i
        while j < len(text) and j < i + 3 and text[j] in "01234567":
            j += 1
        return int(text[i:j], 8), j
    if c == "x":
        if i + 1 < len(text) and text[i + 1] == "{":
            end = text.find("}", i + 2)
            digits = text[i + 2 : end] if end > 0 else ""
            if not digits or not all(d in "0123456789abcdefABCDEF" for d in digits):
                raise TermSyntaxError("bad \\x{} escape")
            return int(digits, 16), end + 1
        digits = text[i + 1 : i + 3]
        if len(digits) != 2 or not all(d in "0123456789abcdefABCDEF" for d in digits):
            raise TermSyntaxError("bad \\x escape")
        return int(digits, 16), i + 3
    if c == "^":
        if i + 1 >= len(text):
            raise TermSyntaxError("unterminated escape")
        return ord(text[i + 1]) & 31, i + 2
    if c in _SIMPLE_ESCAPES:
        return _SIMPLE_ESCAPES[c], i + 1
    return ord(c), i + 1


def _quoted(text: str, i: int, quote: str) -> tuple[list[int], int]:
    """Codes of the quoted text starting after the opening quote at text[i - 1]; next index."""
    codes: list[int] = []
    while True:
        if i >= len(text):
            raise TermSyntaxError("unterminated quoted text")
        c = text[i]
        if c == quote:
            return codes, i + 1
        if c == "\\":
            code, i = _escape(text, i + 1)
            codes.append(code)
        else:
            codes.append(ord(c))
            i += 1


def _digits(text: str) -> str:
    return text.replace("_", "")


def tokenize(text: str) -> list[tuple[str, Any]]:
    """erl_scan's tokens: (kind, value) with kinds atom, var, reserved, integer, float, char,
    string, punct (value: the symbol) and dot."""
    tokens: list[tuple[str, Any]] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if _white(c):
            i += 1
        elif c == "%":
            while i < n and text[i] != "\n":
                i += 1
        elif c.isascii() and c.isdigit():
            m = _FLOAT.match(text, i)
            if m:
                value = float(_digits(m.group()))
                if math.isinf(value):
                    raise TermSyntaxError("float out of range")
                tokens.append(("float", value))
                i = m.end()
                continue
            m = _BASED.match(text, i)
            if m:
                base = int(_digits(m.group(1)))
                if not 2 <= base <= 36:
                    raise TermSyntaxError("illegal base")
                try:
                    tokens.append(("integer", int(_digits(m.group(2)), base)))
                except ValueError:
                    raise TermSyntaxError("illegal based integer") from None
                i = m.end()
                continue
            m = _INTEGER.match(text, i)
            assert m is not None
            tokens.append(("integer", int(_digits(m.group()))))
            i = m.end()
        elif _lower(c):
            j = i + 1
            while j < n and _name_char(text[j]):
                j += 1
            word = text[i:j]
            tokens.append(("reserved" if word in RESERVED else "atom", word))
            i = j
        elif _upper(c):
            j = i + 1
            while j < n and _name_char(text[j]):
                j += 1
            tokens.append(("var", text[i:j]))
            i = j
        elif c == "'":
            codes, i = _quoted(text, i + 1, "'")
            tokens.append(("atom", "".join(map(chr, codes))))
        elif c == '"':
            codes, i = _quoted(text, i + 1, '"')
            tokens.append(("string", codes))
        elif c == "$":
            if i + 1 >= n:
                raise TermSyntaxError("unterminated character")
            if text[i + 1] == "\\":
                code, i = _escape(text, i + 2)
            else:
                code, i = ord(text[i + 1]), i + 2
            tokens.append(("char", code))
        elif c == "." and (i + 1 == n or _white(text[i + 1]) or text[i + 1] == "%"):
            tokens.append(("dot", "."))
            i += 1
        elif text.startswith(("<<", ">>", "=<", ">=", "=:=", "=/=", "==", "/=", "->", "||", "++", "--"), i):
            sym = next(
                s
                for s in ("=:=", "=/=", "<<", ">>", "=<", ">=", "==", "/=", "->", "||", "++", "--")
                if text.startswith(s, i)
            )
            tokens.append(("punct", sym))
            i += len(sym)
        elif c in "{}[]()|,+-*/=<>#!:;?.":
            tokens.append(("punct", c))
            i += 1
        else:
            raise TermSyntaxError(f"illegal character {c!r}")
    return tokens


class _Parser:
    def __init__(self, tokens: list[tuple[str, Any]]) -> None:
        self.tokens = tokens
        self.pos = 0

    def peek(self) -> tuple[str, Any]:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else ("eof", None)

    def take(self) -> tuple[str, Any]:
        token = self.peek()
        self.pos += 1
        return token

    def expect(self, symbol: str) -> None:
        if self.take() != ("punct", symbol):
            raise TermSyntaxError(f"expected {symbol}")

    def term(self) -> Any:
        kind, value = self.take()
        if kind == "atom":
            return Atom(value)
        if kind in ("integer", "float"):
            return value
        if kind == "char":
            return value
        if kind == "string":
            codes = list(value)
            while self.peek()[0] == "string":
                codes += self.take()[1]
            return codes
        if kind == "punct":
            if value in ("-", "+"):
                sign = self.peek()
                if sign[0] in ("integer", "float", "char"):
                    self.take()
                    return -sign[1] if value == "-" else sign[1]
                raise TermSyntaxError("not a term")
            if value == "(":
                inner = self.term()
                self.expect(")")
                return inner
            if value == "{":
                return tuple(self.elements("}"))
            if value == "[":
                return self.list_tail()
            if value == "<<":
                return self.binary()
        raise TermSyntaxError("not a term")

    def elements(self, close: str) -> list[Any]:
        items: list[Any] = []
        if self.peek() == ("punct", close):
            self.take()
            return items
        while True:
            items.append(self.term())
            kind, value = self.take()
            if (kind, value) == ("punct", close):
                return items
            if (kind, value) != ("punct", ","):
                raise TermSyntaxError(f"expected , or {close}")

    def list_tail(self) -> Any:
        items: list[Any] = []
        if self.peek() == ("punct", "]"):
            self.take()
            return items
        while True:
            items.append(self.term())
            kind, value = self.take()
            if (kind, value) == ("punct", "]"):
                return items
            if (kind, value) == ("punct", "|"):
                tail = self.term()
                self.expect("]")
                if isinstance(tail, list):
                    return items + tail
                if isinstance(tail, ImproperList):
                    return ImproperList(tuple(items) + tail.items, tail.tail)
                return ImproperList(tuple(items), tail)
            if (kind, value) != ("punct", ","):
                raise TermSyntaxError("expected , | or ]")

    def binary(self) -> bytes:
        out = bytearray()
        if self.peek() == ("punct", ">>"):
            self.take()
            return bytes(out)
        while True:
            kind, value = self.take()
            if kind == "string":
                out += bytes(code & 255 for code in value)
            elif kind in ("integer", "char"):
                out += self.sized(value)
            elif (kind, value) == ("punct", "-") and self.peek()[0] in ("integer", "char"):
                out += self.sized(-self.take()[1])
            else:
                raise TermSyntaxError("unsupported binary segment")
            kind, value = self.take()
            if (kind, value) == ("punct", ">>"):
                return bytes(out)
            if (kind, value) != ("punct", ","):
                raise TermSyntaxError("unsupported binary segment")

    def sized(self, value: int) -> bytes:
        """An integer segment, `V` or `V:Size` (whole bytes, big-endian, wrapped as Erlang does)."""
        bits = 8
        if self.peek() == ("punct", ":"):
            self.take()
            kind, size = self.take()
            if kind != "integer" or size % 8:
                raise TermSyntaxError("unsupported segment size")
            bits = size
        if self.peek() == ("punct", "/"):
            raise TermSyntaxError("unsupported segment type")
        return (value % (1 << bits)).to_bytes(bits // 8, "big")


def parse_term(text: str) -> Any:
    """The one term in `text`, which must end with a dot (then only white space or a comment)."""
    tokens = tokenize(text)
    if not tokens or tokens[-1][0] != "dot":
        raise TermSyntaxError("no terminating dot")
    parser = _Parser(tokens[:-1])
    term = parser.term()
    if parser.pos != len(tokens) - 1:
        raise TermSyntaxError("more than one term")
    return term
