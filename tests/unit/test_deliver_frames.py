"""basic.deliver as the outbound encoder builds it, byte for byte against pamqp's encoding of the
same frames: one body frame, a body split at frame_max, no body, no frame limit, redelivered."""

from __future__ import annotations

import pytest
from pamqp import commands, frame, header
from pamqp.body import ContentBody

from broker.protocol.methods import deliver_frame_parts, deliver_frames, shortstr

PROPS = commands.Basic.Properties(content_type="text/plain", headers={"k": "v"}, delivery_mode=2)


def property_bytes() -> bytes:
    """The properties as a content header carries them (flags, then values): what a stored
    message keeps."""
    encoded = frame.marshal(header.ContentHeader(0, 0, PROPS), 1)
    return encoded[7 + 12 : -1]


def reference(channel: int, tag: str, delivery_tag: int, redelivered: bool, body: bytes, chunk: int) -> bytes:
    out = frame.marshal(
        commands.Basic.Deliver(
            consumer_tag=tag,
            delivery_tag=delivery_tag,
            redelivered=redelivered,
            exchange="amq.direct",
            routing_key="k.1",
        ),
        channel,
    )
    out += frame.marshal(header.ContentHeader(0, len(body), PROPS), channel)
    for start in range(0, len(body), chunk):
        out += frame.marshal(ContentBody(body[start : start + chunk]), channel)
    return out


@pytest.mark.parametrize(
    ("body", "frame_max", "frames"),
    [
        (b"x" * 100, 4096, 3),
        (b"y" * 4088, 4096, 3),
        (b"z" * 10000, 4096, 5),
        (b"", 4096, 2),
        (b"w" * 10000, 0, 3),
    ],
)
@pytest.mark.parametrize("redelivered", [False, True])
def test_deliver_frames_match_pamqp(body: bytes, frame_max: int, frames: int, redelivered: bool) -> None:
    parts = deliver_frame_parts(7, shortstr("ctag-1"), "amq.direct", "k.1")
    out: list[bytes] = []
    count = deliver_frames(parts, 7, 2**40 + 3, redelivered, property_bytes(), body, frame_max, out)
    chunk = frame_max - 8 if frame_max else max(1, len(body))
    assert b"".join(out) == reference(7, "ctag-1", 2**40 + 3, redelivered, body, chunk)
    assert count == frames
