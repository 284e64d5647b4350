"""The single-read publish shortcut: whole basic.publishes taken straight out of one read.

`CommandAssembler.events` asks `scan` for the run of publishes that starts at a position: every
basic.publish on an open channel with no content pending, whose content header and single body
frame follow it in the same read, each frame well formed and within the limits. The scan stops at
the first frame that is anything else and leaves it (and all after it) to the frame-by-frame
assembly, which reports RabbitMQ's errors, so the shortcut decides nothing the slow path would not.

Kept apart, with nothing but bytes, ints and builtin containers in it, so that `setup.py` can
compile it with mypyc (`broker.protocol._publish_scan_native`, chosen by `broker.protocol.native`);
this file is the same code, interpreted.
"""

from __future__ import annotations

from typing import Any, Final

_METHOD: Final = 1
_HEADER: Final = 2
_BODY: Final = 3
_END: Final = 0xCE

Publish = tuple[str, str, bool, bool, bytes, bytes]


def scan(
    data: bytes,
    pos: int,
    channels: set[int],
    pending: dict[int, Any],
    limit: int,
    max_size: int,
) -> list[tuple[int, int, Publish]]:
    """The whole publishes from `pos` on, as (position after the publish, channel, publish); see
    the module docstring. `channels`: the open channels; `pending`: channels with a content being
    assembled; `limit`: frame_max (0: none); `max_size`: the largest body accepted."""
    out: list[tuple[int, int, Publish]] = []
    end = len(data)
    while end - pos >= 7:
        # frame header: type, channel, payload size (read octet by octet: compiled, that is
        # cheaper than a struct call and the tuple it builds)
        channel = data[pos + 1] << 8 | data[pos + 2]
        size = data[pos + 3] << 24 | data[pos + 4] << 16 | data[pos + 5] << 8 | data[pos + 6]
        stop = pos + 7 + size
        if (
            data[pos] != _METHOD
            or (limit and size > limit)
            or stop >= end
            or data[stop] != _END
            or channel not in channels
            or (pending and channel in pending)
            or size < 9  # class, method, ticket and three fields at the least
            # basic.publish: class 60, method 40 (octet by octet, as above)
            or data[pos + 7] != 0
            or data[pos + 8] != 60
            or data[pos + 9] != 0
            or data[pos + 10] != 40
        ):
            break
        p = pos + 13  # frame header, class, method, ticket
        ex_end = p + 1 + data[p] if p < stop else stop
        rk_end = ex_end + 1 + data[ex_end] if ex_end < stop else stop
        h = stop + 1
        if rk_end + 1 != stop or end - h < 22:  # fields that do not fit, or no header here
            break
        # content header frame: type, channel, size, then class, weight, body size
        hsize = data[h + 3] << 24 | data[h + 4] << 16 | data[h + 5] << 8 | data[h + 6]
        hstop = h + 7 + hsize
        if (
            data[h] != _HEADER
            or (data[h + 1] << 8 | data[h + 2]) != channel
            or data[h + 7] != 0
            or data[h + 8] != 60
            or data[h + 9]
            or data[h + 10]
            or hsize < 14
            or (limit and hsize > limit)
            or hstop >= end
            or data[hstop] != _END
        ):
            break
        body_size = int.from_bytes(data[h + 11 : h + 19], "big")
        if body_size > max_size:
            break
        after = hstop + 1
        if body_size:
            if end - after < 8:
                break
            bsize = data[after + 3] << 24 | data[after + 4] << 16 | data[after + 5] << 8 | data[after + 6]
            bstop = after + 7 + bsize
            if (
                data[after] != _BODY
                or (data[after + 1] << 8 | data[after + 2]) != channel
                or bsize != body_size
                or (limit and bsize > limit)
                or bstop >= end
                or data[bstop] != _END
            ):
                break
            body = data[after + 7 : bstop]
            after = bstop + 1
        else:
            body = b""
        bits = data[rk_end]
        out.append(
            (
                after,
                channel,
                (
                    data[p + 1 : ex_end].decode("utf-8", "surrogateescape") if ex_end > p + 1 else "",
                    data[ex_end + 1 : rk_end].decode("utf-8", "surrogateescape"),
                    bits & 1 == 1,
                    bits & 2 == 2,
                    data[h + 19 : hstop],
                    body,
                ),
            )
        )
        pos = after
    return out
