"""`queue_counts`: queue depths as a DataFrame, from the management API and/or passive declares.

The management API can list queues (needed for a pattern) and knows unacknowledged counts, but
RabbitMQ refreshes its numbers only every statistics interval (5 s by default), so right after a
publish they lag. A passive `queue.declare` is exact and immediate but only knows ready messages
and consumers. So: names and `messages_unacknowledged` come from the management API when the
broker has one, `messages_ready` and `consumers` always from passive declares, and
`messages = messages_ready + messages_unacknowledged`. The result is therefore the same for
hashbroker (no management API needed) and RabbitMQ.
"""

from __future__ import annotations

import base64
import json
import re
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from spark_bridge.topology import passive_counts
from spark_bridge.wire import AmqpAddress

SCHEMA = "queue string, messages long, messages_ready long, messages_unacknowledged long, consumers long"


@dataclass(frozen=True)
class Management:
    """A management HTTP API verified to belong to the broker behind the AMQP URI."""

    base_url: str
    auth: str

    def get(self, path: str, timeout: float = 5.0) -> Any:
        request = urllib.request.Request(self.base_url.rstrip("/") + path)
        request.add_header("Authorization", f"Basic {self.auth}")
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return json.loads(response.read().decode("utf-8"))


def find_management(uri: str, management_url: str | None = None) -> Management | None:
    """The management API for `uri`, or None when none answers.

    Without `management_url`, RabbitMQ's default http://host:15672 is tried, and accepted only if
    its listeners include the URI's AMQP port: on a machine that runs both RabbitMQ and an
    embedded hashbroker, the RabbitMQ API must not be mistaken for hashbroker's.
    """
    address = AmqpAddress.parse(uri)
    auth = base64.b64encode(f"{address.username}:{address.password}".encode()).decode("ascii")
    explicit = management_url is not None
    api = Management(management_url or f"http://{address.host}:15672", auth)
    try:
        overview = api.get("/api/overview", timeout=2.0)
    except (OSError, urllib.error.URLError, ValueError):
        if explicit:
            raise
        return None
    if not isinstance(overview, dict):
        return None
    listeners = overview.get("listeners")
    if not explicit and isinstance(listeners, list):
        ports = {
            int(item.get("port", -1))
            for item in listeners
            if str(item.get("protocol", "")).startswith("amqp")
        }
        if ports and address.port not in ports:
            return None
    return api


def _select(names: Sequence[Any], queues: str | Sequence[str] | None) -> list[str]:
    """The queues a `queues` argument names: all, a list, or a pattern that *searches* each name
    (unanchored, as RabbitMQ's `use_regex` filters and policy patterns match: use ^ and $ to
    anchor). Names are taken as text whatever JSON type the management API gave them."""
    texts = [str(name) for name in names]
    if queues is None:
        return sorted(texts)
    if isinstance(queues, str):
        pattern = re.compile(queues)
        return sorted(name for name in texts if pattern.search(name))
    return list(queues)


def collect_queue_counts(
    uri: str,
    queues: str | Sequence[str] | None = None,
    *,
    management_url: str | None = None,
) -> list[tuple[str, int | None, int | None, int | None, int | None]]:
    """The rows of `queue_counts`, without Spark (also used by tests and the benchmark)."""
    api = find_management(uri, management_url)
    unacked: dict[str, int] = {}
    if api is not None:
        vhost = quote(AmqpAddress.parse(uri).vhost, safe="")
        listing = api.get(f"/api/queues/{vhost}?columns=name,messages_unacknowledged")
        unacked = {str(q["name"]): int(q.get("messages_unacknowledged") or 0) for q in listing}
        names = _select(list(unacked), queues)
    elif queues is None or isinstance(queues, str):
        raise ValueError(
            "listing queues (queues=None or a pattern) needs the broker's management API, and none "
            f"answered for {AmqpAddress.parse(uri).display()}; pass the queue names, or management_url="
        )
    else:
        names = list(queues)
    rows: list[tuple[str, int | None, int | None, int | None, int | None]] = []
    for count in passive_counts(uri, names):
        if count.messages_ready is None:
            rows.append((count.queue, None, None, None, None))
            continue
        pending = unacked.get(count.queue, 0) if api is not None else None
        rows.append(
            (
                count.queue,
                count.messages_ready + (pending or 0),
                count.messages_ready,
                pending,
                count.consumers,
            )
        )
    return rows


def queue_counts(
    spark: Any,
    uri: str,
    queues: str | Sequence[str] | None = None,
    *,
    management_url: str | None = None,
) -> Any:
    """DataFrame (queue, messages, messages_ready, messages_unacknowledged, consumers).

    `queues`: None for every queue of the vhost, a list of names (missing queues give a row of
    nulls), or a regular expression matched against whole names. Listing needs a management API.
    """
    return spark.createDataFrame(collect_queue_counts(uri, queues, management_url=management_url), SCHEMA)
