"""/api/queues: list, declare, delete, purge (`/contents`) and get messages (`/get`)."""

from __future__ import annotations

from typing import Any

from broker.entities.info import QueueView
from broker.management.context import Context
from broker.management.http import Request, Response
from broker.management.render import (
    access_refused,
    bad_request,
    body_bool,
    flag,
    formatted,
    key_missing,
    not_authorised,
    not_found,
    operation_failed,
    with_rates,
)
from broker.management.sessions import Sessions
from broker.management.values import table_to_json
from broker.management.views.connections import fmt_consumer
from broker.management.views.guards import vhost_body, write_response
from broker.management.writes import ACK_MODES, AmqpOpError


def fmt_queue(ctx: Context, q: QueueView, sessions: Sessions, detail: bool = False) -> dict[str, Any]:
    """A queue as /api/queues shows it; `sessions` has the views of its owner and consumers."""
    d = _fmt_quorum(ctx, q) if q.type == "quorum" else _fmt_classic(ctx, q)
    if q.type == "stream":  # a stream's replicas, as rabbit_stream_queue reports them (no leader key)
        members = _names(q.details.get("members")) or [ctx.state.queue_node(q.name)]
        d["members"] = members
        d["online"] = ctx.state.online(members)
    rates = ctx.state.queue_rates(q.vhost, q.name)
    with_rates(d, "messages", "messages_ready", "messages_unacknowledged", rates=rates)
    if q.stats:
        d["message_stats"] = with_rates(dict(q.stats), *q.stats, rates=rates)
    if q.owner is not None:
        owner = sessions.connection_of(q.owner)
        d["owner_pid_details"] = {
            "name": owner.name,
            "peer_port": owner.peer_port,
            "peer_host": owner.peer_host,
        }
    if detail:
        d["consumer_details"] = [fmt_consumer(ctx, q, c, sessions) for c in q.consumers]
        d["deliveries"] = []
        d["incoming"] = []
    return d


def _common(ctx: Context, q: QueueView) -> dict[str, Any]:
    """The fields every queue type shows alike."""
    return {
        "arguments": table_to_json(q.arguments),
        "auto_delete": q.auto_delete,
        "consumer_capacity": 1.0 if q.consumers else 0,
        "consumer_utilisation": 1.0 if q.consumers else 0,
        "consumers": len(q.consumers),
        "durable": q.durable,
        "effective_policy_definition": ctx.state.policy_definition(q.vhost, q.policy),
        "exclusive": q.exclusive,
        "message_bytes_ready": q.message_bytes_ready,
        "message_bytes_unacknowledged": q.message_bytes_unacknowledged,
        "messages_ready": q.messages_ready,
        "messages_unacknowledged": q.messages_unacknowledged,
        "name": q.name,
        "operator_policy": None,
        "policy": q.policy,
        "state": "running",
        "type": q.type,
        "vhost": q.vhost,
    }


def _fmt_classic(ctx: Context, q: QueueView) -> dict[str, Any]:
    messages = q.messages_ready + q.messages_unacknowledged
    nbytes = q.message_bytes_ready + q.message_bytes_unacknowledged
    return {
        **_common(ctx, q),
        "exclusive_consumer_tag": q.exclusive_consumer_tag,
        "head_message_timestamp": None,
        "memory": nbytes,
        "message_bytes": nbytes,
        "message_bytes_paged_out": 0,
        "message_bytes_persistent": 0,  # not tracked: durable messages are in broker.store
        "message_bytes_ram": nbytes,
        "messages": messages,
        "messages_paged_out": 0,
        "messages_persistent": 0,
        "messages_ram": messages,
        "messages_ready_ram": q.messages_ready,
        "messages_unacknowledged_ram": q.messages_unacknowledged,
        "node": ctx.state.queue_node(q.name),
        "recoverable_slaves": None,
        "single_active_consumer_tag": q.single_active_consumer_tag,
    }


#: The quorum queue's Ra server process as rabbit_quorum_queue reports it (erlang:process_info):
#: hashbroker has no such process, so the shape RabbitMQ shows with the VM's default settings.
GARBAGE_COLLECTION = {
    "fullsweep_after": 65535,
    "max_heap_size": 0,
    "min_bin_vheap_size": 46422,
    "min_heap_size": 233,
    "minor_gcs": 0,
}


def _fmt_quorum(ctx: Context, q: QueueView) -> dict[str, Any]:
    """rabbit_quorum_queue's info items: membership from the queue's details, the dead-letter
    store counted in `messages` (not in `messages_ready`), no classic-only paging/slave fields."""
    det = q.details
    leader = _text(det.get("leader")) or ctx.state.queue_node(q.name)
    members = _names(det.get("members")) or [leader]
    online = ctx.state.online(members)
    dlx, dlx_bytes = _count(det.get("messages_dlx")), _count(det.get("message_bytes_dlx"))
    messages = q.messages_ready + q.messages_unacknowledged + dlx
    nbytes = q.message_bytes_ready + q.message_bytes_unacknowledged + dlx_bytes
    return {
        **_common(ctx, q),
        "garbage_collection": dict(GARBAGE_COLLECTION),
        "leader": leader,
        "members": members,
        "memory": nbytes,
        "message_bytes": nbytes,
        "message_bytes_dlx": dlx_bytes,
        "message_bytes_persistent": nbytes,  # every quorum message is kept in the Raft log
        "message_bytes_ram": nbytes,
        "messages": messages,
        "messages_dlx": dlx,
        "messages_persistent": messages,
        "messages_ram": messages,
        "node": leader,
        "online": online,
        "open_files": {node: 0 for node in online},
        "reductions": 0,
        "reductions_details": {"rate": 0.0},
        "single_active_consumer_ctag": q.single_active_consumer_tag,
    }


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _names(value: object) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list | tuple) else []


def _count(value: object) -> int:
    return value if isinstance(value, int) else 0


async def get_queues(ctx: Context, req: Request, segs: list[str]) -> Response:
    if len(segs) >= 2 and not ctx.state.has_vhost(segs[1]):
        return not_found()
    sessions = ctx.state.sessions()
    if len(segs) == 3:
        q = ctx.state.queue(segs[1], segs[2])
        return Response.json(fmt_queue(ctx, q, sessions, detail=True)) if q is not None else not_found()
    vhost = segs[1] if len(segs) == 2 else None
    seen = ctx.visible_vhosts(req)
    queues = [q for q in ctx.state.queues(vhost) if q.vhost in seen]
    return Response.json(await formatted(queues, lambda q: fmt_queue(ctx, q, sessions)))


async def put_queue(ctx: Context, req: Request, segs: list[str]) -> Response:
    vhost, name = segs[1], segs[2]
    body = vhost_body(ctx, req, vhost)
    if isinstance(body, Response):
        return body
    existed = ctx.state.queue(vhost, name) is not None
    try:
        await ctx.writes.declare_queue(
            req,
            vhost,
            name,
            body_bool(body, "durable"),
            body_bool(body, "auto_delete"),
            body.get("arguments") or {},
        )
    except AmqpOpError as exc:
        if exc.code == 404:  # amq.rabbitmq.reply-to.<suffix> of no reply consumer
            return Response.json({"error": "not_found", "reason": exc.explanation}, 404)
        return operation_failed(exc.code, exc.text)
    return Response(204 if existed else 201)


def _missing_queue_refusal(ctx: Context, req: Request, vhost: str, name: str) -> Response | None:
    """403 for a user without access to the vhost (when it exists), then 404 for no such queue."""
    if ctx.state.has_vhost(vhost) and not ctx.may_use_vhost(req, vhost):
        return access_refused()
    if ctx.state.queue(vhost, name) is None:
        return not_found()
    return None


async def delete_queue(ctx: Context, req: Request, segs: list[str]) -> Response:
    vhost, name = segs[1], segs[2]
    if (refusal := _missing_queue_refusal(ctx, req, vhost, name)) is not None:
        return refusal
    return await write_response(
        ctx.writes.delete_queue(req, vhost, name, flag(req, "if-unused"), flag(req, "if-empty"))
    )


async def purge_queue(ctx: Context, req: Request, segs: list[str]) -> Response:
    vhost, name = segs[1], segs[2]
    if (refusal := _missing_queue_refusal(ctx, req, vhost, name)) is not None:
        return refusal
    return await write_response(ctx.writes.purge_queue(req, vhost, name))


async def get_messages(ctx: Context, req: Request, segs: list[str]) -> Response:
    vhost, name = segs[1], segs[2]
    body = vhost_body(ctx, req, vhost)
    if isinstance(body, Response):
        return body
    if (refusal := key_missing(body, "count", "ackmode", "encoding")) is not None:
        return refusal
    ackmode, encoding = body["ackmode"], body["encoding"]
    if encoding not in ("auto", "base64"):
        return bad_request("Unsupported encoding. Please use auto or base64.")
    if ackmode not in ACK_MODES:
        return bad_request(f"unknown ackmode {ackmode!r}")
    try:
        count = int(body["count"])
        truncate = int(body["truncate"]) if body.get("truncate") not in (None, "") else None
    except (TypeError, ValueError):
        return bad_request("count and truncate must be integers")
    try:
        msgs = await ctx.writes.get_messages(req, vhost, name, count, ackmode, encoding, truncate)
    except AmqpOpError as exc:
        if exc.code == 404:
            return Response.json({"error": "not_found", "reason": exc.text}, 404)
        if exc.code == 403:  # rabbit_mgmt_wm_queue_get shows the channel's full reply text
            return not_authorised(exc.text)
        return operation_failed(exc.code, exc.text)
    return Response.json(_printable(msgs))


def _printable(value: Any) -> Any:
    """The answer with every text JSON can carry: a header name (or value) that is not UTF-8 comes
    out of the table decoder with escaped bytes, which RabbitMQ's JSON shows as U+FFFD each."""
    if isinstance(value, str):
        try:
            value.encode()
        except UnicodeEncodeError:
            return value.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
        return value
    if isinstance(value, dict):
        return {_printable(k): _printable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_printable(v) for v in value]
    return value
