"""`BrokerThread`: a broker on its own event loop in a daemon thread, for synchronous code and tests.

with BrokerThread(port=0) as b:
    pika.BlockingConnection(pika.URLParameters(b.url))
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import Future
from typing import Any

from broker.runtime.settings import Settings
from broker.server import Broker


class BrokerThread:
    def __init__(self, settings: Settings | None = None, **overrides: Any) -> None:
        self.broker = Broker(settings, **overrides)
        self.loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stopped: asyncio.Event | None = None
        self._address()

    def _address(self) -> None:
        """Where clients connect: the configured address, then (after `start`) the bound one."""
        self.host: str = self.broker.host
        self.port: int = self.broker.port
        self.url: str = self.broker.url

    def start(self, timeout: float = 10.0) -> BrokerThread:
        started: Future[None] = Future()

        def run() -> None:
            loop = asyncio.new_event_loop()
            self.loop = loop
            asyncio.set_event_loop(loop)

            async def main() -> None:
                self._stopped = asyncio.Event()
                try:
                    await self.broker.start()
                except BaseException as exc:
                    started.set_exception(exc)
                    return
                started.set_result(None)
                await self._stopped.wait()
                await self.broker.stop()

            try:
                loop.run_until_complete(main())
            finally:
                loop.close()

        self._thread = threading.Thread(target=run, name="hashbroker", daemon=True)
        self._thread.start()
        started.result(timeout)
        self._address()
        return self

    def call(self, fn: Any, *args: Any) -> Any:
        """Run `fn(*args)` on the broker's loop and return its result (for inspecting state)."""
        assert self.loop is not None
        fut: Future[Any] = Future()

        def wrapper() -> None:
            try:
                fut.set_result(fn(*args))
            except BaseException as exc:
                fut.set_exception(exc)

        self.loop.call_soon_threadsafe(wrapper)
        return fut.result(10)

    def stop(self, timeout: float = 10.0) -> None:
        if self._thread is None or self.loop is None:
            return
        stopped = self._stopped
        if stopped is not None and not self.loop.is_closed():
            self.loop.call_soon_threadsafe(stopped.set)
        self._thread.join(timeout)
        self._thread = None

    def __enter__(self) -> BrokerThread:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
