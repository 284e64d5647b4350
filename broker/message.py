"""Stored messages and the lazy routing view the exchanges library reads.

One `StoredMessage` is shared by every queue a publish reaches; per-queue state (redelivered, expiry,
position) lives in `broker.entities.queue.Entry`. Properties stay as received (`props` = flags +
property list) and are only decoded when routing or the broker needs a field.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

from broker.protocol import properties as P
from exchanges.base import Message
from exchanges.errors import AmqpError
from exchanges.fields import FieldTable

HEADERS_FLAG = 1 << 13
EXPIRATION_FLAG = 1 << 8
PRIORITY_FLAG = 1 << 11
REPLY_TO_FLAG = 1 << 9
USER_ID_FLAG = 1 << 4
_CONTENT_HEAD = struct.Struct(">HHQ")


class StoredMessage:
    """An immutable published message: where it was published, its raw properties and body."""

    __slots__ = (
        "_headers",
        "_spans",
        "body",
        "exchange",
        "flags",
        "has_bcc",
        "props",
        "routing_key",
        "routing_keys",
    )

    def __init__(self, exchange: str, routing_key: str, props: bytes, body: bytes) -> None:
        self.exchange = exchange
        self.routing_key = routing_key
        self.props = props
        self.body = body
        self.flags = (props[0] << 8) | props[1] if len(props) >= 2 else 0
        self._spans: dict[str, tuple[int, int]] | None = None
        self._headers: FieldTable | None = None
        self.routing_keys: list[str] = [routing_key]
        self.has_bcc = False

    @property
    def size(self) -> int:
        return len(self.body)

    def content_header_payload(self) -> bytes:
        return _CONTENT_HEAD.pack(60, 0, len(self.body)) + self.props

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
        keys = list(routing_keys) if routing_keys is not None else self.routing_keys
        msg = StoredMessage(self.exchange if exchange is None else exchange, keys[0], props, self.body)
        msg.routing_keys = keys
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
                raise AmqpError(
                    406, f'invalid message: {{unacceptable_type_in_header,"{name}",{field.type}}}'
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


def parse_expiration(value: str) -> int:
    """Per-message TTL in ms, validated like rabbit_basic:parse_expiration (406 on bad input)."""
    try:
        ttl = int(value, 10)
    except ValueError:
        raise AmqpError(
            406, f"invalid expiration '{value}': {{error,{{leftover_chars_in_integer,...}}}}"
        ) from None
    if ttl < 0:
        raise AmqpError(406, f"invalid expiration '{value}': {{value_negative,{ttl}}}")
    return ttl
