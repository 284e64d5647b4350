"""Stored messages and the lazy routing view the exchanges library reads.

One `StoredMessage` is shared by every queue a publish reaches; per-queue state (redelivered, expiry,
position) lives in `broker.entities.queues.catalog.Entry`. Properties stay as received (`props` = flags +
property list) and are only decoded when routing or the broker needs a field.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Sequence
from typing import Any

from amqpwire.errors import precondition_failed
from amqpwire.fields import FieldTable
from broker.protocol import properties as P
from exchanges.base import Message
from exchanges.erlang.atom import Atom
from exchanges.erlang.format import erl_format

HEADERS_FLAG = 1 << 13
EXPIRATION_FLAG = 1 << 8
PRIORITY_FLAG = 1 << 11
REPLY_TO_FLAG = 1 << 9
USER_ID_FLAG = 1 << 4
DELIVERY_MODE_FLAG = 1 << 12


class StoredMessage:
    """An immutable published message: where it was published, its raw properties and body."""

    __slots__ = (
        "_headers",
        "_spans",
        "body",
        "exchange",
        "extra_keys",
        "flags",
        "has_bcc",
        "props",
        "routing_key",
    )

    def __init__(self, exchange: str, routing_key: str, props: bytes, body: bytes) -> None:
        self.exchange = exchange
        self.routing_key = routing_key
        self.props = props
        self.body = body
        self.flags = (props[0] << 8) | props[1] if len(props) >= 2 else 0
        self._spans: dict[str, tuple[int, int]] | None = None
        self._headers: FieldTable | None = None
        # all routing keys when CC/BCC headers (or dead-lettering) gave it more than its own: None
        # for the usual single key, so a plain publish allocates no list (see `routing_keys`)
        self.extra_keys: Sequence[str] | None = None
        self.has_bcc = False

    @property
    def routing_keys(self) -> Sequence[str]:
        """RabbitMQ's `[RoutingKey | CC ++ BCC]`."""
        keys = self.extra_keys
        return (self.routing_key,) if keys is None else keys

    @routing_keys.setter
    def routing_keys(self, keys: Sequence[str]) -> None:
        self.extra_keys = keys

    @property
    def size(self) -> int:
        return len(self.body)

    def spans(self) -> dict[str, tuple[int, int]]:
        if self._spans is None:
            self._spans = P.locate(self.props) if self.flags else {}
        return self._spans

    def prop(self, name: str) -> Any:
        span = self.spans().get(name)
        if span is None:
            return None
        return P.decode_value(self.props, name, span)

    def headers(self) -> FieldTable | None:
        if not self.flags & HEADERS_FLAG:
            return None
        if self._headers is None:
            self._headers = self.prop("headers")
        return self._headers

    def with_props(
        self, props: bytes, exchange: str | None = None, routing_keys: Sequence[str] | None = None
    ) -> StoredMessage:
        """A copy with new property bytes (and optionally a new exchange / routing keys)."""
        exchange = self.exchange if exchange is None else exchange
        if routing_keys is None:
            msg = StoredMessage(exchange, self.routing_key, props, self.body)
            msg.extra_keys = self.extra_keys
            return msg
        keys = list(routing_keys)
        msg = StoredMessage(exchange, keys[0], props, self.body)
        msg.extra_keys = keys
        return msg

    def compute_routing_keys(self) -> None:
        """Add CC and BCC header values, as rabbit_basic:header_routes does (may raise 406)."""
        if not self.flags & HEADERS_FLAG:
            return
        span = self.spans().get("headers")
        if span is None:
            return
        raw = self.props[span[0] : span[1]]
        if b"\x02CC" not in raw and b"\x03BCC" not in raw:
            return
        headers = self.headers()
        if headers is None:
            return
        keys = [self.routing_key]
        for name in ("CC", "BCC"):
            field = headers.get(name)
            if field is None:
                continue
            if field.type != "array":
                raise precondition_failed(
                    f'invalid message: {{unacceptable_type_in_header,"{name}",{field.type}}}'
                )
            if name == "BCC":
                self.has_bcc = True
            keys.extend(
                v.value.decode("utf-8", errors="surrogateescape") for v in field.value if v.type == "longstr"
            )
        self.routing_keys = keys

    def strip_bcc(self) -> StoredMessage:
        """The message as delivered: without a BCC header (rabbit_basic:strip_bcc)."""
        headers = self.headers()
        if headers is None or headers.get("BCC") is None:
            return self
        table = FieldTable((k, v) for k, v in headers if k != "BCC")
        msg = self.with_props(P.rewrite(self.props, {"headers": table}))
        msg.routing_keys = self.routing_keys
        return msg


def is_persistent(msg: StoredMessage) -> bool:
    """delivery_mode 2 (the property is decoded only when its flag bit is set)."""
    return bool(msg.flags & DELIVERY_MODE_FLAG) and P.delivery_mode(msg.props) == 2


_PAGE_HEAD = struct.Struct(">BHHI")
"""A paged message's head: its layout (`_COMPACT` or `_PICKLED`), then for the compact layout the
encoded lengths of exchange and routing key and the length of the property bytes."""
_COMPACT = 0
_PICKLED = 1


def pack_message(msg: StoredMessage) -> bytes:
    """The message as bytes for a page file (broker.entities.queues.classic.paging): what `unpack_message`
    needs to rebuild it, routing keys from CC/BCC or dead-lettering included.

    Every message past a queue's window is packed here, so the usual one (one routing key, no BCC)
    is laid out by hand: head, exchange, routing key, properties, body; anything else is pickled."""
    e = msg.exchange.encode("utf-8", "surrogateescape")
    r = msg.routing_key.encode("utf-8", "surrogateescape")
    props = msg.props
    if msg.extra_keys is None and not msg.has_bcc and len(e) < 0x10000 and len(r) < 0x10000:
        return b"".join((_PAGE_HEAD.pack(_COMPACT, len(e), len(r), len(props)), e, r, props, msg.body))
    import pickle  # only for messages with several routing keys

    keys = msg.extra_keys
    return bytes((_PICKLED,)) + pickle.dumps(
        (
            msg.exchange,
            msg.routing_key,
            props,
            msg.body,
            None if keys is None else list(keys),
            msg.has_bcc,
        ),
        protocol=5,
    )


def pack_messages(msgs: Sequence[StoredMessage]) -> tuple[bytes, list[int]]:
    """`pack_message` of each of `msgs`, back to back in one blob, and where each one ends in it.

    A queue pages out in runs (broker.entities.queues.classic.paging), and the messages of a run
    mostly share their exchange, routing key and property length: their head, exchange and routing
    key are packed once for as long as those stay the same."""
    parts: list[bytes] = []
    ends: list[int] = []
    pos = 0
    exchange: str | None = None
    routing_key = ""
    n_props = -1
    head = b""
    for msg in msgs:
        props = msg.props
        body = msg.body
        if msg.extra_keys is not None or msg.has_bcc:
            blob = pack_message(msg)
            parts.append(blob)
            pos += len(blob)
            ends.append(pos)
            continue
        if msg.routing_key != routing_key or msg.exchange != exchange or len(props) != n_props:
            e = msg.exchange.encode("utf-8", "surrogateescape")
            r = msg.routing_key.encode("utf-8", "surrogateescape")
            if len(e) >= 0x10000 or len(r) >= 0x10000:
                blob = pack_message(msg)
                parts.append(blob)
                pos += len(blob)
                ends.append(pos)
                exchange = None
                continue
            exchange, routing_key, n_props = msg.exchange, msg.routing_key, len(props)
            head = b"".join((_PAGE_HEAD.pack(_COMPACT, len(e), len(r), n_props), e, r))
        parts.append(head)
        parts.append(props)
        parts.append(body)
        pos += len(head) + n_props + len(body)
        ends.append(pos)
    return b"".join(parts), ends


def unpack_message(blob: bytes | memoryview) -> StoredMessage:
    """A message `pack_message` wrote (from a page file this broker wrote itself)."""
    kind, e_len, r_len, p_len = _PAGE_HEAD.unpack_from(blob, 0)
    if kind == _COMPACT:
        at = _PAGE_HEAD.size
        r_at = at + e_len
        p_at = r_at + r_len
        b_at = p_at + p_len
        return StoredMessage(
            str(blob[at:r_at], "utf-8", "surrogateescape"),
            str(blob[r_at:p_at], "utf-8", "surrogateescape"),
            bytes(blob[p_at:b_at]),
            bytes(blob[b_at:]),
        )
    import pickle

    exchange, routing_key, props, body, keys, has_bcc = pickle.loads(blob[1:])
    msg = StoredMessage(exchange, routing_key, props, body)
    msg.extra_keys = keys
    msg.has_bcc = has_bcc
    return msg


class RoutingView(Message):
    """`exchanges.base.Message` over a StoredMessage: nothing is decoded unless a type asks."""

    __slots__ = ("msg",)

    def __init__(self, msg: StoredMessage) -> None:
        self.msg = msg

    @property
    def routing_keys(self) -> Sequence[str]:
        return self.msg.routing_keys

    def headers(self) -> FieldTable | None:
        return self.msg.headers()

    def property(self, name: str) -> Any:
        return self.msg.prop(name)


MAX_EXPIRY_MS = 315_360_000_000  # rabbit_misc:check_expiry: ten years
_ERL_INTEGER = re.compile(rb"[+-]?[0-9]+")


def parse_expiration(value: str) -> int:
    """Per-message TTL in ms, validated like rabbit_basic:parse_expiration (406 on bad input).

    RabbitMQ runs `string:to_integer` over the property's bytes (one optional sign, ASCII digits,
    no whitespace), then `check_expiry`; the 406 text is rabbit_channel's
    "invalid expiration '~s': ~p" of the error term (`no_integer`, `{leftover_string, Rest}`,
    `{value_negative | value_too_large, N}`), printed by the same Erlang printer, wrapping included.
    """
    raw = value.encode("utf-8", errors="surrogateescape")
    m = _ERL_INTEGER.match(raw)
    reason: object
    if m is None:
        reason = Atom("no_integer")
    elif m.end() < len(raw):
        reason = (Atom("leftover_string"), list(raw[m.end() :]))
    else:
        ttl = int(m.group())
        if 0 <= ttl <= MAX_EXPIRY_MS:
            return ttl
        reason = (Atom("value_negative" if ttl < 0 else "value_too_large"), ttl)
    raise precondition_failed(erl_format("invalid expiration '~s': ~p", [raw, reason]))
