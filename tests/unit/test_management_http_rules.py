"""The management server's request rules, driven with bytes through h11 (no socket, no broker)."""

from __future__ import annotations

import h11
import pytest

from broker.management.api import acceptable_content_type, split_path
from broker.management.http import Request, declared_length, error_bytes, request_from_head


def head_of(raw: bytes) -> h11.Request | int:
    """The request head h11 parses from `raw`, or the status it refuses it with."""
    conn = h11.Connection(h11.SERVER)
    conn.receive_data(raw)
    try:
        event = conn.next_event()
    except h11.RemoteProtocolError as exc:
        return exc.error_status_hint
    assert isinstance(event, h11.Request)
    return event


@pytest.mark.parametrize(
    "lengths",
    [[b"2", b"5"], [b"1_0"], [b"-1"], [b"0x10"], [b" 12abc"], [b"2, 3"]],
)
def test_conflicting_or_non_numeric_content_length_is_400(lengths: list[bytes]) -> None:
    raw = b"PUT /api/vhosts/v HTTP/1.1\r\nhost: x\r\n"
    raw += b"".join(b"content-length: " + n + b"\r\n" for n in lengths)
    assert head_of(raw + b"\r\n{}") == 400


def test_a_valid_content_length_is_read_as_a_number() -> None:
    event = head_of(b"PUT /api/vhosts/v HTTP/1.1\r\nhost: x\r\ncontent-length: 10\r\n\r\n")
    assert not isinstance(event, int)
    req = request_from_head(event, "127.0.0.1")
    assert declared_length(req) == 10
    assert (req.method, req.raw_path, req.headers["content-length"]) == ("PUT", "/api/vhosts/v", "10")


def test_the_path_keeps_percent_encoded_slashes_inside_one_segment() -> None:
    event = head_of(b"GET /api/queues/%2F/a%2Fb?columns=name HTTP/1.1\r\nhost: x\r\n\r\n")
    assert not isinstance(event, int)
    req = request_from_head(event, "")
    assert split_path(req.raw_path) == ["api", "queues", "/", "a/b"]
    assert req.query == {"columns": ["name"]}


def test_malformed_heads_are_400() -> None:
    assert head_of(b"GET /api/overview HTTP/1.1\r\nno colon here\r\n\r\n") == 400
    assert head_of(b"GET /api/overview HTTP/1.1\r\nhost: x\r\nbad name: y\r\n\r\n") == 400


def test_an_oversized_head_is_refused() -> None:
    conn = h11.Connection(h11.SERVER, max_incomplete_event_size=1024)
    conn.receive_data(b"GET /api/overview HTTP/1.1\r\nx-filler: " + b"a" * 2048)
    with pytest.raises(h11.RemoteProtocolError) as info:
        conn.next_event()
    assert info.value.error_status_hint == 431


def test_error_answers_have_no_body_and_close() -> None:
    assert error_bytes(400) == b"HTTP/1.1 400 Bad Request\r\nconnection: close\r\ncontent-length: 0\r\n\r\n"


def _req(content_type: str | None) -> Request:
    headers = {} if content_type is None else {"content-type": content_type}
    return Request("POST", "/api/definitions", {}, headers, b"", "")


@pytest.mark.parametrize(
    ("content_type", "definitions", "others"),
    [  # observed on RabbitMQ 3.10.8: 415 where False
        (None, False, True),
        ("application/json", True, True),
        ("application/json;charset=utf-8", True, True),
        ("Application/JSON", True, True),
        ("multipart/form-data; boundary=x", True, True),
        ("text/plain", False, True),
        ("application/x-www-form-urlencoded", False, True),
        ("text/json", False, True),
        ("garbage", False, False),
        ("x-www-form-urlencoded", False, False),
    ],
)
def test_content_types_json_endpoints_accept(
    content_type: str | None, definitions: bool, others: bool
) -> None:
    assert acceptable_content_type(_req(content_type), "definitions") is definitions
    assert acceptable_content_type(_req(content_type), "queues") is others
