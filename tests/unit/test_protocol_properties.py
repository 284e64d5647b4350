"""Property bytes: splicing a delivery-time header gives exactly the general rewrite's bytes."""

from __future__ import annotations

import struct
from typing import Any

import pytest

from amqpwire.fields import Field, FieldTable
from broker.entities.message import StoredMessage
from broker.entities.queues.stream.queue import OFFSET_HEADER, delivered_message
from broker.protocol import properties as P

HEADERS = FieldTable([("a", Field("longstr", b"b")), ("n", Field("long", 5)), ("f", Field("bool", True))])
CASES: list[dict[str, object]] = [
    {},
    {"delivery_mode": 2},
    {"content_type": "text/plain"},
    {"content_type": "application/json", "content_encoding": "gzip", "priority": 3},
    {"content_encoding": "utf-8", "message_id": "m-1"},
    {"headers": FieldTable()},
    {"headers": HEADERS},
    {"content_type": "t", "content_encoding": "e", "headers": HEADERS, "delivery_mode": 1, "timestamp": 7},
    {"headers": FieldTable([("x-stream-offset", Field("long", 99)), ("k", Field("longstr", b"v"))])},
    {"headers": FieldTable([("k", Field("longstr", b"mentions x-stream-offset"))])},
    {
        "content_type": "c",
        "content_encoding": "e",
        "headers": HEADERS,
        "delivery_mode": 2,
        "priority": 1,
        "correlation_id": "c",
        "reply_to": "r",
        "expiration": "1000",
        "message_id": "m",
        "timestamp": 1,
        "type": "t",
        "user_id": "guest",
        "app_id": "a",
    },
]


def general(props: bytes, offset: int) -> bytes:
    """The general path: decode the headers, replace the offset header, encode everything again."""
    msg = StoredMessage("", "k", props, b"")
    headers = msg.headers() or FieldTable()
    table = FieldTable(
        [*((k, f) for k, f in headers if k != OFFSET_HEADER), (OFFSET_HEADER, Field("long", offset))]
    )
    return P.rewrite(props, {"headers": table})


@pytest.mark.parametrize("values", CASES, ids=[",".join(c) or "none" for c in CASES])
@pytest.mark.parametrize("offset", [0, 1, 2**40, 2**63 - 1])
def test_the_delivered_offset_header_matches_the_general_rewrite(values: dict[str, Any], offset: int) -> None:
    props = P.encode(values)
    got = delivered_message(StoredMessage("", "k", props, b"body"), offset)
    assert got.props == general(props, offset)
    assert got.body == b"body"
    headers = got.headers()
    assert headers is not None and headers.get(OFFSET_HEADER) == Field("long", offset)


def test_append_header_declines_what_it_cannot_splice_exactly() -> None:
    entry = b"\x01kl" + struct.pack(">q", 1)
    assert P.append_header(b"\x00\x01\x00\x00", b"k", entry) is None  # a continuation flag word
    with_k = P.encode({"headers": FieldTable([("k", Field("long", 5))])})
    assert P.append_header(with_k, b"k", entry) is None  # may already hold the key
    spliced = P.append_header(P.encode({"delivery_mode": 2}), b"k", entry)
    assert spliced == P.encode({"headers": FieldTable([("k", Field("long", 1))]), "delivery_mode": 2})
