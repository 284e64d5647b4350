"""x-random, x-recent-history and x-jms-topic in a running broker: switched off they answer as
RabbitMQ 3.10.8 answers a type it does not know (the recorded observation), and what a restart
keeps is what the plugins keep."""

from __future__ import annotations

import json
from pathlib import Path

import pika
import pytest
from pika.exceptions import ConnectionClosedByBroker

from broker.embedded import BrokerThread
from tests.differential_support import bodies as _bodies
from tests.xtypes_support import XTYPE_PLUGINS

RECORDING = Path(__file__).resolve().parent.parent / "data" / "plugin_xtypes_observations.json"
UNKNOWN = "x-hb-xtypes-unknown"


@pytest.mark.parametrize("type_name", ["x-random", "x-recent-history", "x-jms-topic"])
def test_a_disabled_type_answers_as_an_unknown_one(type_name: str) -> None:
    recorded = json.loads(RECORDING.read_text())["unknown_type"]["connection_close"]
    expected = (recorded[0], recorded[1].replace(UNKNOWN, type_name))
    with BrokerThread(host="127.0.0.1", port=0) as b:  # the default plugins: these three are off
        conn = pika.BlockingConnection(pika.URLParameters(b.url))
        with pytest.raises(ConnectionClosedByBroker) as err:
            conn.channel().exchange_declare("x", type_name)
        assert (err.value.reply_code, err.value.reply_text) == expected


def test_a_restart_forgets_the_history_and_keeps_selectors(tmp_path: Path) -> None:
    """The recent-history plugin keeps its history in a RAM-only table: a restart empties it (the
    durable exchange and its bindings stay). JMS selectors are rebuilt from the kept bindings."""
    jms_selector = {"rjms_erlang_selector": '{\'=\', {ident, <<"colour">>}, <<"blue">>}.'}
    with BrokerThread(host="127.0.0.1", port=0, data_dir=str(tmp_path), plugins=XTYPE_PLUGINS) as b:
        conn = pika.BlockingConnection(pika.URLParameters(b.url))
        ch = conn.channel()
        ch.confirm_delivery()
        ch.exchange_declare("rh", "x-recent-history", durable=True)
        ch.exchange_declare("jms", "x-jms-topic", durable=True)
        for q in ("kept", "later", "blue"):
            ch.queue_declare(q, durable=True)
        ch.queue_bind("kept", "rh", "")
        ch.queue_bind("blue", "jms", "k", arguments=jms_selector)
        for i in range(3):
            ch.basic_publish("rh", "", f"m{i}".encode(), pika.BasicProperties(delivery_mode=2))
        assert _bodies(ch, "kept") == ["m0", "m1", "m2"]
        ch.queue_bind("later", "rh", "before-restart")
        assert _bodies(ch, "later") == ["m0", "m1", "m2"]
        conn.close()
    with BrokerThread(host="127.0.0.1", port=0, data_dir=str(tmp_path), plugins=XTYPE_PLUGINS) as b:
        conn = pika.BlockingConnection(pika.URLParameters(b.url))
        ch = conn.channel()
        ch.confirm_delivery()
        ch.exchange_declare("rh", "x-recent-history", passive=True)
        ch.queue_bind("later", "rh", "after-restart")
        assert _bodies(ch, "later") == []
        ch.basic_publish("rh", "", b"new")
        assert _bodies(ch, "kept") == ["new"]
        assert _bodies(ch, "later") == ["new"]  # one copy: both bindings are to the same queue
        for colour in ("red", "blue"):
            ch.basic_publish("jms", "x", colour.encode(), pika.BasicProperties(headers={"colour": colour}))
        assert _bodies(ch, "blue") == ["blue"]
        conn.close()


def _overview_types(management_url: str) -> dict[str, str]:
    import base64
    import urllib.request

    request = urllib.request.Request(
        f"{management_url}/api/overview",
        headers={"Authorization": "Basic " + base64.b64encode(b"guest:guest").decode()},
    )
    with urllib.request.urlopen(request, timeout=10) as resp:
        return {t["name"]: t["description"] for t in json.load(resp)["exchange_types"]}


def test_the_management_api_lists_a_type_only_while_its_plugin_is_on() -> None:
    # the descriptions RabbitMQ 3.10.8 lists with the plugins on (GET /api/overview, observed)
    observed = {
        "x-jms-topic": "JMS selector exchange",
        "x-random": "Randomly picks a binding (queue) to route via (to).",
        "x-recent-history": "Recent History Exchange.",
    }
    with BrokerThread(host="127.0.0.1", port=0, management_port=0) as b:
        assert not set(observed) & set(_overview_types(str(b.broker.management.url)))
    with BrokerThread(host="127.0.0.1", port=0, management_port=0, plugins=XTYPE_PLUGINS) as b:
        listed = _overview_types(str(b.broker.management.url))
        assert {name: listed.get(name) for name in observed} == observed
        assert "x-consistent-hash" not in listed  # its plugin is off here
