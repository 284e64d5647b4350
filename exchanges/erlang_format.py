"""Erlang's `~p` text for binaries, because RabbitMQ puts it verbatim into error replies.

`The binding key must be an integer: <<"abc">>` is what a client sees. The consistent-hash plugin
formats with `~p` (not `~tp`): a binary whose bytes are all printable Latin-1 prints as a quoted
string of those bytes (so UTF-8 text passes through byte for byte), anything else as a list of byte
values. Vectors from `erl` are in tests/data/erlang_vectors.json ("erlang_format").
"""

from __future__ import annotations

_ESCAPES = {
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
    return 0x20 <= code <= 0x7E or 0xA0 <= code <= 0xFF or code in _ESCAPES


def format_binary_p(value: bytes) -> bytes:
    """`io_lib:format("~p", [Value])` for a binary, as the bytes that reach the wire."""
    if not value:
        return b"<<>>"
    if all(_printable_latin1(b) for b in value):
        return b'<<"' + b"".join(_ESCAPES.get(b, bytes((b,))) for b in value) + b'">>'
    return b"<<" + b",".join(str(b).encode() for b in value) + b">>"


def format_term(value: bytes) -> str:
    """`format_binary_p` as text whose UTF-8 (with surrogateescape) encoding is those bytes."""
    return format_binary_p(value).decode("utf-8", "surrogateescape")
