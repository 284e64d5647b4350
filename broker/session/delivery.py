"""The channel's message output: basic.deliver, basic.get-ok and basic.return.

Every message a channel sends goes out through `_content_frames`, which frames it with the one
outbound encoder (`broker.protocol.methods.content_frames`). Management's in-process channel
overrides it to keep the method and the message instead of frames.
"""

from __future__ import annotations

from broker.entities.message import StoredMessage
from broker.protocol import methods as M
from broker.session.channel_base import ChannelBase


class DeliveryMixin(ChannelBase):
    """The channel's message output (see the module docstring)."""

    def _content_frames(self, method_payload: bytes, msg: StoredMessage, out: list[bytes]) -> None:
        M.content_frames(self.number, method_payload, msg.props, msg.body, self.conn.frame_max, out)

    def send_content(self, method_payload: bytes, msg: StoredMessage) -> None:
        """Send `msg` behind its method (deliver, get-ok or return, encoded by broker.protocol.methods)."""
        out: list[bytes] = []
        self._content_frames(method_payload, msg, out)
        self.conn.send_frames(out)

    def _send_return(self, msg: StoredMessage) -> None:
        """basic.return of an unroutable mandatory publish."""
        self.vhost.stats.return_unroutable += 1
        payload = M.return_payload(312, "NO_ROUTE", M.shortstr(msg.exchange), M.shortstr(msg.routing_key))
        self.send_content(payload, msg)
