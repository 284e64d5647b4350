"""Erlang's `io_lib:format` (`~p`, `~w`, `~s`), because RabbitMQ puts its output verbatim into replies.

`The binding key must be an integer: <<"abc">>` is what a client sees, and the text RabbitMQ builds is
exact down to the byte: `~p` (not `~tp`) prints a binary whose bytes are all printable Latin-1 as a
quoted string of those very bytes (so UTF-8 text passes through byte for byte), anything else as a
list of byte values; it wraps a list, tuple or non-printable binary that does not fit in the line
(80 columns, or N for `~Np`), indenting continuation lines to the column the term started at, so the
text before a term decides how it breaks; `~w` never quotes a binary as text nor wraps. This is OTP
25's io_lib_format / io_lib_pretty (print/pp/cind) for the terms RabbitMQ's texts contain, checked
against `erl` (tests/unit/test_erlang_format.py, tests/data/erlang_vectors.json "erlang_format").

Python values stand for Erlang terms as follows:

  int -> integer        float -> float       bool -> the atom true / false    Atom -> atom
  bytes -> binary       tuple -> tuple       list -> list
  str -> the string (character list) of its UTF-8 bytes, which is what `~s` of a binary yields in
         RabbitMQ's own format calls; a list of printable Latin-1 codes prints as a string, as in Erlang.

Every character these directives print is one Latin-1 code that RabbitMQ sends as one byte
(`list_to_binary`), so the functions return text whose UTF-8 encoding with surrogateescape is those
bytes: the convention of every reply text in hashbroker.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal

from exchanges.erlang.atom import Atom

ESCAPES = {
    0x0A: b"\\n",
    0x0D: b"\\r",
    0x09: b"\\t",
    0x0B: b"\\v",
    0x08: b"\\b",
    0x0C: b"\\f",
    0x1B: b"\\e",
    0x22: b'\\"',
    0x5C: b"\\\\",
}
LINE_LENGTH = 80
"""io_lib_pretty's line length when the directive names none (`~p`, not `~255p`)."""


def _printable_latin1(code: int) -> bool:
    """io_lib:printable_latin1_list for one character."""
    return 0x20 <= code <= 0x7E or 0xA0 <= code <= 0xFF or code in ESCAPES


def printable_latin1(data: bytes) -> bool:
    """io_lib:printable_latin1_list over a binary's bytes: ~p then prints it as a string."""
    return all(_printable_latin1(b) for b in data)


def _quoted(codes: bytes) -> bytes:
    return b"".join(ESCAPES.get(b, bytes((b,))) for b in codes)


def format_binary_p(value: bytes) -> bytes:
    """`io_lib:format("~p", [Value])` for a binary short enough not to wrap, as the bytes that reach
    the wire (a printable one never wraps)."""
    if not value:
        return b"<<>>"
    if printable_latin1(value):
        return b'<<"' + _quoted(value) + b'">>'
    return b"<<" + b",".join(str(b).encode() for b in value) + b">>"


def format_term(term: object, column: int = 1, line: int = LINE_LENGTH) -> str:
    """`io_lib:format("~p", [Term])` printed at `column` (1 = the start of a line) of a `line`-wide line."""
    return _wire(_Pretty(line).print(term, column))


def write_term(term: object) -> str:
    """`io_lib:format("~w", [Term])`: binaries as byte values, strings as lists, never wrapped."""
    return _wire(_write_w(term))


def erl_format(fmt: str, args: Sequence[object]) -> str:
    """`lists:flatten(io_lib:format(Fmt, Args))` for the directives RabbitMQ's texts use: `~p` and
    `~Np` (N: the line length), `~w`, `~s` (a binary, a str or a list of codes) and `~~`.

    Each `~p` starts at the column the text before it ends on (a newline resets it, a tab moves it
    to the next multiple of 8), as io_lib_format computes it.
    """
    out: list[str] = []
    pending = list(args)
    pos = 0
    for match in _DIRECTIVE.finditer(fmt):
        out.append(_latin1_of(fmt[pos : match.start()]))
        pos = match.end()
        width, kind = match.group(1), match.group(2)
        if kind not in "pws~":
            raise ValueError(f"unsupported directive ~{width}{kind} in {fmt!r}")
        if kind == "~":
            out.append("~")
            continue
        if not pending:
            raise ValueError(f"too few arguments for {fmt!r}")
        arg = pending.pop(0)
        if kind == "s":
            out.append(_chars_of(arg))
        elif kind == "w":
            out.append(_write_w(arg))
        else:
            line = int(width) if width else LINE_LENGTH
            out.append(_Pretty(line).print(arg, _indentation("".join(out)) + 1))
    if pending:
        raise ValueError(f"too many arguments for {fmt!r}")
    out.append(_latin1_of(fmt[pos:]))
    return _wire("".join(out))


_DIRECTIVE = re.compile(r"~([0-9]*)(.)", re.DOTALL)


def _wire(chars: str) -> str:
    """Erlang characters (Latin-1 codes, one byte each on the wire) as hashbroker reply text."""
    return chars.encode("latin-1").decode("utf-8", "surrogateescape")


def _latin1_of(text: str) -> str:
    """Reply text as the Erlang characters of its bytes."""
    return text.encode("utf-8", "surrogateescape").decode("latin-1")


def _chars_of(arg: object) -> str:
    """`~s` of a binary, a string or a list of character codes."""
    if isinstance(arg, bytes | bytearray):
        return bytes(arg).decode("latin-1")
    if isinstance(arg, str):
        return _latin1_of(arg)
    if isinstance(arg, list) and all(type(c) is int and 0 <= c <= 0xFF for c in arg):
        return bytes(arg).decode("latin-1")
    if isinstance(arg, Atom):
        return arg.name
    raise TypeError(f"~s takes a binary, a string or an atom, not {type(arg).__name__}")


def _indentation(chars: str) -> int:
    """io_lib_format's column after `chars`: a newline resets it, a tab moves to the next multiple of 8."""
    col = 0
    for char in chars[chars.rfind("\n") + 1 :]:
        col = (col + 8) // 8 * 8 if char == "\t" else col + 1
    return col


# -- atomic terms --------------------------------------------------------------------------------------

# io_lib:quote_atom: a lowercase letter (Latin-1 ones too), then letters, digits, _ and @.
_LOWER = "a-z\u00df-\u00f6\u00f8-\u00ff"
_BARE_ATOM = re.compile(f"[{_LOWER}][{_LOWER}A-Z0-9_@\u00c0-\u00d6\u00d8-\u00de]*")
_RESERVED = frozenset(
    {
        *("after", "and", "andalso", "band", "begin", "bnot", "bor", "bsl", "bsr", "bxor", "case"),
        *("catch", "cond", "div", "end", "fun", "if", "let", "not", "of", "or", "orelse", "receive"),
        *("rem", "try", "when", "xor"),
    }
)


def write_atom(name: str) -> str:
    """io_lib:write_atom: bare when it reads as an atom, else in single quotes with escapes."""
    if _BARE_ATOM.fullmatch(name) and name not in _RESERVED:
        return name
    body = "".join("\\'" if c == "'" else "\\\\" if c == "\\" else _latin1_char(c) for c in name)
    return f"'{body}'"


def _latin1_char(char: str) -> str:
    code = ord(char)
    escaped = ESCAPES.get(code)
    if escaped is not None and code != 0x22:  # a double quote needs no escape inside single quotes
        return escaped.decode()
    if code == 0x7F:
        return "\\d"
    if code < 0x20 or 0x80 <= code < 0xA0:
        return f"\\{code:03o}"
    return char


def erlang_float(value: float) -> str:
    """`io_lib:write/1` of a float on OTP 25: shortest round-trip digits, placed the way
    `io_lib_format:insert_decimal/3` places them ("1.0e3" for 1000.0, "0.0001", "1.0e-5")."""
    if value == 0.0 or not math.isfinite(value):  # Erlang has no inf/nan; the parser refuses them
        return repr(value)
    sign, digit_tuple, exponent = Decimal(repr(value)).as_tuple()
    digits = "".join(map(str, digit_tuple)).rstrip("0")
    exponent = int(exponent) + (len(digit_tuple) - len(digits))
    body = _insert_decimal(len(digits) + exponent, digits, abs(value))
    return ("-" if sign else "") + body


def _insert_decimal(place: int, digits: str, magnitude: float) -> str:
    """`place` is where the decimal point goes relative to the start of `digits`."""
    if place == 0:
        return "0." + digits
    length = len(digits)
    if 0 < place < length:
        return digits[:place] + "." + digits[place:]
    exp_text = str(place - 1)
    exp_cost = len(exp_text) + 1 + (2 if length == 1 else 1)
    if place < 0:
        if 2 - place <= exp_cost:
            return "0." + "0" * -place + digits
    elif place - length + 2 <= exp_cost and magnitude < float(1 << 53):
        return digits + "0" * (place - length) + ".0"
    if length == 1:
        return digits + ".0e" + exp_text
    return digits[0] + "." + digits[1:] + "e" + exp_text


def _write_atomic(term: object) -> str:
    """Integers, floats and atoms, the same for ~p and ~w."""
    if isinstance(term, bool):
        return "true" if term else "false"
    if isinstance(term, int):
        return str(term)
    if isinstance(term, float):
        return erlang_float(term)
    if isinstance(term, Atom):
        return write_atom(term.name)
    raise TypeError(f"no Erlang term for {type(term).__name__}")


def _codes(term: str) -> list[int]:
    return list(term.encode("utf-8", "surrogateescape"))


def _write_w(term: object) -> str:
    """`~w`: every binary and list element by value, nothing quoted as text, no line breaks."""
    if isinstance(term, str):
        term = _codes(term)
    if isinstance(term, bytes | bytearray):
        return "<<" + ",".join(map(str, term)) + ">>"
    if isinstance(term, list):
        return "[" + ",".join(_write_w(item) for item in term) + "]"
    if isinstance(term, tuple):
        return "{" + ",".join(_write_w(item) for item in term) + "}"
    return _write_atomic(term)


# -- ~p: io_lib_pretty ---------------------------------------------------------------------------------


class _NoGood(Exception):
    """io_lib_pretty's `throw(no_good)`: this tagged-tuple indentation does not fit."""


@dataclass(slots=True)
class _Layout:
    """io_lib_pretty's intermediate format: `text` for atomic pieces (the `?ATM` case), else the
    children of a list/tuple or the byte strings of a non-printable binary."""

    kind: str  # "text" | "bin" | "list" | "tuple"
    length: int
    text: str = ""
    items: tuple[_Layout, ...] = ()
    parts: tuple[str, ...] = ()
    tagged: bool = False

    @property
    def atomic(self) -> bool:
        return self.kind == "text"


def _layout(term: object) -> _Layout:
    """`print_length/6` with unlimited depth."""
    if isinstance(term, str):
        term = _codes(term)
    if isinstance(term, bytes | bytearray):
        return _layout_binary(bytes(term))
    if isinstance(term, list) and term and all(type(c) is int and 0 <= c <= 0xFF for c in term):
        codes = bytes(term)
        if printable_latin1(codes):
            text = '"' + _quoted(codes).decode("latin-1") + '"'
            return _Layout("text", len(text), text=text)
    if isinstance(term, list | tuple):
        if not term:
            text = "[]" if isinstance(term, list) else "{}"
            return _Layout("text", 2, text=text)
        items = tuple(_layout(item) for item in term)
        length = 2 + sum(item.length for item in items) + len(items) - 1
        if isinstance(term, list):
            return _Layout("list", length, items=items)
        tagged = isinstance(term[0], Atom | bool) and len(term) > 1
        return _Layout("tuple", length, items=items, tagged=tagged)
    text = _write_atomic(term)
    return _Layout("text", len(text), text=text)


def _layout_binary(value: bytes) -> _Layout:
    if not value or printable_latin1(value):
        text = format_binary_p(value).decode("latin-1")
        return _Layout("text", len(text), text=text)
    parts = tuple(str(b) for b in value)
    return _Layout("bin", 4 + sum(map(len, parts)) + len(parts) - 1, parts=parts)


def _write(layout: _Layout) -> str:
    if layout.kind == "text":
        return layout.text
    if layout.kind == "bin":
        return "<<" + ",".join(layout.parts) + ">>"
    inner = ",".join(_write(item) for item in layout.items)
    return f"[{inner}]" if layout.kind == "list" else f"{{{inner}}}"


def _last_depth(rest: Sequence[_Layout], ld: int) -> int:
    return 0 if rest else ld + 1


class _Pretty:
    """io_lib_pretty:print/pp/cind for one line length. `col` is 1-based, `ld` the room the closing
    brackets of enclosing terms need, `width` what the current line already holds of the term."""

    __slots__ = ("line",)

    def __init__(self, line: int) -> None:
        self.line = line

    def print(self, term: object, column: int) -> str:
        """The term's Erlang characters, starting at `column`."""
        if not isinstance(term, list | tuple | bytes | bytearray | str):
            return _write_atomic(term)
        layout = _layout(term)
        if layout.length < self.line - column:
            return _write(layout)
        indent = self._choose_tag_indent(layout, column)
        return self._pp(layout, column, layout.length, indent, " " * (column - 1), 0, 0)

    def _fits(self, layout: _Layout, col: int, most: int, ld: int, width: int) -> bool:
        return layout.length < self.line - col - ld and layout.length + width + ld <= most

    def _fits_after(self, item: _Layout, col: int, most: int, ld: int, width: int) -> bool:
        """The `pp_tail` test for appending `,Item` to the current line."""
        size = 1 + item.length
        if ld == 0:
            return item.atomic and size + 1 < self.line - col and width + size + 1 <= most
        return item.atomic and size < self.line - col - ld and width + size + ld <= most

    def _choose_tag_indent(self, layout: _Layout, col: int) -> int:
        """`while_fail([-1, 4], cind, 1)`: the first tagged-tuple indentation that fits."""
        for indent in (-1, 4):
            try:
                return self._cind(layout, col, layout.length, indent, 0, 0)
            except _NoGood:
                continue
        return 1

    def _pp(self, layout: _Layout, col: int, most: int, tind: int, ind: str, ld: int, width: int) -> str:
        if self._fits(layout, col, most, ld, width):
            return _write(layout)
        if layout.kind == "list":
            return "[" + self._pp_list(layout.items, col + 1, most, tind, " " + ind, ld, width + 1) + "]"
        if layout.kind == "tuple" and layout.tagged:
            return "{" + self._pp_tag_tuple(layout.items, col, most, tind, ind, ld, width + 1) + "}"
        if layout.kind == "tuple":
            return "{" + self._pp_list(layout.items, col + 1, most, tind, " " + ind, ld, width + 1) + "}"
        if layout.kind == "bin":
            return self._pp_binary(layout.parts, col + 2, most, "  " + ind, ld, width)
        return layout.text

    def _pp_tag_tuple(
        self, items: Sequence[_Layout], col: int, most: int, tind: int, ind: str, ld: int, width: int
    ) -> str:
        tag, rest = items[0], items[1:]
        tag_ind = tag.length + 2
        tag_col = col + tag_ind
        if 0 < tind < tag_ind:
            tail = self._pp_tail(
                rest, col + tind, tag_col, most, tind, " " * tind + ind, ld, width + tag.length
            )
            return tag.text + tail
        tail = self._pp_list(rest, tag_col, most, tind, " " * tag_ind + ind, ld, width + tag.length + 1)
        return tag.text + "," + tail

    def _pp_list(
        self, items: Sequence[_Layout], col: int, most: int, tind: int, ind: str, ld: int, width: int
    ) -> str:
        first, rest = items[0], items[1:]
        text, used = self._pp_element(first, col, most, tind, ind, _last_depth(rest, ld), width)
        return text + self._pp_tail(rest, col, col + used, most, tind, ind, ld, width + used)

    def _pp_tail(
        self,
        items: Sequence[_Layout],
        col0: int,
        col: int,
        most: int,
        tind: int,
        ind: str,
        ld: int,
        width: int,
    ) -> str:
        out: list[str] = []
        for position, item in enumerate(items):
            item_ld = _last_depth(items[position + 1 :], ld)
            if self._fits_after(item, col, most, item_ld, width):
                out.append("," + _write(item))
                col += 1 + item.length
                width += 1 + item.length
            else:
                text, used = self._pp_element(item, col0, most, tind, ind, item_ld, 0)
                out.append(",\n" + ind + text)
                col = col0 + used
                width = used
        return "".join(out)

    def _pp_element(
        self, item: _Layout, col: int, most: int, tind: int, ind: str, ld: int, width: int
    ) -> tuple[str, int]:
        if item.atomic and self._fits(item, col, most, ld, width):
            return _write(item), item.length
        # a full line's width forces the next item onto a new line
        return self._pp(item, col, most, tind, ind, ld, width), self.line

    def _pp_binary(self, parts: Sequence[str], col: int, most: int, ind: str, ld: int, width: int) -> str:
        """A non-printable binary too long for the line, broken between byte values."""
        room = max(8, min(self.line - col, most - 4 - width) - ld)
        left = room
        out = ["<<"]
        for part in parts[:-1]:
            size = len(part) + 1
            if left - size < 0:
                out.append("\n" + ind + part + ",")
                left = room - size
            else:
                out.append(part + ",")
                left -= size
        last = parts[-1]
        out.append("\n" + ind + last if len(last) > left else last)
        out.append(">>")
        return "".join(out)

    def _cind(self, layout: _Layout, col: int, most: int, ind: int, ld: int, width: int) -> int:
        """Check that tagged-tuple indentation `ind` keeps everything within the line (`cind/7`)."""
        if self._fits(layout, col, most, ld, width):
            return ind
        if layout.kind == "list" or (layout.kind == "tuple" and not layout.tagged):
            return self._cind_list(layout.items, col + 1, most, ind, ld, width + 1)
        if layout.kind == "tuple":
            return self._cind_tag_tuple(layout.items, col, most, ind, ld, width + 1)
        return ind

    def _cind_tag_tuple(
        self, items: Sequence[_Layout], col: int, most: int, ind: int, ld: int, width: int
    ) -> int:
        tag, rest = items[0], items[1:]
        tag_ind = tag.length + 2
        tag_col = col + tag_ind
        if 0 < ind < tag_ind:
            col1 = col + ind
            if most + col1 <= self.line or col1 <= self.line // 2:
                return self._cind_tail(rest, col1, tag_col, most, ind, ld, width + tag.length)
            raise _NoGood
        if most + tag_col < self.line or tag_col < self.line // 2:
            return self._cind_list(rest, tag_col, most, ind, ld, width + tag.length + 1)
        raise _NoGood

    def _cind_list(self, items: Sequence[_Layout], col: int, most: int, ind: int, ld: int, width: int) -> int:
        first, rest = items[0], items[1:]
        used = self._cind_element(first, col, most, ind, _last_depth(rest, ld), width)
        return self._cind_tail(rest, col, col + used, most, ind, ld, width + used)

    def _cind_tail(
        self, items: Sequence[_Layout], col0: int, col: int, most: int, ind: int, ld: int, width: int
    ) -> int:
        for position, item in enumerate(items):
            item_ld = _last_depth(items[position + 1 :], ld)
            if self._fits_after(item, col, most, item_ld, width):
                col += 1 + item.length
                width += 1 + item.length
            else:
                used = self._cind_element(item, col0, most, ind, item_ld, 0)
                col = col0 + used
                width = used
        return ind

    def _cind_element(self, item: _Layout, col: int, most: int, ind: int, ld: int, width: int) -> int:
        if item.atomic and self._fits(item, col, most, ld, width):
            return item.length
        self._cind(item, col, most, ind, ld, width)
        return self.line
