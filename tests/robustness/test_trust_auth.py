"""SASL edge cases as RabbitMQ 3.10.8 answers them (observed live, kept as a differential test):
PLAIN with an authorization identity (another user's or one's own) and AMQPLAIN with LOGIN or
PASSWORD of the wrong type or missing are handshake syntax errors: nothing is sent, the socket is
reset after rabbit_reader's 3 s silent-close delay. A well-formed login gets connection.tune."""

from __future__ import annotations

import socket
import struct
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import urlsplit

from pamqp import encode, frame, header

from amqpwire.fields import Field, FieldTable
from broker.embedded import BrokerThread

GUEST = Field("longstr", b"guest")


def amqplain(**fields: Field) -> bytes:
    return FieldTable(list(fields.items())).encode()


CASES: dict[str, tuple[str, bytes]] = {
    "plain": ("PLAIN", b"\0guest\0guest"),
    "plain_authzid_other": ("PLAIN", b"other\0guest\0guest"),
    "plain_authzid_self": ("PLAIN", b"guest\0guest\0guest"),
    "plain_extra_nul": ("PLAIN", b"\0guest\0guest\0x"),
    "amqplain": ("AMQPLAIN", amqplain(LOGIN=GUEST, PASSWORD=GUEST)),
    "amqplain_login_table": (
        "AMQPLAIN",
        amqplain(LOGIN=Field("table", FieldTable([("LOGIN", GUEST)])), PASSWORD=GUEST),
    ),
    "amqplain_login_int": ("AMQPLAIN", amqplain(LOGIN=Field("signedint", 5), PASSWORD=GUEST)),
    "amqplain_no_password": ("AMQPLAIN", amqplain(LOGIN=GUEST)),
}


def observe(port: int, mechanism: str, response: bytes) -> tuple[Any, ...]:
    """What the server does after start-ok: ("tune",) or how the socket ends and after how long."""
    with socket.create_connection(("127.0.0.1", port), timeout=8) as s:
        s.sendall(frame.marshal(header.ProtocolHeader(), 0))
        buf = b""
        while True:  # connection.start
            buf += s.recv(65536)
            if len(buf) >= 7 and len(buf) >= 8 + struct.unpack_from(">I", buf, 3)[0]:
                break
        props = {"product": "hashbroker-tests", "capabilities": {"authentication_failure_close": True}}
        payload = struct.pack(">HH", 10, 11) + encode.field_table(props) + encode.short_string(mechanism)
        payload += struct.pack(">I", len(response)) + response + encode.short_string("en_US")
        s.sendall(struct.pack(">BHI", 1, 0, len(payload)) + payload + b"\xce")
        t0 = time.monotonic()
        try:
            data = s.recv(65536)
        except ConnectionResetError:
            return ("reset", round(time.monotonic() - t0))
        if data[:1] == b"\x01" and data[7:11] == b"\x00\x0a\x00\x1e":
            return ("tune",)
        return ("eof" if not data else "frame", round(time.monotonic() - t0))


def observe_all(port: int) -> dict[str, tuple[Any, ...]]:
    with ThreadPoolExecutor(len(CASES)) as pool:
        futures = {name: pool.submit(observe, port, *case) for name, case in CASES.items()}
        return {name: f.result() for name, f in futures.items()}


EXPECTED = {
    "plain": ("tune",),
    "amqplain": ("tune",),
    **{name: ("reset", 3) for name in CASES if name not in ("plain", "amqplain")},
}


def test_sasl_edges_on_hashbroker() -> None:
    with BrokerThread(port=0) as b:
        assert observe_all(b.port) == EXPECTED


def test_sasl_edges_on_rabbitmq(rabbitmq_url: str) -> None:
    assert observe_all(urlsplit(rabbitmq_url).port or 5672) == EXPECTED
