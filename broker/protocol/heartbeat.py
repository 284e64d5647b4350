"""Heartbeat policy, as RabbitMQ 3.10.8's rabbit_heartbeat runs it (observed with a raw socket).

The sender checks every half interval and sends a heartbeat frame when nothing was written since
its last check (a 2 s heartbeat: the first frame after ~1 s, then one per second on an idle
connection). The receiver checks every interval and gives up after two consecutive checks with no
octet received (a silent client is dropped 4-6 s into a 2 s heartbeat, the socket reset).

The receive counter starts at tune-ok, so the connection.open that follows counts as data. The
policy only compares byte counters the adapter already keeps, so it needs no clock: the adapter
calls `tick` every `period` seconds.
"""

from __future__ import annotations

from enum import Enum


class Beat(Enum):
    IDLE = "idle"  # nothing to do
    SEND = "send"  # write a heartbeat frame
    DEAD = "dead"  # missed heartbeats from the client: close the connection


class HeartbeatPolicy:
    __slots__ = ("_last_recv", "_last_send", "_misses", "_odd", "interval")

    MISSES = 2  # consecutive receive checks without data before the peer counts as gone

    def __init__(self, interval: int, recv_octets: int = 0) -> None:
        self.interval = interval
        self._last_recv = recv_octets
        self._last_send: int | None = None  # the first check always sends (observed at ~1 s of 2 s)
        self._misses = 0
        self._odd = False

    @property
    def period(self) -> float:
        """Seconds between `tick` calls: half the negotiated interval."""
        return self.interval / 2

    def tick(self, recv_octets: int, send_octets: int) -> Beat:
        """One half-interval check with the connection's octet counters now."""
        check_recv = self._odd
        self._odd = not self._odd
        if check_recv:
            if recv_octets == self._last_recv:
                self._misses += 1
                if self._misses >= self.MISSES:
                    return Beat.DEAD
            else:
                self._misses = 0
                self._last_recv = recv_octets
        if self._last_send is None or send_octets == self._last_send:
            return Beat.SEND
        self._last_send = send_octets
        return Beat.IDLE

    def sent_heartbeat(self, send_octets: int) -> None:
        """The adapter wrote the heartbeat frame: it counts as output."""
        self._last_send = send_octets
