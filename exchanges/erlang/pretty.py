"""Erlang's `~p`, for the headers exchange's x-match error text.

RabbitMQ formats the offending value with io_lib:format("~p"), whose output (OTP 25) wraps long
lists and tuples at 80 columns and prints binaries as text only when every byte is printable
Latin-1. This is io_lib_pretty's algorithm (print/pp/cind) for the terms a field value can decode
to; the column matters because continuation lines are indented to it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from exchanges.erlang.format import erlang_float, format_binary_p, printable_latin1
from exchanges.types.header_terms import Atom, ErlangTerm

_LINE = 80


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


def erlang_pretty(term: ErlangTerm, column: int = 1) -> str:
    """`io_lib:format("~p", [Term])` starting at `column`, as text whose UTF-8 encoding (with
    surrogateescape) is the bytes RabbitMQ sends: the Latin-1 characters ~p emits for a binary's
    bytes are those very bytes on the wire."""
    if isinstance(term, list | tuple | bytes):
        layout = _layout(term)
        if layout.length < _LINE - column:
            text = _write(layout)
        else:
            indent = _choose_tag_indent(layout, column)
            text = _pp(layout, column, layout.length, indent, " " * (column - 1), 0, 0)
    else:
        text = _write_atomic(term)
    return text.encode("latin-1").decode("utf-8", "surrogateescape")


def _write_atomic(term: ErlangTerm) -> str:
    if isinstance(term, Atom):
        return term.name  # every atom a field decodes to is a plain lowercase word
    if isinstance(term, float):
        return erlang_float(term)
    return str(term)


def _layout(term: ErlangTerm) -> _Layout:
    """`print_length/6` with unlimited depth."""
    if isinstance(term, bytes):
        return _layout_binary(term)
    if isinstance(term, list | tuple):
        if not term:
            text = "[]" if isinstance(term, list) else "{}"
            return _Layout("text", 2, text=text)
        items = tuple(_layout(item) for item in term)
        length = 2 + sum(item.length for item in items) + len(items) - 1
        if isinstance(term, list):
            return _Layout("list", length, items=items)
        tagged = isinstance(term[0], Atom) and len(term) > 1
        return _Layout("tuple", length, items=items, tagged=tagged)
    text = _write_atomic(term)
    return _Layout("text", len(text), text=text)


def _layout_binary(value: bytes) -> _Layout:
    if not value:
        return _Layout("text", 4, text="<<>>")
    if printable_latin1(value):
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


def _fits(layout: _Layout, col: int, most: int, ld: int, width: int) -> bool:
    return layout.length < _LINE - col - ld and layout.length + width + ld <= most


def _fits_after(item: _Layout, col: int, most: int, ld: int, width: int) -> bool:
    """The `pp_tail` test for appending `,Item` to the current line."""
    size = 1 + item.length
    if ld == 0:
        return item.atomic and size + 1 < _LINE - col and width + size + 1 <= most
    return item.atomic and size < _LINE - col - ld and width + size + ld <= most


def _last_depth(rest: Sequence[_Layout], ld: int) -> int:
    return 0 if rest else ld + 1


def _choose_tag_indent(layout: _Layout, col: int) -> int:
    """`while_fail([-1, 4], cind, 1)`: the first tagged-tuple indentation that fits."""
    for indent in (-1, 4):
        try:
            return _cind(layout, col, layout.length, indent, 0, 0)
        except _NoGood:
            continue
    return 1


def _pp(layout: _Layout, col: int, most: int, tind: int, ind: str, ld: int, width: int) -> str:
    if _fits(layout, col, most, ld, width):
        return _write(layout)
    if layout.kind == "list":
        return "[" + _pp_list(layout.items, col + 1, most, tind, " " + ind, ld, width + 1) + "]"
    if layout.kind == "tuple" and layout.tagged:
        return "{" + _pp_tag_tuple(layout.items, col, most, tind, ind, ld, width + 1) + "}"
    if layout.kind == "tuple":
        return "{" + _pp_list(layout.items, col + 1, most, tind, " " + ind, ld, width + 1) + "}"
    if layout.kind == "bin":
        return _pp_binary(layout.parts, col + 2, most, "  " + ind, ld, width)
    return layout.text


def _pp_tag_tuple(
    items: Sequence[_Layout], col: int, most: int, tind: int, ind: str, ld: int, width: int
) -> str:
    tag, rest = items[0], items[1:]
    tag_ind = tag.length + 2
    tag_col = col + tag_ind
    if 0 < tind < tag_ind:
        tail = _pp_tail(rest, col + tind, tag_col, most, tind, " " * tind + ind, ld, width + tag.length)
        return tag.text + tail
    tail = _pp_list(rest, tag_col, most, tind, " " * tag_ind + ind, ld, width + tag.length + 1)
    return tag.text + "," + tail


def _pp_list(items: Sequence[_Layout], col: int, most: int, tind: int, ind: str, ld: int, width: int) -> str:
    first, rest = items[0], items[1:]
    text, used = _pp_element(first, col, most, tind, ind, _last_depth(rest, ld), width)
    return text + _pp_tail(rest, col, col + used, most, tind, ind, ld, width + used)


def _pp_tail(
    items: Sequence[_Layout], col0: int, col: int, most: int, tind: int, ind: str, ld: int, width: int
) -> str:
    out: list[str] = []
    for position, item in enumerate(items):
        item_ld = _last_depth(items[position + 1 :], ld)
        if _fits_after(item, col, most, item_ld, width):
            out.append("," + _write(item))
            col += 1 + item.length
            width += 1 + item.length
        else:
            text, used = _pp_element(item, col0, most, tind, ind, item_ld, 0)
            out.append(",\n" + ind + text)
            col = col0 + used
            width = used
    return "".join(out)


def _pp_element(
    item: _Layout, col: int, most: int, tind: int, ind: str, ld: int, width: int
) -> tuple[str, int]:
    if item.atomic and _fits(item, col, most, ld, width):
        return _write(item), item.length
    return _pp(item, col, most, tind, ind, ld, width), _LINE  # _LINE forces the next item onto a new line


def _pp_binary(parts: Sequence[str], col: int, most: int, ind: str, ld: int, width: int) -> str:
    """A non-printable binary too long for the line, broken between byte values."""
    room = max(8, min(_LINE - col, most - 4 - width) - ld)
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


def _cind(layout: _Layout, col: int, most: int, ind: int, ld: int, width: int) -> int:
    """Check that tagged-tuple indentation `ind` keeps everything within the line (`cind/7`)."""
    if _fits(layout, col, most, ld, width):
        return ind
    if layout.kind == "list" or (layout.kind == "tuple" and not layout.tagged):
        return _cind_list(layout.items, col + 1, most, ind, ld, width + 1)
    if layout.kind == "tuple":
        return _cind_tag_tuple(layout.items, col, most, ind, ld, width + 1)
    return ind


def _cind_tag_tuple(items: Sequence[_Layout], col: int, most: int, ind: int, ld: int, width: int) -> int:
    tag, rest = items[0], items[1:]
    tag_ind = tag.length + 2
    tag_col = col + tag_ind
    if 0 < ind < tag_ind:
        col1 = col + ind
        if most + col1 <= _LINE or col1 <= _LINE // 2:
            return _cind_tail(rest, col1, tag_col, most, ind, ld, width + tag.length)
        raise _NoGood
    if most + tag_col < _LINE or tag_col < _LINE // 2:
        return _cind_list(rest, tag_col, most, ind, ld, width + tag.length + 1)
    raise _NoGood


def _cind_list(items: Sequence[_Layout], col: int, most: int, ind: int, ld: int, width: int) -> int:
    first, rest = items[0], items[1:]
    used = _cind_element(first, col, most, ind, _last_depth(rest, ld), width)
    return _cind_tail(rest, col, col + used, most, ind, ld, width + used)


def _cind_tail(
    items: Sequence[_Layout], col0: int, col: int, most: int, ind: int, ld: int, width: int
) -> int:
    for position, item in enumerate(items):
        item_ld = _last_depth(items[position + 1 :], ld)
        if _fits_after(item, col, most, item_ld, width):
            col += 1 + item.length
            width += 1 + item.length
        else:
            used = _cind_element(item, col0, most, ind, item_ld, 0)
            col = col0 + used
            width = used
    return ind


def _cind_element(item: _Layout, col: int, most: int, ind: int, ld: int, width: int) -> int:
    if item.atomic and _fits(item, col, most, ld, width):
        return item.length
    _cind(item, col, most, ind, ld, width)
    return _LINE
