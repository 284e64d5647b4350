"""`broker.testing.RabbitMqContainer` as a drop-in for testcontainers' RabbitMqContainer.

The first test is written exactly as for testcontainers (only the import differs): non-default
user, password and vhost, the consistent-hash README's topology, 100,000 keys, two containers at
once, and RabbitMQ 3.10.8's recorded per-queue counts.
"""

from __future__ import annotations

import base64
import json
import threading
import time
import urllib.request

import pika
import pytest

from broker.testing import RabbitMqContainer, compat_version  # was: from testcontainers.rabbitmq import ...

# RabbitMQ 3.10.8 with the consistent-hash plugin, queues bound with weights 1, 1, 2, 2 in that
# order, one message per routing key "0".."99999" (the README's first example, recorded live).
EXPECTED = {"q1": 16638, "q2": 16631, "q3": 33441, "q4": 33290}


def _route_100k(container: RabbitMqContainer, results: dict[str, dict[str, int]], name: str) -> None:
    connection = pika.BlockingConnection(container.get_connection_params())
    channel = connection.channel()
    channel.exchange_declare(exchange="e", exchange_type="x-consistent-hash")
    for queue, weight in (("q1", "1"), ("q2", "1"), ("q3", "2"), ("q4", "2")):
        channel.queue_declare(queue)
        channel.queue_bind(queue, "e", routing_key=weight)
    for i in range(100_000):
        channel.basic_publish("e", str(i), b"")
    channel.confirm_delivery()  # a round trip after the last publish: every message is routed
    results[name] = {q: channel.queue_declare(q, passive=True).method.message_count for q in EXPECTED}
    connection.close()


@pytest.mark.slow
def test_testcontainers_style_two_containers_consistent_hash() -> None:
    results: dict[str, dict[str, int]] = {}
    with (
        RabbitMqContainer("rabbitmq:3.10.8", username="app", password="s3cret", vhost="orders") as first,
        RabbitMqContainer("rabbitmq:3.10.8", username="other", password="pw", vhost="vh2") as second,
    ):
        assert first.get_exposed_port(5672) != second.get_exposed_port(5672)
        threads = [
            threading.Thread(target=_route_100k, args=(c, results, n))
            for c, n in ((first, "first"), (second, "second"))
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(300)
    assert results == {"first": EXPECTED, "second": EXPECTED}


def test_only_the_given_user_and_vhost_exist() -> None:
    with RabbitMqContainer(username="app", password="s3cret", vhost="orders") as rabbitmq:
        params = rabbitmq.get_connection_params()
        assert (params.host, params.virtual_host) == ("127.0.0.1", "orders")
        assert params.credentials.username == "app"
        url = rabbitmq.get_connection_url()
        assert url == f"amqp://app:s3cret@127.0.0.1:{rabbitmq.get_exposed_port(5672)}/orders"
        pika.BlockingConnection(pika.URLParameters(url)).close()
        for user, password, vhost in (
            ("guest", "guest", "orders"),
            ("guest", "guest", "/"),
            ("app", "x", "orders"),
        ):
            with pytest.raises(pika.exceptions.ProbableAuthenticationError):
                pika.BlockingConnection(
                    pika.ConnectionParameters(
                        "127.0.0.1",
                        rabbitmq.get_exposed_port(5672),
                        vhost,
                        pika.PlainCredentials(user, password),
                    )
                )
        with pytest.raises(pika.exceptions.ProbableAccessDeniedError):  # "/" does not exist
            pika.BlockingConnection(
                pika.ConnectionParameters(
                    "127.0.0.1", rabbitmq.get_exposed_port(5672), "/", pika.PlainCredentials("app", "s3cret")
                )
            )
        request = urllib.request.Request(
            f"{rabbitmq.get_management_url()}/api/vhosts",
            headers={"Authorization": "Basic " + base64.b64encode(b"app:s3cret").decode()},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            assert [v["name"] for v in json.load(response)] == ["orders"]
    with pytest.raises(RuntimeError, match="not started"):
        rabbitmq.get_exposed_port(5672)


def test_defaults_environment_and_start_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RABBITMQ_DEFAULT_USER", "envuser")
    monkeypatch.setenv("RABBITMQ_DEFAULT_PASS", "envpass")
    started = time.perf_counter()
    with RabbitMqContainer() as rabbitmq:
        elapsed = time.perf_counter() - started
        assert (rabbitmq.username, rabbitmq.password, rabbitmq.vhost) == ("envuser", "envpass", "/")
        connection = pika.BlockingConnection(rabbitmq.get_connection_params())
        channel = connection.channel()
        channel.queue_declare("q")
        channel.basic_publish("", "q", b"hello")
        assert channel.basic_get("q", auto_ack=True)[2] == b"hello"
        connection.close()
    assert elapsed < 5.0


def _unknown_type_reply(image: str) -> int:
    with RabbitMqContainer(image) as rabbitmq:
        connection = pika.BlockingConnection(rabbitmq.get_connection_params())
        try:
            connection.channel().exchange_declare("x", exchange_type="x-no-such-type")
        except (pika.exceptions.ChannelClosedByBroker, pika.exceptions.ConnectionClosedByBroker) as exc:
            return int(exc.args[0])
        finally:
            if connection.is_open:
                connection.close()
    raise AssertionError("the declaration was accepted")


def test_image_tag_picks_the_rabbitmq_version() -> None:
    assert compat_version("rabbitmq:3.10.8") == "3.10.8"
    assert compat_version("rabbitmq:3.13") == "3.13.0"
    assert compat_version("rabbitmq:3.13-management-alpine") == "3.13.0"
    assert compat_version("rabbitmq:4") == compat_version("rabbitmq:4.1.2-management") == "4.3.0"
    # latest (and no tag) is a 4.x release, as Docker Hub's rabbitmq:latest is
    assert compat_version("rabbitmq:latest") == compat_version("rabbitmq") == "4.3.0"
    assert compat_version("registry:5000/rabbitmq") == "4.3.0"
    assert compat_version("docker.io/library/rabbitmq:3") == "3.13.0"  # the newest 3.x
    for other in ("redis:7", "rabbitmq:3.9.29", "rabbitmq:3.12-management", "bitnami/redis:latest"):
        with pytest.raises(ValueError, match=r"hashbroker emulates rabbitmq:3\.10\*"):
            compat_version(other)
    with pytest.raises(ValueError, match="is not a RabbitMQ image"):
        RabbitMqContainer("redis:7")
    # RabbitMQ answers an unknown exchange type with 503 up to 3.13.2 and 406 from 3.13.3
    assert _unknown_type_reply("rabbitmq:3.10.8") == 503
    assert _unknown_type_reply("rabbitmq:4.0") == 406
