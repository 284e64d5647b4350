"""Erlang's `~p` text for binaries, because RabbitMQ puts it verbatim into error replies.

`The binding key must be an integer: <<"abc">>` is what a client sees. The consistent-hash plugin
formats with `~p` (not `~tp`): a binary whose bytes are all printable Latin-1 prints as a quoted
string of those bytes (so UTF-8 text passes through byte for byte), anything else as a list of byte
values. Vectors from `erl` are in tests/data/erlang_vectors.json ("erlang_format").
"""

from __future__ import annotations

import math
from decimal import Decimal

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


def _printable_latin1(code: int) -> bool:
    """io_lib:printable_latin1_list for one character."""
    return 0x20 <= code <= 0x7E or 0xA0 <= code <= 0xFF or code in ESCAPES


def printable_latin1(data: bytes) -> bool:
    """io_lib:printable_latin1_list over a binary's bytes: ~p then prints it as a string."""
    return all(_printable_latin1(b) for b in data)


def format_binary_p(value: bytes) -> bytes:
    """`io_lib:format("~p", [Value])` for a binary, as the bytes that reach the wire."""
    if not value:
        return b"<<>>"
    if all(_printable_latin1(b) for b in value):
        return b'<<"' + b"".join(ESCAPES.get(b, bytes((b,))) for b in value) + b'">>'
    return b"<<" + b",".join(str(b).encode() for b in value) + b">>"


def format_term(value: bytes) -> str:
    """`format_binary_p` as text whose UTF-8 (with surrogateescape) encoding is those bytes."""
    return format_binary_p(value).decode("utf-8", "surrogateescape")


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
