"""rabbit_dead_letter: the dead-lettered copy of a message (x-death headers) and cycle detection
(`VHost.dead_letter` publishes it through the vhost's delivery pipeline)."""

from __future__ import annotations

from amqpwire.fields import Field, FieldTable, name_bytes
from broker.entities.message import StoredMessage
from broker.protocol import properties as P


def is_cycle(qname: str, msg: StoredMessage) -> bool:
    headers = msg.headers()
    if headers is None:
        return False
    deaths = headers.get("x-death")
    if deaths is None or deaths.type != "array":
        return False
    items = list(deaths.value)
    # rabbit_dead_letter:is_cycle: skip entries until one for this queue, then the rest must
    # contain no "rejected" reason for it to be a fully automatic cycle.
    for i, d in enumerate(items):
        if d.type == "table" and d.value.get("queue") == Field(
            "longstr", qname.encode("utf-8", errors="surrogateescape")
        ):
            return all(
                not (e.type == "table" and e.value.get("reason") == Field("longstr", b"rejected"))
                for e in items[i:]
            )
    return False


def make_dead_letter(
    msg: StoredMessage, reason: str, dlx: str, dlrk: str | None, qname: str, now: float
) -> StoredMessage:
    """`now`: wall-clock seconds for the x-death `time`."""
    headers = msg.headers() or FieldTable()
    entries = list(headers)
    rks = [Field("longstr", msg.routing_key.encode("utf-8", errors="surrogateescape"))]
    for name in ("CC", "BCC"):
        f = headers.get(name)
        if f is not None and f.type == "array":
            rks.extend(v for v in f.value if v.type == "longstr")
    info: list[tuple[str, Field]] = [
        ("reason", Field("longstr", reason.encode())),
        ("queue", Field("longstr", qname.encode("utf-8", errors="surrogateescape"))),
        ("time", Field("timestamp", int(now))),
        ("exchange", Field("longstr", msg.exchange.encode("utf-8", errors="surrogateescape"))),
        ("routing-keys", Field("array", tuple(rks))),
    ]
    expiration = msg.prop("expiration")
    if expiration is not None:
        info.append(("original-expiration", Field("longstr", expiration.encode())))
    existing = headers.get("x-death")
    q_f = Field("longstr", qname.encode("utf-8", errors="surrogateescape"))
    r_f = Field("longstr", reason.encode())
    if existing is None:
        entries = _set(entries, "x-first-death-reason", r_f)
        entries = _set(entries, "x-first-death-queue", q_f)
        entries = _set(entries, "x-first-death-exchange", info[3][1])
        table = FieldTable([("count", Field("long", 1)), *info])
        entries = _set(entries, "x-death", Field("array", (Field("table", table),)))
    elif existing.type == "array":
        tables = [t for t in existing.value if t.type == "table"]
        match = [t for t in tables if t.value.get("queue") == q_f and t.value.get("reason") == r_f]
        others = [t for t in tables if t not in match]
        if match:
            old = list(match[0].value)
            cnt = match[0].value.get("count")
            n = (cnt.value if cnt is not None else 0) + 1
            if cnt is None:
                new_info = [("count", Field("long", 1)), *old]
            else:
                new_info = [(k, Field("long", n) if k == "count" else v) for k, v in old]
        else:
            new_info = [("count", Field("long", 1)), *info]
        new_info.sort(key=lambda kv: name_bytes(kv[0]))
        entries = _set(entries, "x-death", Field("array", (Field("table", FieldTable(new_info)), *others)))
    else:
        table = FieldTable([("count", Field("long", 1)), *info])
        entries = _set(entries, "x-death", Field("array", (Field("table", table),)))
    keys = [dlrk] if dlrk is not None else list(msg.routing_keys)
    if dlrk is not None:
        entries = [(k, v) for k, v in entries if k != "CC"]
    props = P.rewrite(msg.props, {"headers": FieldTable(entries), "expiration": None})
    return msg.with_props(props, exchange=dlx, routing_keys=keys)


def _set(entries: list[tuple[str, Field]], key: str, value: Field) -> list[tuple[str, Field]]:
    return list(FieldTable(entries).with_value(key, value))
