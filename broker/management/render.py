"""The JSON shapes every management resource shares: error bodies, rates, `?columns=`, path parts.

Error bodies are RabbitMQ 3.10.8's, observed live: `{"error": ..., "reason": ...}` with its
spellings ("not_authorised" for refused calls, "not_authorized" for failed logins).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import Any, TypeVar
from urllib.parse import quote

from broker.management.http import Request, Response

T = TypeVar("T")
FORMAT_BATCH = 1000
"""Objects formatted for a list answer between two yields to the event loop."""


async def formatted(items: Iterable[T], fmt: Callable[[T], Any]) -> list[Any]:
    """`[fmt(i) for i in items]`, yielding to the event loop every FORMAT_BATCH items, so a list of
    100k objects does not hold up the broker. The items are views taken before the first yield,
    so what changes meanwhile does not disturb the formatting."""
    out: list[Any] = []
    for n, item in enumerate(items, 1):
        out.append(fmt(item))
        if n % FORMAT_BATCH == 0:
            await asyncio.sleep(0)
    return out


NOT_FOUND = {"error": "Object Not Found", "reason": "Not Found"}
CHALLENGE = {"www-authenticate": 'Basic realm="RabbitMQ Management"'}


def not_found() -> Response:
    return Response.json(NOT_FOUND, 404)


def bad_request(reason: Any) -> Response:
    return Response.json({"error": "bad_request", "reason": reason}, 400)


def not_authorised(reason: str) -> Response:
    return Response.json({"error": "not_authorised", "reason": reason}, 401)


def access_refused() -> Response:
    """What RabbitMQ answers when an operation is refused for lack of AMQP permissions."""
    return not_authorised("Access refused.")


def login_failed(reason: str = "Login failed") -> Response:
    return Response.json({"error": "not_authorized", "reason": reason}, 401, CHALLENGE)


def key_missing(body: dict[str, Any], *keys: str) -> Response | None:
    """rabbit_mgmt_util's `[{key_missing,k},...]` refusal for absent body keys, or None."""
    missing = [k for k in keys if k not in body]
    if not missing:
        return None
    return bad_request("[" + ",".join(f"{{key_missing,{k}}}" for k in missing) + "]")


def exchange_name(segment: str) -> str:
    """The default exchange is addressed as "amq.default" in URLs."""
    return "" if segment == "amq.default" else segment


def quote_segment(segment: str) -> str:
    """Percent-encode one URL path segment the way RabbitMQ writes them ("/" as %2F)."""
    return quote(segment, safe="")


def with_rates(d: dict[str, Any], *keys: str, rates: dict[str, float] | None = None) -> dict[str, Any]:
    """Add RabbitMQ's `<key>_details: {"rate": r}` next to each counter (0.0 when not sampled)."""
    for k in keys:
        d[f"{k}_details"] = {"rate": (rates or {}).get(k, 0.0)}
    return d


def json_body(req: Request) -> dict[str, Any] | Response:
    try:
        body = req.json()
    except (ValueError, UnicodeDecodeError):
        return bad_request("not_json")
    return body if isinstance(body, dict) else bad_request("not_json")


def body_bool(body: dict[str, Any], key: str) -> bool:
    v = body.get(key, False)
    return v in (True, "true")


def flag(req: Request, key: str) -> bool:
    return req.query.get(key, ["false"])[-1].lower() == "true"


def has_null(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, dict):
        return any(has_null(v) for v in value.values())
    if isinstance(value, list):
        return any(has_null(v) for v in value)
    return False


def columns(req: Request, resp: Response) -> Response:
    """`?columns=name,message_stats.publish` as RabbitMQ supports it (tools use it to cut payloads)."""
    cols = req.query.get("columns")
    if not cols or resp.status != 200 or resp.payload is None:
        return resp
    wanted = [c.split(".") for c in ",".join(cols).split(",") if c]
    data = resp.payload

    def pick(obj: Any) -> Any:
        if not isinstance(obj, dict):
            return obj
        out: dict[str, Any] = {}
        for path in wanted:
            src: Any = obj
            for part in path:
                src = src.get(part) if isinstance(src, dict) else None
                if src is None:
                    break
            if src is None:
                continue
            dst = out
            for part in path[:-1]:
                dst = dst.setdefault(part, {})
            dst[path[-1]] = src
        return out

    if isinstance(data, dict) and isinstance(data.get("items"), list) and "page_count" in data:
        picked: Any = {**data, "items": [pick(o) for o in data["items"]]}  # a paged answer
    else:
        picked = [pick(o) for o in data] if isinstance(data, list) else pick(data)
    return Response.json(picked, resp.status)


def operation_failed(code: int, text: str) -> Response:
    """A refused AMQP operation as rabbit_mgmt_util reports it: 403 -> 401 "Access refused."."""
    if code == 403:
        return access_refused()
    return bad_request(text.split(" - ", 1)[1] if " - " in text else text)
