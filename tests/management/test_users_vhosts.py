"""Users, vhosts, permissions: ctl/API create them, pika sees RabbitMQ's refusals, a data dir keeps them."""

from __future__ import annotations

import shutil
import subprocess
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pika
import pytest

from broker.cli import ctl
from broker.embedded import BrokerThread
from tests import conftest
from tests.conftest import rabbitmq_reachable
from tests.management_support import call


def api(base: str, method: str, path: str, body: Any = None, auth: str = "guest:guest") -> tuple[int, Any]:
    return call(base + "/api", method, path, body, auth)


def outcomes(port: int, vhost: str, user: str, password: str) -> list[str]:
    """The same operations as the live check: each one's result or (code) text."""
    params = pika.ConnectionParameters("127.0.0.1", port, vhost, pika.PlainCredentials(user, password))
    ops: list[Callable[[Any], Any]] = [
        lambda ch: ch.queue_declare("q"),
        lambda ch: ch.queue_declare("cq"),
        lambda ch: ch.exchange_declare("x"),
        lambda ch: ch.exchange_declare("cx"),
        lambda ch: ch.queue_bind("cq", "amq.direct", "k"),
        lambda ch: ch.basic_get("cq"),
        lambda ch: ch.queue_purge("cq"),
        lambda ch: ch.queue_declare("q", passive=True),
        lambda ch: ch.exchange_delete("cx"),
        lambda ch: ch.queue_delete("cq"),
    ]
    results = []
    conn = pika.BlockingConnection(params)
    try:
        for op in ops:
            ch = conn.channel()
            try:
                op(ch)
                results.append("ok")
                ch.close()
            except pika.exceptions.ChannelClosedByBroker as exc:
                results.append(f"{exc.reply_code} {exc.reply_text}")
    finally:
        conn.close()
    return results


def refused_open(port: int, vhost: str, user: str, password: str) -> str:
    params = pika.ConnectionParameters("127.0.0.1", port, vhost, pika.PlainCredentials(user, password))
    with pytest.raises(pika.exceptions.AMQPConnectionError) as info:
        pika.BlockingConnection(params)
    return str(info.value)


@pytest.fixture
def live() -> Iterator[tuple[str, str]]:
    if shutil.which("rabbitmqctl") is None or not rabbitmq_reachable():
        pytest.skip("rabbitmqctl or the reference RabbitMQ is not available")
    vh, user = f"hbuv-{uuid.uuid4().hex[:6]}", f"hbu-{uuid.uuid4().hex[:6]}"
    for cmd in (["add_vhost", vh], ["add_user", user, "p"]):
        subprocess.run(["rabbitmqctl", *cmd], check=True, capture_output=True)
    try:
        yield vh, user
    finally:
        subprocess.run(["rabbitmqctl", "delete_vhost", vh], capture_output=True)
        subprocess.run(["rabbitmqctl", "delete_user", user], capture_output=True)


def test_permissions_match_rabbitmq(live: tuple[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    vh, user = live
    with BrokerThread(host="127.0.0.1", port=0, management_port=0) as b:
        url = f"http://127.0.0.1:{b.broker.management.port}"
        for args in (["add_vhost", vh], ["add_user", user, "p"]):
            assert ctl.run(["--url", url, *args]) == 0
        # no permissions yet: 530 NOT_ALLOWED, as RabbitMQ; an unknown vhost too
        for v in (vh, "no-such-vhost"):
            ours = refused_open(b.port, v, user, "p").replace(v, "V")
            theirs = refused_open(5672, v, user, "p").replace(v, "V")
            assert ours == theirs
        assert "NOT_ALLOWED - access to vhost" in ours.replace("V", "") or "not found" in ours
        perms = ["^c.*", "^(c|w).*", "^r.*"]
        subprocess.run(
            ["rabbitmqctl", "set_permissions", "-p", vh, user, *perms], check=True, capture_output=True
        )
        assert ctl.run(["--url", url, "-p", vh, "set_permissions", user, *perms]) == 0
        ours_ops = outcomes(b.port, vh, user, "p")
        assert ours_ops == outcomes(5672, vh, user, "p")
        assert (
            f"403 ACCESS_REFUSED - access to queue 'q' in vhost '{vh}' refused for user '{user}'" in ours_ops
        )
        # list verbs print what rabbitmqctl prints
        capsys.readouterr()
        ctl.run(["--url", url, "-p", vh, "list_permissions"])
        ours_out = capsys.readouterr().out
        theirs_out = subprocess.run(
            ["rabbitmqctl", "-p", vh, "list_permissions"], capture_output=True, text=True
        ).stdout
        assert ours_out == theirs_out
        # wrong password: 403 at login; deleting the vhost closes its connections with 320
        assert "ACCESS_REFUSED" in refused_open(b.port, vh, user, "wrong")
        conn = pika.BlockingConnection(
            pika.ConnectionParameters("127.0.0.1", b.port, vh, pika.PlainCredentials(user, "p"))
        )
        assert ctl.run(["--url", url, "delete_vhost", vh]) == 0
        with pytest.raises(pika.exceptions.ConnectionClosedByBroker) as closed:
            conn.process_data_events(1)
            conn.channel()
        assert (closed.value.reply_code, closed.value.reply_text) == (
            320,
            f"CONNECTION_FORCED - vhost '{vh}' is deleted",
        )
        assert ctl.run(["--url", url, "delete_user", user]) == 0
        assert ctl.run(["--url", url, "delete_user", user]) == ctl.EX_NOUSER


def test_api_users_vhosts_permissions_and_restart(tmp_path: Any) -> None:
    data = str(tmp_path / "data")
    with BrokerThread(host="127.0.0.1", port=0, management_port=0, data_dir=data) as b:
        url = f"http://127.0.0.1:{b.broker.management.port}"
        assert api(url, "PUT", "/vhosts/v2")[0] == 201
        assert api(url, "PUT", "/vhosts/v2")[0] == 204
        assert api(url, "PUT", "/users/u", {"password": "p", "tags": "management,foo"})[0] == 201
        assert api(url, "GET", "/users/u")[1]["tags"] == ["management", "foo"]
        assert api(url, "PUT", "/permissions/v2/u", {"configure": ".*"}) == (
            400,
            {"error": "bad_request", "reason": "[{key_missing,write},{key_missing,read}]"},
        )
        assert api(url, "PUT", "/permissions/v2/u", {"configure": ".*", "write": ".*", "read": ""})[0] == 201
        assert (
            api(url, "PUT", "/permissions/nope/u", {"configure": ".*", "write": ".*", "read": ""})[0] == 400
        )
        c = pika.BlockingConnection(pika.URLParameters(f"amqp://u:p@127.0.0.1:{b.port}/v2"))
        ch = c.channel()
        ch.queue_declare("dq", durable=True)
        with pytest.raises(pika.exceptions.ChannelClosedByBroker):
            c.channel().basic_get("dq")
        c.close()
    with BrokerThread(host="127.0.0.1", port=0, management_port=0, data_dir=data) as b:
        url = f"http://127.0.0.1:{b.broker.management.port}"
        assert api(url, "GET", "/permissions/v2/u")[1] == {
            "user": "u",
            "vhost": "v2",
            "configure": ".*",
            "write": ".*",
            "read": "",
        }
        c = pika.BlockingConnection(pika.URLParameters(f"amqp://u:p@127.0.0.1:{b.port}/v2"))
        assert c.channel().queue_declare("dq", passive=True).method.queue == "dq"
        c.close()
        assert api(url, "PUT", "/users/u", {"password": "p2"}) == (
            400,
            {"error": "bad_request", "reason": "tags_not_present"},
        )
        assert api(url, "PUT", "/users/u", {"password": "p2", "tags": ""})[0] == 204
        assert api(url, "DELETE", "/vhosts/v2")[0] == 204
        assert api(url, "DELETE", "/vhosts/v2")[0] == 404
    with BrokerThread(host="127.0.0.1", port=0, management_port=0, data_dir=data) as b:
        url = f"http://127.0.0.1:{b.broker.management.port}"
        assert api(url, "GET", "/vhosts/v2")[0] == 404
        assert api(url, "GET", "/permissions")[1] == [
            {"user": "guest", "vhost": "/", "configure": ".*", "write": ".*", "read": ".*"}
        ]
        assert "ACCESS_REFUSED" in refused_open(b.port, "/", "u", "p")


def test_definitions_import_users_vhosts_permissions() -> None:
    with BrokerThread(host="127.0.0.1", port=0, management_port=0) as b:
        url = f"http://127.0.0.1:{b.broker.management.port}"
        from broker.entities.users import hash_password

        doc = {
            "users": [
                {
                    "name": "imp",
                    "password_hash": hash_password("pw"),
                    "hashing_algorithm": "rabbit_password_hashing_sha256",
                    "tags": ["management"],
                }
            ],
            "vhosts": [{"name": "iv"}],
            "permissions": [{"user": "imp", "vhost": "iv", "configure": ".*", "write": ".*", "read": ".*"}],
            "queues": [{"name": "iq", "vhost": "iv", "durable": True, "auto_delete": False, "arguments": {}}],
        }
        assert api(url, "POST", "/definitions", doc)[0] == 204
        c = pika.BlockingConnection(pika.URLParameters(f"amqp://imp:pw@127.0.0.1:{b.port}/iv"))
        assert c.channel().queue_declare("iq", passive=True).method.queue == "iq"
        c.close()
        exported = api(url, "GET", "/definitions")[1]
        assert {"user": "imp", "vhost": "iv", "configure": ".*", "write": ".*", "read": ".*"} in exported[
            "permissions"
        ]
        assert any(
            u["name"] == "imp" and u["password_hash"] == doc["users"][0]["password_hash"]
            for u in exported["users"]
        )


@pytest.mark.live
def test_user_puts_replace_the_whole_user_as_rabbitmq() -> None:
    """A PUT needs tags; without a password it leaves the user unable to log in; blank passwords
    never log in (rabbit_auth_backend_internal)."""
    if not rabbitmq_reachable():
        pytest.skip("the reference RabbitMQ is not available")
    user = f"hbput-{uuid.uuid4().hex[:6]}"
    steps: list[tuple[str, Any, str]] = [  # (method, body, password to try whoami with afterwards)
        ("PUT", {"password": "p"}, "p"),
        ("PUT", {"password": "p", "tags": "management"}, "p"),
        ("PUT", {"tags": "monitoring"}, "p"),
        ("PUT", {"password": "", "tags": "monitoring"}, ""),
        ("PUT", {"password": "q", "tags": ["monitoring", "management"]}, "q"),
        ("PUT", {"tags": "a, b ,,c"}, "q"),
    ]

    def run(url: str) -> list[tuple[int, Any, int, Any]]:
        out = []
        try:
            for method, body, password in steps:
                status, got = api(url, method, f"/users/{user}", body)
                who = api(url, "GET", "/whoami", auth=f"{user}:{password}")
                out.append((status, got, *who))
            shown = api(url, "GET", f"/users/{user}")[1]
            out.append((0, shown["tags"], 0, shown["password_hash"] == ""))
        finally:
            api(url, "DELETE", f"/users/{user}")
        return out

    with BrokerThread(host="127.0.0.1", port=0, management_port=0) as b:
        ours = run(f"http://127.0.0.1:{b.broker.management.port}")
    assert ours == run(conftest.RABBITMQ_API)
