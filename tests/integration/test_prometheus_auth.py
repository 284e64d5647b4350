"""rabbitmq_auth_attempts_{,succeeded_,failed_}total count logins by protocol as 3.10.8 does.

rabbit_reader (amqp091), rabbit_stream_reader (stream) and the management plugin's is_authorized
(http) count one attempt per login: succeeded when the user may in (for HTTP: once its tags and
the resource's rule are checked too), failed otherwise; an HTTP request with no credentials is not
an attempt. The collector labels a series `protocol` only for amqp091, amqp10, mqtt and http, so the
stream logins are the unlabelled series (as the live node's /metrics shows: `rabbitmq_auth_attempts
_total 698` next to `{protocol="http"}` and `{protocol="amqp091"}`). The by-source families stay
without series (3.10.8's track_auth_attempt_source is off by default).
"""

from __future__ import annotations

import asyncio
import base64
import urllib.error
import urllib.request

import pika
import pytest
from pika.exceptions import ProbableAuthenticationError

from broker.embedded import BrokerThread
from broker.streamproto import frames as F
from tests.integration.test_prometheus import families, get
from tests.stream_raw import RawStream


def http_get(port: int, path: str, user: str | None) -> int:
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}")
    if user is not None:
        req.add_header("Authorization", "Basic " + base64.b64encode(user.encode()).decode())
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as err:
        return err.code


async def stream_login(port: int, password: str) -> int:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    c = RawStream(reader, writer)
    await c.request(F.PeerProperties(c.next(), {"product": "hashbroker-test"}))
    await c.request(F.SaslHandshake(c.next()))
    answer = await c.request(F.SaslAuthenticate(c.next(), "PLAIN", f"\0guest\0{password}".encode()))
    await c.close()
    return int(getattr(answer, "code", -1))


def series(text: str, family: str) -> dict[str, float]:
    return {s.labels.get("protocol", ""): s.value for s in families(text)[family]["samples"]}


def test_auth_attempts_by_protocol() -> None:
    with BrokerThread(
        host="127.0.0.1",
        port=0,
        management_port=0,
        stream_port=0,
        prometheus_port=0,
        plugins=["rabbitmq_management", "rabbitmq_stream", "rabbitmq_prometheus"],
    ) as b:
        base = f"http://127.0.0.1:{b.broker.prometheus.port}"
        empty = families(get(base + "/metrics"))
        assert empty["rabbitmq_auth_attempts_total"]["samples"] == []  # no login yet: no series
        pika.BlockingConnection(pika.URLParameters(b.url)).close()
        with pytest.raises(ProbableAuthenticationError):
            pika.BlockingConnection(pika.URLParameters(b.url.replace("guest:guest", "guest:wrong")))
        mgmt = b.broker.management.port
        b.broker.auth.add_user("plain-user", "pw")
        assert http_get(mgmt, "/api/overview", "guest:guest") == 200
        assert http_get(mgmt, "/api/overview", "guest:wrong") == 401
        assert http_get(mgmt, "/api/overview", "plain-user:pw") == 401  # not a management user
        assert http_get(mgmt, "/api/users", "guest:guest") == 200
        assert http_get(mgmt, "/api/overview", None) == 401  # no credentials: not an attempt
        assert http_get(mgmt, "/api/nosuchpath", "guest:guest") == 404  # routed first: not one either
        stream_port = b.broker.stream_server.port
        assert asyncio.run(stream_login(stream_port, "guest")) == 1
        assert asyncio.run(stream_login(stream_port, "wrong")) == 8
        assert asyncio.run(stream_login(stream_port, "guest")) == 1
        for path, prefix in (
            ("/metrics", "rabbitmq_"),
            ("/metrics/per-object", "rabbitmq_"),
            ("/metrics/detailed?family=auth_attempt_metrics", "rabbitmq_detailed_"),
        ):
            text = get(base + path)
            assert series(text, f"{prefix}auth_attempts_total") == {"amqp091": 2, "http": 4, "": 3}, path
            assert series(text, f"{prefix}auth_attempts_succeeded_total") == {"amqp091": 1, "http": 2, "": 2}
            assert series(text, f"{prefix}auth_attempts_failed_total") == {"amqp091": 1, "http": 2, "": 1}
        detailed = families(get(base + "/metrics/detailed?family=auth_attempt_detailed_metrics"))
        assert detailed["rabbitmq_detailed_auth_attempts_detailed_total"]["samples"] == []
