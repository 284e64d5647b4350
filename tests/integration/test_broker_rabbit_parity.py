"""Behaviours pinned to RabbitMQ 3.10.8's source (rabbit_reader, rabbit_command_assembler,
rabbit_basic, rabbit_binding), checked on hashbroker alone so they hold without a live oracle."""

from __future__ import annotations

import json
import socket
import struct
import time
from pathlib import Path
from typing import Any

import pika
import pytest

from amqpwire.errors import AmqpError
from broker.entities.message import parse_expiration
from tests.differential.test_broker_protocol import _frame, _method, _port, _read_frame, _ss, open_connection
from tests.differential_support import RABBITMQ_SERVER_PROPERTY_KEYS, pika_channel


def _close_fields(payload: bytes) -> tuple[int, str, int, int]:
    """(reply code, reply text, class id, method id) of a connection.close / channel.close payload."""
    code = struct.unpack_from(">H", payload, 4)[0]
    n = payload[6]
    text = payload[7 : 7 + n].decode()
    class_id, method_id = struct.unpack_from(">HH", payload, 7 + n)
    return code, text, class_id, method_id


def _next_close(sock: socket.socket) -> tuple[int, str, int, int] | None:
    while True:
        frame = _read_frame(sock)
        if frame is None:
            return None
        ftype, _ch, payload = frame
        if ftype == 1 and payload[:4] == b"\x00\x0a\x00\x32":
            return _close_fields(payload)


@pytest.mark.parametrize(
    ("expiration", "text"),
    [
        ("abc", "invalid expiration 'abc': no_integer"),
        (" 5", "invalid expiration ' 5': no_integer"),
        ("1.5", "invalid expiration '1.5': {leftover_string,\".5\"}"),
        ("5 ", "invalid expiration '5 ': {leftover_string,\" \"}"),
        ("-1", "invalid expiration '-1': {value_negative,-1}"),
        (
            "99999999999999999999",
            "invalid expiration '99999999999999999999': {value_too_large,\n"
            + " " * 44
            + "99999999999999999999}",
        ),
    ],
)
def test_invalid_expiration_text(expiration: str, text: str) -> None:
    """string:to_integer + check_expiry, and ~p's wrapping at column 79 (vectors from erl/3.10.8)."""
    with pytest.raises(AmqpError) as info:
        parse_expiration(expiration)
    assert info.value.reply_code == 406
    assert info.value.explanation == text


@pytest.mark.parametrize(("expiration", "ttl"), [("0", 0), ("+5", 5), ("-0", 0), ("007", 7)])
def test_valid_expiration(expiration: str, ttl: int) -> None:
    assert parse_expiration(expiration) == ttl


def test_close_names_the_failing_method(hashbroker: str) -> None:
    """The close's class/method ids are those of the method that failed, even before channel.open."""
    sock = open_connection(_port(hashbroker))
    try:
        sock.sendall(_method(3, 50, 10, b"\x00\x00" + _ss("") + b"\x00" + b"\x00" * 4))
        assert _next_close(sock) == (504, "CHANNEL_ERROR - expected 'channel.open'", 50, 10)
    finally:
        sock.close()


def test_extra_body_bytes_wait_for_more_content(hashbroker: str) -> None:
    """Body past the declared size never completes the content: the next method is 505, 60/40."""
    sock = open_connection(_port(hashbroker))
    try:
        sock.sendall(_method(1, 20, 10, _ss("")))
        _read_frame(sock)
        sock.sendall(
            _method(1, 60, 40, b"\x00\x00" + _ss("") + _ss("x") + b"\x00")
            + _frame(2, 1, struct.pack(">HHQH", 60, 0, 3, 0))
            + _frame(3, 1, b"123456")
            + _method(1, 60, 10, struct.pack(">IHB", 0, 1, 0))
        )
        assert _next_close(sock) == (
            505,
            "UNEXPECTED_FRAME - expected content body, got non content body frame instead",
            60,
            40,
        )
    finally:
        sock.close()


def test_unknown_method_id_closes_silently(hashbroker: str) -> None:
    """Nothing is sent and the socket is reset, as RabbitMQ 3.10.8's crashed reader leaves it
    (observed: a reset, 3 of 3)."""
    sock = open_connection(_port(hashbroker))
    try:
        sock.sendall(_method(0, 60, 999))
        with pytest.raises(ConnectionResetError):
            sock.recv(100)
    finally:
        sock.close()


def test_failed_tune_is_a_delayed_silent_close(hashbroker: str) -> None:
    """rabbit_reader: a tune-ok below frame_max 4096 gets no close, just a reset after 3 s."""
    sock = socket.create_connection(("127.0.0.1", _port(hashbroker)), timeout=6)
    try:
        sock.sendall(b"AMQP\x00\x00\x09\x01")
        _read_frame(sock)
        sock.sendall(
            _method(
                0,
                10,
                11,
                struct.pack(">I", 0)
                + _ss("PLAIN")
                + struct.pack(">I", 12)
                + b"\x00guest\x00guest"
                + _ss("en_US"),
            )
        )
        _read_frame(sock)  # tune
        start = time.monotonic()
        sock.sendall(_method(0, 10, 31, struct.pack(">HIH", 2047, 1024, 0)))
        try:
            data = sock.recv(100)
        except ConnectionResetError:
            data = b""
        assert data == b""
        assert time.monotonic() - start >= 2.5
    finally:
        sock.close()


def test_unbind_of_missing_things_is_ok(hashbroker: str) -> None:
    with pika_channel(hashbroker) as ch:
        q = ch.queue_declare("", exclusive=True).method.queue
        ch.queue_unbind(q, "no-such-exchange", "k")
        ch.queue_unbind("no-such-queue", "amq.direct", "k")
        ch.exchange_unbind("no-such-dest", "no-such-source", "k")
        assert ch.is_open


def test_zero_ttl_goes_to_a_waiting_consumer(hashbroker: str) -> None:
    with pika_channel(hashbroker) as ch:
        q = ch.queue_declare("", exclusive=True, arguments={"x-message-ttl": 0}).method.queue
        ch.basic_publish("", q, b"expires")
        assert ch.basic_get(q, auto_ack=True)[0] is None
        got: list[bytes] = []
        ch.basic_consume(q, lambda _c, _m, _p, body: got.append(body), auto_ack=True)
        ch.basic_publish("", q, b"delivered")
        ch.connection.process_data_events(time_limit=0.3)
        assert got == [b"delivered"]


def test_trace_exchange_is_predeclared_and_internal(hashbroker: str) -> None:
    with pika_channel(hashbroker) as ch:
        ch.exchange_declare("amq.rabbitmq.trace", passive=True)
        ch.exchange_declare("amq.rabbitmq.trace", "topic", durable=True, internal=True)
        with pytest.raises(pika.exceptions.ChannelClosedByBroker) as info:
            ch.exchange_declare("amq.rabbitmq.trace", "topic", durable=True)
        assert info.value.reply_code == 406
        assert "inequivalent arg 'internal'" in info.value.reply_text


_OBSERVATIONS = json.loads((Path(__file__).parents[1] / "data" / "rabbitmq_observations.json").read_text())


@pytest.mark.parametrize("observation", _OBSERVATIONS["redeclare"], ids=lambda o: o["case"])
def test_consistent_hash_redeclare_matches_recorded_rabbitmq(
    hashbroker: str, observation: dict[str, Any]
) -> None:
    """Redeclaring an x-consistent-hash exchange: RabbitMQ 3.10.8's recorded outcome and text.

    'other type' pins the exchange type printed as an Erlang atom with '~tp' (''x-consistent-hash'');
    the Java client differential (tests/clients/test_clients_java.py) found it printed once quoted."""
    name = "hashbroker.probe.chx.redeclare"
    with pika_channel(hashbroker) as ch:
        ch.exchange_declare(name, "x-consistent-hash", arguments=observation["original_arguments"])
        try:
            ch.exchange_declare(
                name,
                observation["type"],
                durable=observation["durable"],
                arguments=observation["arguments"],
            )
            outcome: dict[str, Any] = {"outcome": "ok"}
        except pika.exceptions.ChannelClosedByBroker as exc:
            outcome = {"outcome": "channel_close", "reply_code": exc.reply_code, "reply_text": exc.reply_text}
        expected = {k: observation[k] for k in outcome if k in observation}
        assert outcome == expected


def test_server_properties_have_rabbitmq_keys(hashbroker: str) -> None:
    """connection.start carries RabbitMQ 3.10.8's server-property keys (cluster_name included: the Java
    client exposes the table as is); cluster_name is the local node, as the management API says."""
    conn = pika.BlockingConnection(pika.URLParameters(hashbroker))
    try:
        props = conn._impl.server_properties
    finally:
        conn.close()
    assert sorted(props) == RABBITMQ_SERVER_PROPERTY_KEYS
    assert props["cluster_name"] == "rabbit@localhost"
