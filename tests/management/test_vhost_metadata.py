"""A vhost's description and tags, as `PUT /api/vhosts/{name}` set them, are shown and kept across a
restart, in the fields where RabbitMQ 3.10.8 shows them."""

from __future__ import annotations

from pathlib import Path

from broker.embedded import BrokerThread
from tests.management_support import call


def shown(base: str, name: str) -> tuple[str, list[str], dict[str, object]]:
    status, body = call(base, "GET", f"/api/vhosts/{name}")
    assert status == 200
    return body["description"], body["tags"], body["metadata"]


def test_description_and_tags_are_shown_and_survive_a_restart(tmp_path: Path) -> None:
    for round_ in range(2):
        with BrokerThread(port=0, management_port=0, data_dir=str(tmp_path)) as b:
            base = f"http://127.0.0.1:{b.broker.management.port}"
            if round_ == 0:
                body = {"description": "orders of the shop", "tags": "eu,prod"}
                assert call(base, "PUT", "/api/vhosts/shop", body)[0] == 201
            description, tags, metadata = shown(base, "shop")
            assert (description, tags) == ("orders of the shop", ["eu", "prod"])
            assert metadata == {"description": "orders of the shop", "tags": ["eu", "prod"]}
            assert shown(base, "%2F")[0] == "Default virtual host"
