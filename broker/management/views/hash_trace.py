"""GET /api/hashbroker/exchanges/{vhost}/{name}/hash-trace: the dashboard's live view of a hash
exchange (x-consistent-hash, x-modulus-hash).

Each poll starts or renews a watch of the exchange (`broker.entities.hash_watch`): while it lasts
(30 s after the last poll), every message published to the exchange is recorded in a bounded ring
buffer with what was hashed (the routing key, or the header or property the exchange hashes on),
the bucket it hit, the destination that bucket belongs to and the queues the message reached. With
nobody polling, nothing is recorded and publishing pays nothing for it.

The caller needs AMQP read permission on the exchange (as to consume what passes through it): the
entries show routing keys and hashed headers.

Query: `size` (entries kept, 1..500, default 50), `since` (return only entries with a larger
`seq`, for incremental polls).
"""

from __future__ import annotations

from broker.entities import hash_watch
from broker.management import authz
from broker.management.context import Context
from broker.management.http import Request, Response
from broker.management.render import access_refused, bad_request, exchange_name, not_found


def _int(req: Request, key: str, default: int, low: int, high: int) -> int | None:
    raw = req.query.get(key, [str(default)])[-1]
    try:
        value = int(raw)
    except ValueError:
        return None
    return value if low <= value <= high else None


async def get_hash_trace(ctx: Context, req: Request, segs: list[str]) -> Response:
    vhost, name = segs[2], exchange_name(segs[3])
    x = ctx.state.exchange(vhost, name)
    if x is None:
        return not_found()
    if not authz.may_read(ctx.state.registry, ctx.who(req), vhost, "exchange", name):
        return access_refused()  # the trace shows the routing keys and headers of the traffic
    if x.type not in hash_watch.HASH_TYPES:
        return bad_request(f"exchange type '{x.type}' does not hash (x-consistent-hash, x-modulus-hash)")
    size = _int(req, "size", hash_watch.DEFAULT_SIZE, 1, hash_watch.MAX_SIZE)
    since = _int(req, "since", 0, 0, 1 << 62)
    if size is None or since is None:
        return bad_request(f"size must be 1..{hash_watch.MAX_SIZE} and since a non-negative integer")
    seq = ctx.writes.watch_hash_exchange(vhost, name, size)
    return Response.json(
        {
            "vhost": vhost,
            "name": name,
            "type": x.type,
            "hash_on": ctx.state.hash_on(vhost, name),
            "size": size,
            "watch_seconds": hash_watch.WATCH_SECONDS,
            "seq": seq,
            "entries": ctx.state.hash_trace(vhost, name, since),
        }
    )
