"""A client of the broker that only does round trips, to measure how long others wait while one
client makes the broker do something expensive: a stall shows as a long round trip."""

from __future__ import annotations

import threading
import time

from pamqp import commands

from tests.differential_support import RawAmqp


class Neighbour(threading.Thread):
    """Passive queue.declare round trips in vhost "/", as fast as they come back, until stopped.

    A round trip that times out (a frozen broker) ends the thread, the wait so far counting as that
    round trip.
    """

    def __init__(self, port: int, *, call_timeout: float) -> None:
        super().__init__(daemon=True)
        self.call_timeout = call_timeout
        self.client = RawAmqp("127.0.0.1", port, timeout=2 * call_timeout)
        self.client.open_channel(1)
        self.client.call(1, commands.Queue.Declare(queue="neighbour"), commands.Queue.DeclareOk)
        self.stop = threading.Event()
        self.round_trips: list[float] = []

    def run(self) -> None:
        passive = commands.Queue.Declare(queue="neighbour", passive=True)
        while not self.stop.is_set():
            start = time.perf_counter()
            try:
                self.client.call(1, passive, commands.Queue.DeclareOk, timeout=self.call_timeout)
            except (TimeoutError, OSError):
                self.round_trips.append(time.perf_counter() - start)
                return
            self.round_trips.append(time.perf_counter() - start)

    def finish(self) -> float:
        """Stop; the longest round trip, in seconds."""
        self.stop.set()
        self.join(self.call_timeout + 10)
        self.client.close()
        assert self.round_trips, "the neighbour made no round trip"
        return max(self.round_trips)
