"""GET /api/hashbroker/exchanges/{vhost}/{name}/hash-trace: the dashboard's live view of a hash
exchange (x-consistent-hash, x-modulus-hash).

Each poll starts or renews a watch of the exchange (`broker.entities.hash_watch`): while it lasts
(30 s after the last poll), every message published to the exchange is recorded in a bounded ring
buffer with what was hashed (the routing key, or the header or property the exchange hashes on),
the bucket it hit, the destination that bucket belongs to and the queues the message reached. With
nobody polling, nothing is recorded and publishing pays nothing for it.

Query: `size` (entries kept, 1..500, default 50), `since` (return only entries with a larger
`seq`, for incremental polls).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.entities import hash_watch
from broker.management.http import Request, Response
from broker.management.render import bad_request, exchange_name, not_found

if TYPE_CHECKING:
    from broker.management.api import Api


def _int(req: Request, key: str, default: int, low: int, high: int) -> int | None:
    raw = req.query.get(key, [str(default)])[-1]
    try:
        value = int(raw)
    except ValueError:
        return None
    return value if low <= value <= high else None


async def get_hash_trace(api: Api, req: Request, segs: list[str]) -> Response:
    vhost_name, name = segs[2], exchange_name(segs[3])
    vhost = api.state.broker.vhosts.get(vhost_name)
    x = vhost.exchanges.get(name) if vhost is not None else None
    if vhost is None or x is None:
        return not_found()
    if x.type_name not in hash_watch.HASH_TYPES:
        return bad_request(f"exchange type '{x.type_name}' does not hash (x-consistent-hash, x-modulus-hash)")
    size = _int(req, "size", hash_watch.DEFAULT_SIZE, 1, hash_watch.MAX_SIZE)
    since = _int(req, "since", 0, 0, 1 << 62)
    if size is None or since is None:
        return bad_request(f"size must be 1..{hash_watch.MAX_SIZE} and since a non-negative integer")
    watch = hash_watch.watch(vhost, name, size)
    return Response.json(
        {
            "vhost": vhost_name,
            "name": name,
            "type": x.type_name,
            "hash_on": str(getattr(x.impl, "hash_on", "routing_keys")),
            "size": size,
            "watch_seconds": hash_watch.WATCH_SECONDS,
            "seq": watch.seq,
            "entries": hash_watch.entries(vhost, name, since),
        }
    )
