"""The dashboard's live view of a hash exchange: the last messages published to it, what was hashed,
the bucket it hit and where it went.

A watch exists only while someone polls it (`watch` renews it for `WATCH_SECONDS`); while none
exists the publish path pays nothing beyond `VHost.tapped`. Each watch is a bounded ring buffer, so
recording is O(1) in time and memory whatever the message rate.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from amqpwire.fields import Field, field_to_python

if TYPE_CHECKING:
    from broker.entities.exchange import Exchange
    from broker.entities.vhost import VHost
    from exchanges.base import Message

#: A watch lapses this long after its last poll (the dashboard polls every few seconds).
WATCH_SECONDS = 30.0
#: Entries kept per watched exchange unless the poll asks for another size (1..MAX_SIZE).
DEFAULT_SIZE = 50
MAX_SIZE = 500
HASH_TYPES = ("x-consistent-hash", "x-modulus-hash")


class HashWatch:
    """One watched exchange: the last `size` routing decisions, newest last, numbered from 1."""

    __slots__ = ("entries", "seq", "until")

    def __init__(self, size: int) -> None:
        self.entries: deque[dict[str, Any]] = deque(maxlen=size)
        self.seq = 0
        self.until = 0.0


def watch(vhost: VHost, name: str, size: int = DEFAULT_SIZE) -> HashWatch:
    """Start or renew the watch of exchange `name` (a poll of the live view)."""
    w = vhost.hash_watches.get(name)
    if w is None or w.entries.maxlen != size:
        fresh = HashWatch(size)
        if w is not None:
            fresh.entries.extend(w.entries)
            fresh.seq = w.seq
        w = vhost.hash_watches[name] = fresh
    w.until = vhost.clock.now() + WATCH_SECONDS
    vhost.retap()
    return w


def sweep(vhost: VHost, now: float) -> None:
    """Drop lapsed watches (nobody polled them for WATCH_SECONDS)."""
    watches = vhost.hash_watches
    lapsed = [name for name, w in watches.items() if w.until < now]
    for name in lapsed:
        del watches[name]
    if lapsed:
        vhost.retap()


def record(vhost: VHost, x: Exchange, message: Message, routed: Sequence[str]) -> None:
    """Record a publish to `x` if it is watched: `routed` are the queues the publish reached."""
    watches = vhost.hash_watches
    if not watches:
        return
    now = vhost.clock.now()
    sweep(vhost, now)
    w = watches.get(x.name)
    if w is None or x.impl is None:
        return
    picked = x.impl.bucket_of(message)
    hash_on = str(getattr(x.impl, "hash_on", "routing_keys"))
    w.seq += 1
    entry: dict[str, Any] = {
        "seq": w.seq,
        "time": round(vhost.clock.wall() * 1000),
        "routing_key": message.routing_keys[0],
        "hash_on": hash_on,
        "hashed": _hashed(hash_on, message),
        "bucket": None,
        "buckets": None,
        "destination": None,
        "queues": list(routed),
    }
    if picked is not None:
        bucket, buckets, dest = picked
        entry.update(bucket=bucket, buckets=buckets, destination={"kind": dest.kind, "name": dest.name})
    w.entries.append(entry)


def _hashed(hash_on: str, message: Message) -> Any:
    """The value the exchange hashed, as JSON (a header's or property's value, or the key(s))."""
    if hash_on == "routing_key":
        return message.routing_keys[0]
    if hash_on == "routing_keys":
        return list(message.routing_keys)
    kind, _, name = hash_on.partition(":")
    if kind == "header":
        headers = message.headers()
        field = headers.get(name) if headers is not None else None
        return None if field is None else _json(field)
    return _json(message.property(name))


def _json(value: Any) -> Any:
    if isinstance(value, Field):
        value = field_to_python(value)
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", "replace")
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, list | tuple):
        return [_json(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _json(v) for k, v in value.items()}
    return str(value)


def entries(vhost: VHost, name: str, since: int = 0) -> list[dict[str, Any]]:
    """The recorded entries of `name` newer than `since` (a `seq`), oldest first."""
    w = vhost.hash_watches.get(name)
    if w is None:
        return []
    return [e for e in w.entries if e["seq"] > since]
