"""A JSON body with a lone surrogate escape (`"\\ud800"`): RabbitMQ 3.10.8 decodes it as U+FFFD
(observed: a definitions import of queue "h-fuzz-\\ud800" lists it as "h-fuzz-\ufffd", a queue
argument key and value likewise). Kept as a lone surrogate, the write is a 500 or, through
definitions, creates a queue that makes every later queue listing a 500."""

from __future__ import annotations

import base64
import urllib.request
from collections.abc import Iterator

import pytest

from broker.embedded import BrokerThread
from broker.management.http import decode_json
from tests.management_support import call, mgmt_base


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    with BrokerThread(port=0, management_port=0) as bt:
        yield mgmt_base(bt)


def _raw(base: str, method: str, path: str, body: bytes) -> int:
    req = urllib.request.Request(base + path, data=body, method=method)
    req.add_header("authorization", "Basic " + base64.b64encode(b"guest:guest").decode())
    req.add_header("content-type", "application/json")
    with urllib.request.urlopen(req, timeout=15) as resp:
        return int(resp.status)


def test_lone_surrogates_decode_as_replacement_characters() -> None:
    assert decode_json(rb'{"a\ud800": ["x\udc00", "\ud83d\ude00", "\\ud800"]}') == {
        "a\ufffd": ["x\ufffd", "\U0001f600", "\\ud800"]
    }


def test_queue_named_by_definitions_with_a_lone_surrogate_lists(base: str) -> None:
    body = rb'{"queues":[{"name":"robust-\ud800","vhost":"/","durable":false,"auto_delete":false}]}'
    assert _raw(base, "POST", "/api/definitions", body) == 204
    args = rb'{"auto_delete":false,"arguments":{"x-\ud800":"\udc00"}}'
    assert _raw(base, "PUT", "/api/queues/%2F/robust-args", args) == 201
    status, queues = call(base, "GET", "/api/queues/%2F?columns=name,arguments")
    assert status == 200
    named = {q["name"]: q["arguments"] for q in queues}
    assert named["robust-\ufffd"] == {}
    assert named["robust-args"] == {"x-\ufffd": "\ufffd"}
