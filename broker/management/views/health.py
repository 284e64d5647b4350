"""RabbitMQ's health checks: `/api/health/checks/*`, `/api/aliveness-test/{vhost}` and the older
`/api/healthchecks/node`, with the status codes and bodies of the 3.10.8 management plugin.

Probes written for RabbitMQ (compose healthchecks, Kubernetes readiness probes, CI wait scripts)
look at the status code: 200 healthy, 503 with `{"status": "failed", "reason": ...}` otherwise, and
400 for a path argument the check cannot parse. The older node check answers 200 either way and says
"failed" in its body, as RabbitMQ's does.
"""

from __future__ import annotations

from broker.management.context import Context
from broker.management.http import Request, Response
from broker.management.render import bad_request, not_found, operation_failed
from broker.management.writes import AmqpOpError
from exchanges.erlang.atom import Atom
from exchanges.erlang.format import erl_format

FAILED = 503
"""rabbit_mgmt.hrl's HEALTH_CHECK_FAILURE_STATUS."""

_RESOURCE_NAMES = {"memory": "memory", "disk": "disk space"}
"""rabbit_alarm's names for its resources in health-check answers."""

_PROTOCOL_ALIASES = {
    **dict.fromkeys(
        ("amqp091", "amqp0.9.1", "amqp0-9-1", "amqp0_9_1", "amqp10", "amqp1.0", "amqp1-0", "amqp1_0"), "amqp"
    ),
    "amqps": "amqp/ssl",
    **dict.fromkeys(("mqtt3.1", "mqtt3.1.1", "mqtt31", "mqtt311", "mqtt3_1", "mqtt3_1_1"), "mqtt"),
    **dict.fromkeys(("mqtts", "mqtt+tls", "mqtt+ssl"), "mqtt/ssl"),
    **dict.fromkeys(
        (
            "stomp1.0",
            "stomp1.1",
            "stomp1.2",
            "stomp10",
            "stomp11",
            "stomp12",
            "stomp1_0",
            "stomp1_1",
            "stomp1_2",
        ),
        "stomp",
    ),
    **dict.fromkeys(("stomps", "stomp+tls", "stomp+ssl"), "stomp/ssl"),
    **dict.fromkeys(("https", "management/ssl"), "https"),
    "management": "http",
}
"""rabbit_mgmt_wm_health_check_protocol_listener's normalize_protocol: other names are lower-cased."""

_UNITS = ("days", "weeks", "months", "years")


def listeners(ctx: Context) -> list[tuple[str, int]]:
    """(protocol, port) of every listener this node has, in the order /api/overview lists them."""
    http = [("http", ctx.http_port)] if ctx.http_port else []
    return [*ctx.state.amqp_listeners, *http] + ([("https", ctx.https_port)] if ctx.https_port else [])


def alarms(ctx: Context) -> list[dict[str, str]]:
    """The alarms in effect, as rabbit_alarm:format_as_maps writes them (all local: one node)."""
    state = ctx.state.alarms
    raised = [r for r, on in (("memory", state.mem_alarm), ("disk", state.disk_alarm)) if on]
    return [{"resource": _RESOURCE_NAMES[r], "node": ctx.state.node_name} for r in raised]


def _alarm_check(ctx: Context, message: str) -> Response:
    found = alarms(ctx)
    if not found:
        return Response.json({"status": "ok"})
    return Response.json({"status": "failed", "reason": message, "alarms": found}, FAILED)


async def get_alarms(ctx: Context, req: Request, segs: list[str]) -> Response:
    return _alarm_check(ctx, "There are alarms in effect in the cluster")


async def get_local_alarms(ctx: Context, req: Request, segs: list[str]) -> Response:
    return _alarm_check(ctx, "There are alarms in effect on the node")


async def get_port_listener(ctx: Context, req: Request, segs: list[str]) -> Response:
    try:
        port = int(segs[-1], 10)  # Erlang's list_to_integer: an optional sign, then digits
    except ValueError:
        return bad_request("Invalid port")
    if segs[-1].strip() != segs[-1] or "_" in segs[-1]:
        return bad_request("Invalid port")
    ports = [p for _proto, p in listeners(ctx)]
    if port in ports:
        return Response.json({"status": "ok", "port": port})
    body = {"status": "failed", "reason": "No active listener", "missing": port, "ports": ports}
    return Response.json(body, FAILED)


async def get_protocol_listener(ctx: Context, req: Request, segs: list[str]) -> Response:
    asked = segs[-1].lower()
    protocol = _PROTOCOL_ALIASES.get(asked, asked)
    protocols = list(dict.fromkeys(proto for proto, _port in listeners(ctx)))
    if protocol in protocols:
        return Response.json({"status": "ok", "protocol": protocol})
    body = {"status": "failed", "reason": "No active listener", "missing": protocol, "protocols": protocols}
    return Response.json(body, FAILED)


async def get_virtual_hosts(ctx: Context, req: Request, segs: list[str]) -> Response:
    """Every vhost is served by the one event loop, so none can be down while this answers."""
    return Response.json({"status": "ok"})


async def get_single_node(ctx: Context, req: Request, segs: list[str]) -> Response:
    """node-is-quorum-critical and node-is-mirror-sync-critical: hashbroker is one node (its
    emulated cluster members share this process), so no queue depends on another node's health."""
    return Response.json({"status": "ok", "reason": "single node cluster"})


async def get_certificate_expiration(ctx: Context, req: Request, segs: list[str]) -> Response:
    """No TLS listener has a certificate, so none expires within any period."""
    within, unit = segs[-2], segs[-1]
    if not within.isdigit():
        return bad_request("Invalid expiration value.")
    if unit not in _UNITS:
        return bad_request("Time unit not recognised. Supported units: days, weeks, months, years.")
    return Response.json({"status": "ok"})


async def get_aliveness(ctx: Context, req: Request, segs: list[str]) -> Response:
    """Declare `aliveness-test` in the vhost, publish to it and get the message back, as the
    caller (RabbitMQ's check leaves the queue behind, and so does this one)."""
    vhost = segs[1]
    if not ctx.state.has_vhost(vhost):
        return not_found()
    w = ctx.writes
    try:
        await w.declare_queue(req, vhost, "aliveness-test", False, False, {})
        await w.publish(req, vhost, "", "aliveness-test", {}, b"test_message")
        got = await w.get_messages(req, vhost, "aliveness-test", 1, "ack_requeue_false", "auto", None)
    except AmqpOpError as exc:
        return operation_failed(exc.code, exc.text)
    if got and got[0].get("payload") == "test_message":
        return Response.json({"status": "ok"})
    return Response.json({"status": "failed", "reason": "failed_to_receive"})


async def get_node_health(ctx: Context, req: Request, segs: list[str]) -> Response:
    """rabbit_health_check:node: 200 either way; an alarm is a failure named in the body."""
    if len(segs) == 3 and segs[2] not in ctx.state.cluster.nodes:
        return not_found()
    found = alarms(ctx)
    if not found:
        return Response.json({"status": "ok"})
    limits = [(Atom("resource_limit"), Atom(a["resource"].split()[0]), Atom(a["node"])) for a in found]
    reason = erl_format("resource alarm(s) in effect:~p", [limits])
    return Response.json({"status": "failed", "reason": reason})
