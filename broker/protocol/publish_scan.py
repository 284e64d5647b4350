"""The single-read publish shortcut: whole basic.publishes taken straight out of one read.

`CommandAssembler.events` asks `scan` for the run of publishes that starts at a position: every
basic.publish on an open channel with no content pending, whose content header and single body
frame follow it in the same read, each frame well formed and within the limits. The scan stops at
the first frame that is anything else and leaves it (and all after it) to the frame-by-frame
assembly, which reports RabbitMQ's errors, so the shortcut decides nothing the slow path would not.

Kept apart, with nothing but bytes, ints and builtin containers in it, so that `setup.py` can
compile it with mypyc (`broker.protocol._publish_scan_native`, chosen by `broker.protocol.native`);
this file is the same code, interpreted. The two runs favour opposite styles: compiled, reading
frame headers octet by octet is cheapest (`_scan_octets`); interpreted, each octet is several
bytecodes, and one `struct` call per frame header is cheaper (`_scan_struct`). `scan` is whichever
suits the way this module runs (`COMPILED`); both take exactly the same publishes.
"""

from __future__ import annotations

import struct
import types
from typing import Any, Final

_METHOD: Final = 1
_HEADER: Final = 2
_BODY: Final = 3
_END: Final = 0xCE

Publish = tuple[str, str, bool, bool, bytes, bytes]
Run = list[tuple[int, int, Publish]]
Pending = dict[int, Any]


def _frame_end(data: bytes, at: int, ftype: int, channel: int, limit: int) -> int:
    """The position of the end marker of the frame at `at` when it has type `ftype` on `channel`,
    a size within `limit` (0: none) and all of it in `data`; -1 otherwise. The header is read
    octet by octet: compiled, that is cheaper than a struct call and the tuple it builds."""
    if len(data) - at < 8 or data[at] != ftype or (data[at + 1] << 8 | data[at + 2]) != channel:
        return -1
    size = data[at + 3] << 24 | data[at + 4] << 16 | data[at + 5] << 8 | data[at + 6]
    stop = at + 7 + size
    if (limit and size > limit) or stop >= len(data) or data[stop] != _END:
        return -1
    return stop


def _publish(data: bytes, p: int, ex_end: int, rk_end: int, properties: bytes, body: bytes) -> Publish:
    """The publish whose exchange's length octet is at `p` and whose bits are at `rk_end`."""
    bits = data[rk_end]
    return (
        data[p + 1 : ex_end].decode("utf-8", "surrogateescape") if ex_end > p + 1 else "",
        data[ex_end + 1 : rk_end].decode("utf-8", "surrogateescape"),
        True if bits & 1 else False,  # noqa: SIM210 (bool() and == cost more here)
        True if bits & 2 else False,  # noqa: SIM210
        properties,
        body,
    )


def _scan_octets(
    data: bytes,
    pos: int,
    channels: set[int],
    pending: dict[int, Any],
    limit: int,
    max_size: int,
) -> list[tuple[int, int, Publish]]:
    """`scan` for the compiled build: frame headers read octet by octet."""
    out: list[tuple[int, int, Publish]] = []
    while len(data) - pos >= 8:
        channel = data[pos + 1] << 8 | data[pos + 2]
        stop = _frame_end(data, pos, _METHOD, channel, limit)
        if (
            stop < 0
            or channel not in channels
            or (pending and channel in pending)
            or stop - pos < 16  # class, method, ticket and three fields at the least
            # basic.publish: class 60, method 40
            or data[pos + 7] != 0
            or data[pos + 8] != 60
            or data[pos + 9] != 0
            or data[pos + 10] != 40
        ):
            break
        p = pos + 13  # frame header, class, method, ticket
        ex_end = p + 1 + data[p]
        rk_end = ex_end + 1 + data[ex_end] if ex_end < stop else stop
        if rk_end + 1 != stop:  # fields that do not fit
            break
        # the content header: class 60, weight 0, body size, then the property bytes
        h = stop + 1
        hstop = _frame_end(data, h, _HEADER, channel, limit)
        if hstop - h < 21 or data[h + 7] != 0 or data[h + 8] != 60 or data[h + 9] or data[h + 10]:
            break
        body_size = (
            (data[h + 11] << 24 | data[h + 12] << 16 | data[h + 13] << 8 | data[h + 14]) << 32
            | data[h + 15] << 24
            | data[h + 16] << 16
            | data[h + 17] << 8
            | data[h + 18]
        )
        if body_size > max_size:
            break
        after = hstop + 1
        if body_size:
            bstop = _frame_end(data, after, _BODY, channel, limit)
            if bstop - after - 7 != body_size:  # also when there is no such frame (-1)
                break
            body = data[after + 7 : bstop]
            after = bstop + 1
        else:
            body = b""
        out.append((after, channel, _publish(data, p, ex_end, rk_end, data[h + 19 : hstop], body)))
        pos = after
    return out


# the method frame up to the method id, the content header frame up to the body size, a frame header
_METHOD_HEAD: Final = struct.Struct(">BHIHH").unpack_from
_HEADER_HEAD: Final = struct.Struct(">BHIHHQ").unpack_from
_FRAME_HEAD: Final = struct.Struct(">BHI").unpack_from


def _scan_struct(
    data: bytes, pos: int, channels: set[int], pending: Pending, limit: int, max_size: int
) -> Run:
    """`scan` for the interpreted build: one struct call per frame header. The length checks are
    the least a frame that passes needs (a method frame of 17 octets, a content header of 22, a
    body frame of 8), so where `_scan_octets` stops, this stops too."""
    out: Run = []
    end = len(data)
    while end - pos >= 17:
        ftype, channel, size, class_id, method_id = _METHOD_HEAD(data, pos)
        stop = pos + 7 + size
        if (
            ftype != _METHOD
            or size < 9  # class, method, ticket and three fields at the least
            or (limit and size > limit)
            or stop >= end
            or data[stop] != _END
            or channel not in channels
            or (pending and channel in pending)
            or class_id != 60  # basic.publish
            or method_id != 40
        ):
            break
        h = stop + 1
        if end - h < 22:
            break
        ftype, hchannel, size, class_id, weight, body_size = _HEADER_HEAD(data, h)
        hstop = h + 7 + size
        if (
            ftype != _HEADER
            or hchannel != channel
            or size < 14
            or (limit and size > limit)
            or hstop >= end
            or data[hstop] != _END
            or class_id != 60
            or weight
            or body_size > max_size
        ):
            break
        after = hstop + 1
        if not body_size:
            body = b""
        else:
            if end - after < 8:
                break
            ftype, bchannel, size = _FRAME_HEAD(data, after)
            bstop = after + 7 + size
            if (
                ftype != _BODY
                or bchannel != channel
                or size != body_size
                or (limit and size > limit)
                or bstop >= end
                or data[bstop] != _END
            ):
                break
            body = data[after + 7 : bstop]
            after = bstop + 1
        # the fields last: where any check fails the scan stops, whichever comes first
        p = pos + 13  # frame header, class, method, ticket
        ex_end = p + 1 + data[p]
        rk_end = ex_end + 1 + data[ex_end] if ex_end < stop else stop
        if rk_end != stop - 1:  # fields that do not fit
            break
        pos = after
        out.append((pos, channel, _publish(data, p, ex_end, rk_end, data[h + 19 : hstop], body)))
    return out


# True when this is the mypyc-compiled twin: its functions are builtins, not Python functions
COMPILED: Final = not isinstance(_frame_end, types.FunctionType)

# The whole publishes from `pos` on, as (position after the publish, channel, publish); see the
# module docstring. `channels`: the open channels; `pending`: channels with a content being
# assembled; `limit`: frame_max (0: none); `max_size`: the largest body accepted.
scan: Final = _scan_octets if COMPILED else _scan_struct
