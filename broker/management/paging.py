"""Sorting, filtering and pagination of list answers, as rabbit_mgmt_util does them in 3.10.8.

Every list is sorted by `?sort=` (a dotted path into each item, "message_stats.publish") and then by
its resource's default keys, in Erlang's term order (numbers before atoms before maps before lists
before strings; a missing value counts as 0), and reversed whole by `?sort_reverse=true`. The paged
resources (queues, exchanges, connections, channels, vhosts) are always sorted, and `?page=` turns
their answer into the paged object: `name` filters it first (a case-insensitive substring, or with
`use_regex=true` a case-insensitive regular expression), `page_size` (default 100, at most 500)
cuts it. The errors, their names and their texts are RabbitMQ's.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from broker.entities.patterns import PatternError, compile_user_pattern
from broker.management.http import Request, Response
from broker.management.render import bad_request

DEFAULT_PAGE_SIZE = 100
MAX_PAGE_SIZE = 500
DEFAULT_SORT = ("vhost", "name")


def paged_resource(segs: Sequence[str]) -> str | None:
    """The resource whose list `segs` (the path after /api/) names, when RabbitMQ pages that list
    (/api/queues[/vhost], /api/exchanges[/vhost], /api/vhosts, /api/connections, /api/channels);
    None for every other path, which ignores `page` (/api/vhosts/{vhost}/connections too)."""
    if len(segs) == 1 and segs[0] in ("queues", "exchanges", "vhosts", "connections", "channels"):
        return segs[0]
    if len(segs) == 2 and segs[0] in ("queues", "exchanges"):
        return segs[0]
    return None


_PROPLIST_ORDER = frozenset({"connections", "channels"})
"""Resources whose empty paged object keeps rabbit_mgmt_util's field order (the others sort it)."""
_INTEGER = re.compile(r"[+-]?[0-9]+")


class PagingError(Exception):
    """A refused `page`/`page_size`/`name`: the answer RabbitMQ gives (400)."""

    def __init__(self, error: str, reason: str) -> None:
        super().__init__(reason)
        self.error = error
        self.reason = reason

    def response(self) -> Response:
        if self.error == "bad_request":
            return bad_request(self.reason)
        return Response.json({"error": self.error, "reason": self.reason}, 400)


@dataclass(frozen=True)
class Pagination:
    page: int
    page_size: int
    name: str
    use_regex: bool


def _param(req: Request, key: str) -> str | None:
    values = req.query.get(key)
    return values[0] if values else None


def _integer(text: str | None) -> int | None:
    """Erlang's list_to_integer, whose failure RabbitMQ reports as invalid parameters."""
    if text is None:
        return None
    if _INTEGER.fullmatch(text) is None:
        raise PagingError("bad_request", "Pagination parameters are invalid")
    return int(text)


def pagination(req: Request) -> Pagination | None:
    """The request's pagination (None when it asks for none); PagingError when it is invalid."""
    page = _integer(_param(req, "page"))
    size = _integer(_param(req, "page_size"))
    name = _param(req, "name") or ""
    use_regex = _param(req, "use_regex") == "true"
    if page is None:
        return None
    if page > 0 and size is None:
        return Pagination(page, DEFAULT_PAGE_SIZE, name, use_regex)
    if page > 0 and size is not None and 0 < size <= MAX_PAGE_SIZE:
        return Pagination(page, size, name, use_regex)
    shown = "undefined" if size is None else str(size)
    raise PagingError(
        "invalid_pagination_parameters",
        f"Invalid pagination parameters: page number {page}, page size {shown}",
    )


def name_matcher(pattern: str) -> Callable[[str], bool]:
    """re:run(Name, Pattern, [caseless]): the one place a `use_regex` filter is compiled, through
    the bounded matcher every user pattern goes through (no pattern can stall the broker); a
    pattern it cannot compile is RabbitMQ's "Pagination parameters are invalid"."""
    try:
        compiled = compile_user_pattern("(?i)" + pattern)
    except PatternError:
        raise PagingError("bad_request", "Pagination parameters are invalid") from None
    return compiled.search


def _erlang_order(value: Any) -> tuple[Any, ...]:
    """A key that orders JSON values as Erlang orders the terms they came from."""
    if isinstance(value, bool) or value is None:
        return (1, "null" if value is None else str(value).lower())
    if isinstance(value, int | float):
        return (0, value)
    if isinstance(value, dict):
        return (2, len(value), tuple((k, _erlang_order(v)) for k, v in sorted(value.items())))
    if isinstance(value, list):
        return (3, tuple(_erlang_order(v) for v in value))
    return (4, str(value).encode("utf-8"))


def _dotted(item: Any, path: Sequence[str]) -> Any:
    for part in path[:-1]:
        item = item.get(part, []) if isinstance(item, dict) else []
    return item.get(path[-1], 0) if isinstance(item, dict) else 0


def sort_items(items: list[Any], req: Request, default: Sequence[str] = DEFAULT_SORT) -> list[Any]:
    """sort_list: by `?sort=` then the default keys; `?sort=` empty leaves the list as it is."""
    sort = _param(req, "sort")
    if sort == "":
        return items
    keys = [[p for p in k.split(".") if p] for k in ([sort] if sort else []) + list(default)]
    keys = [k for k in keys if k]
    ordered = sorted(items, key=lambda item: tuple(_erlang_order(_dotted(item, k)) for k in keys))
    if _param(req, "sort_reverse") == "true":
        ordered.reverse()
    return ordered


def page_items(items: list[Any], p: Pagination, resource: str) -> dict[str, Any]:
    """filter_and_paginate: the paged object, or PagingError past the last page."""
    kept = items
    if p.name and items:  # a pattern is compiled only to run it: on no items, even "(" is fine
        if p.use_regex:
            matches = name_matcher(p.name)
            kept = [i for i in items if matches(str(i.get("name", "")))]
        else:
            needle = p.name.lower()
            kept = [i for i in items if needle in str(i.get("name", "")).lower()]
    start = (p.page - 1) * p.page_size
    if start > len(kept):  # lists:sublist starts at most one past the end
        raise PagingError(
            "page_out_of_range",
            f"Page out of range, page: {p.page} page size: {p.page_size}, len: {len(kept)}",
        )
    shown = kept[start : start + p.page_size]
    body = {
        "total_count": len(items),
        "item_count": len(shown),
        "filtered_count": len(kept),
        "page": p.page,
        "page_size": p.page_size,
        "page_count": (len(kept) + p.page_size - 1) // p.page_size,
        "items": shown,
    }
    if shown or resource not in _PROPLIST_ORDER:
        body = dict(sorted(body.items()))
    return body
