"""A test module written for testcontainers' RabbitMqContainer, run against the drop-in.

Everything below the import is what a testcontainers user writes (the import is the only change):
the container's CLI through `exec`, its log through `get_logs` and testcontainers' own log wait
helpers, and pika through `get_connection_params`.
"""

from __future__ import annotations

import re

import pika
import pytest
from testcontainers.core.wait_strategies import LogMessageWaitStrategy

from broker.testing import RabbitMqContainer  # was: from testcontainers.rabbitmq import RabbitMqContainer


@pytest.fixture(scope="module")
def rabbitmq():
    container = RabbitMqContainer(
        "rabbitmq:3.10.8-management", username="app", password="s3cret", vhost="shop"
    )
    container.waiting_for(LogMessageWaitStrategy(re.compile(r"Server startup complete")))
    with container:
        yield container


def test_plugins_are_enabled_through_the_container_cli(rabbitmq: RabbitMqContainer) -> None:
    result = rabbitmq.exec("rabbitmq-plugins enable rabbitmq_consistent_hash_exchange")
    assert result.exit_code == 0, result.output
    listing = rabbitmq.exec(["rabbitmq-plugins", "list"]).output.decode()
    assert re.search(r"^\[E\*\] rabbitmq_consistent_hash_exchange$", listing, re.M)


def test_rabbitmqctl_sees_what_pika_did(rabbitmq: RabbitMqContainer) -> None:
    connection = pika.BlockingConnection(rabbitmq.get_connection_params())
    channel = connection.channel()
    channel.confirm_delivery()
    channel.queue_declare("orders")
    for n in range(3):
        channel.basic_publish("", "orders", f"order {n}".encode())
    exit_code, output = rabbitmq.exec("rabbitmqctl list_queues -p shop name messages")
    assert exit_code == 0
    assert output.decode().splitlines()[-2:] == ["name\tmessages", "orders\t3"]
    exit_code, output = rabbitmq.exec(["rabbitmqctl", "purge_queue", "-p", "shop", "orders"])
    assert exit_code == 0, output
    assert channel.queue_declare("orders", passive=True).method.message_count == 0
    connection.close()


def test_rabbitmqctl_manages_users(rabbitmq: RabbitMqContainer) -> None:
    assert rabbitmq.exec("rabbitmqctl add_user reader pw").exit_code == 0
    assert (
        rabbitmq.exec(["rabbitmqctl", "set_permissions", "-p", "shop", "reader", "", "", ".*"]).exit_code == 0
    )
    params = rabbitmq.get_connection_params()
    params.credentials = pika.PlainCredentials("reader", "pw")
    connection = pika.BlockingConnection(params)
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as refused:
        connection.channel().queue_declare("not-allowed")
    assert refused.value.reply_code == 403
    connection.close()
    exit_code, output = rabbitmq.exec("rabbitmqctl delete_user nobody")
    assert exit_code != 0 and b"nobody" in output


def test_logs_and_diagnostics(rabbitmq: RabbitMqContainer) -> None:
    stdout, stderr = rabbitmq.get_logs()
    assert b"Server startup complete" in stdout and stderr == b""
    assert re.search(rb"listening on 127\.0\.0\.1:\d+", stdout)
    assert rabbitmq.exec("rabbitmq-diagnostics ping").output.endswith(b"Ping succeeded\n")
    assert rabbitmq.exec("rabbitmq-diagnostics check_local_alarms").exit_code == 0
    assert rabbitmq.get_wrapped_container().status == "running"


def test_commands_the_emulator_cannot_run_say_so(rabbitmq: RabbitMqContainer) -> None:
    exit_code, output = rabbitmq.exec("cat /etc/rabbitmq/rabbitmq.conf")
    assert exit_code == 126 and b"only rabbitmqctl, rabbitmq-diagnostics and rabbitmq-plugins" in output
    exit_code, output = rabbitmq.exec("rabbitmq-plugins enable rabbitmq_federation")
    assert exit_code == 70 and b"rabbitmq_federation is not emulated" in output


def test_a_volume_on_the_data_path_keeps_durable_state(tmp_path) -> None:
    for round_ in range(2):
        with RabbitMqContainer("rabbitmq:3.10").with_volume_mapping(tmp_path, "/var/lib/rabbitmq", "rw") as r:
            connection = pika.BlockingConnection(r.get_connection_params())
            channel = connection.channel()
            if round_ == 0:
                channel.queue_declare("kept", durable=True)
                channel.confirm_delivery()
                channel.basic_publish("", "kept", b"m", pika.BasicProperties(delivery_mode=2))
            else:
                assert channel.queue_declare("kept", passive=True).method.message_count == 1
            connection.close()
