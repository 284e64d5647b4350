"""Resource alarms (RabbitMQ's rabbit_alarm, vm_memory_monitor and rabbit_disk_monitor).

A poll on the event loop compares this process's resident memory with the memory high watermark
and the free space of the data dir's filesystem with the disk free limit, and sets or clears the
`memory` and `disk` alarms. Other parts of the broker may raise their own resource alarm through
`Alarms.set` / `Alarms.clear` (a store that cannot write, say). While any alarm is set, a
connection that publishes is blocked as rabbit_reader blocks it: connection.blocked with "low on
<resources>" when the client advertises the capability, and its socket is no longer read until
every alarm clears (deliveries keep flowing out). Connections that do not publish go on as before.

Flow is the quieter sibling of an alarm (RabbitMQ's credit flow): while the store's writer is
too far behind (`broker.store.sqlite.writer`), a connection that publishes is not read until the
writer catches up, without connection.blocked; management shows its state as "flow".

Setting and clearing an alarm is told to the event hub as rabbit_alarm tells rabbit_event
(`alarm.set` / `alarm.cleared`, headed `node` and `source`), which the event exchange publishes.

The publish path pays two attribute checks per socket read: `blocked_by` is an empty frozenset
while no alarm is set, and `flow` is False while the store keeps up.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Collection
from typing import TYPE_CHECKING, Any, Protocol

from broker.runtime.settings import resolve_limit

if TYPE_CHECKING:
    from broker.entities.events import Events
    from broker.runtime.settings import Settings

log = logging.getLogger("hashbroker.alarms")
MEMORY_INTERVAL = 0.5
"""Seconds between two resident-memory readings (vm_memory_monitor polls about as often)."""
DISK_INTERVAL = 2.0
"""Seconds between two free-space readings (statvfs is cheap; RabbitMQ adapts between 1 and 10 s)."""
_ORDER = ("memory", "disk")
MONITOR = "monitor"
"""The source name under which the memory and disk readings hold their alarms."""


def total_memory() -> int:
    """Bytes of RAM the machine has (vm_memory_monitor's total_memory, without cgroup limits)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 0


_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def resident_memory() -> int:
    """Resident bytes of this process (/proc/self/statm; 0 where unavailable). Message bodies
    being assembled, queued or written count, as everything the process holds does."""
    try:
        with open("/proc/self/statm", "rb") as fh:
            return int(fh.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return 0


_libc: Any = None


def release_free_memory() -> None:
    """glibc's malloc_trim(0): free heap pages go back to the kernel. Without it a process whose
    queues were drained keeps the pages resident and the memory alarm would never clear."""
    global _libc
    if _libc is None:
        try:
            import ctypes
            import ctypes.util

            _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
            _libc.malloc_trim.argtypes = [ctypes.c_size_t]
        except (OSError, AttributeError):
            _libc = False
    if _libc:
        _libc.malloc_trim(0)


def free_disk(path: str) -> int:
    """Bytes available to this user on the filesystem holding `path` (-1 when unknown)."""
    try:
        st = os.statvfs(path)
    except OSError:
        return -1
    return st.f_bavail * st.f_frsize


def blocked_reason(resources: frozenset[str]) -> str:
    """rabbit_reader's connection.blocked reason: "low on memory", "low on memory & disk"."""
    names = [r for r in _ORDER if r in resources] + sorted(r for r in resources if r not in _ORDER)
    return "low on " + " & ".join(names)


class Throttled(Protocol):
    """A connection as the alarms see it: blocked under an alarm, paused in flow."""

    @property
    def alarm_blocked(self) -> bool: ...

    @property
    def flow_paused(self) -> bool: ...

    def send_blocked(self, reason: str) -> None:
        """connection.blocked with `reason` (when the client asked to be told)."""
        ...

    def alarm_unblock(self) -> None: ...

    def flow_resume(self) -> None: ...


class AlarmHost(Protocol):
    """What the alarms read of the broker: its limits and data dir, and its open connections."""

    @property
    def settings(self) -> Settings: ...

    @property
    def connections(self) -> Collection[Throttled]: ...

    @property
    def events(self) -> Events:
        """The hub told when an alarm is set or cleared."""
        ...


class Alarms:
    """The broker's resource alarms and the monitor that sets the memory and disk ones."""

    def __init__(self, broker: AlarmHost) -> None:
        self.broker = broker
        self.blocked_by: frozenset[str] = frozenset()
        """Resources with an alarm set; empty (falsy) while publishers may go on."""
        self.flow = False
        """The store's writer is behind: publishing connections pause until it has caught up."""
        self.reasons: dict[str, str] = {}
        self.reason = ""
        self._holders: dict[str, set[str]] = {}
        """connection.blocked's text for the alarms set now."""
        s = broker.settings
        self.memory_limit = resolve_limit(s.memory_high_watermark, total_memory())
        self.disk_limit = resolve_limit(s.disk_free_limit, total_memory())
        self.mem_used = 0
        self.disk_free = -1
        self.disk_path = self._disk_path()
        self._mem_timer: asyncio.TimerHandle | None = None
        self._disk_timer: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _disk_path(self) -> str:
        data_dir = self.broker.settings.data_dir
        if data_dir and data_dir != ":memory:":
            path = os.path.abspath(data_dir)
            while not os.path.exists(path) and os.path.dirname(path) != path:
                path = os.path.dirname(path)  # the filesystem it will be created on
            return path
        return os.getcwd()

    @property
    def mem_alarm(self) -> bool:
        return "memory" in self.blocked_by

    @property
    def disk_alarm(self) -> bool:
        return "disk" in self.blocked_by

    # -- the API every part of the broker may use --------------------------------------------------

    def set(self, resource: str, reason: str = "", source: str = "") -> None:
        """Raise `resource`'s alarm for `source` (idempotent); publishing connections get blocked.

        The alarm holds while any source holds it, so a store that cannot write may hold "disk"
        while the free-space monitor (source "monitor") finds enough room."""
        holders = self._holders.setdefault(resource, set())
        if source in holders:
            return
        holders.add(source)
        if resource in self.blocked_by:
            return
        self.reasons[resource] = reason
        log.warning(
            "%s resource limit alarm set on node %s%s; publishers will be blocked until this alarm clears",
            *(resource, self._node(), f" ({reason})" if reason else ""),
        )
        self._announce("alarm.set", resource)
        self._changed(self.blocked_by | {resource})

    def clear(self, resource: str, reason: str = "", source: str = "") -> None:
        """Drop `source`'s hold on `resource` (idempotent); once nobody holds it the alarm
        clears, and with no alarm left blocked connections resume."""
        holders = self._holders.get(resource)
        if not holders or source not in holders:
            return
        holders.discard(source)
        if holders:
            return
        self.reasons.pop(resource, None)
        log.warning(
            "%s resource limit alarm cleared on node %s%s",
            *(resource, self._node(), f" ({reason})" if reason else ""),
        )
        self._announce("alarm.cleared", resource)
        self._changed(self.blocked_by - {resource})

    def _announce(self, kind: str, resource: str) -> None:
        """rabbit_alarm's rabbit_event:notify(alarm_set | alarm_cleared, [{source, Resource},
        {node, Node}]): no user performed it; the event exchange folds the list, node first."""
        from broker.entities.events import texts

        node = self._node()
        self.broker.events.emit(kind, lambda: texts(("node", node), ("source", resource)), acted=False)

    def set_flow(self, on: bool) -> None:
        """The store's writer fell behind (True) or caught up (False): paused publishers resume."""
        if on == self.flow:
            return
        self.flow = on
        if on:
            log.info("store writer behind its publishers: publishing connections in flow")
            return
        for conn in list(self.broker.connections):
            if conn.flow_paused:
                conn.flow_resume()

    def _node(self) -> str:
        nodes = self.broker.settings.nodes
        return nodes[0] if nodes else "rabbit@localhost"

    def _changed(self, now: frozenset[str]) -> None:
        """rabbit_reader's control_throttle: a blocked connection hears the new reason, or is
        unblocked when none is left; connections not blocked are left alone until they publish."""
        self.blocked_by = now
        self.reason = blocked_reason(now) if now else ""
        for conn in list(self.broker.connections):
            if conn.alarm_blocked:
                if now:
                    conn.send_blocked(self.reason)
                else:
                    conn.alarm_unblock()

    # -- the monitor ---------------------------------------------------------------------------------

    def start(self, loop: asyncio.AbstractEventLoop, store: object = None) -> None:
        """Take both readings now (a limit already passed is an alarm before any client is served)
        and poll them from then on; `store`'s writer, when it has one, sets and clears flow."""
        self._loop = loop
        if store is not None:
            from broker.store import health

            health.watch_flow(store, self.set_flow)
        self.check_memory()
        self.check_disk()

    def stop(self) -> None:
        for timer in (self._mem_timer, self._disk_timer):
            if timer is not None:
                timer.cancel()
        self._mem_timer = self._disk_timer = None
        self._loop = None

    def check_memory(self) -> None:
        """Read resident memory now, set or clear the memory alarm, and poll again later."""
        if self._mem_timer is not None:
            self._mem_timer.cancel()  # a reading asked for out of turn restarts the poll
        self._mem_timer = None
        used = resident_memory()
        if used > self.memory_limit:  # hand freed heap pages back before judging (drained queues)
            release_free_memory()
            used = resident_memory()
        self.mem_used = used
        if used:
            detail = f"memory used: {used}, allowed: {self.memory_limit}"
            if used > self.memory_limit:
                self.set("memory", detail, MONITOR)
            else:
                self.clear("memory", detail, MONITOR)
        if self._loop is not None:
            self._mem_timer = self._loop.call_later(MEMORY_INTERVAL, self.check_memory)

    def check_disk(self) -> None:
        """Read free disk space now, set or clear the disk alarm, and poll again later."""
        if self._disk_timer is not None:
            self._disk_timer.cancel()
        self._disk_timer = None
        free = self.disk_free = free_disk(self.disk_path)
        if free >= 0:
            detail = f"free bytes: {free}, limit: {self.disk_limit}"
            if free < self.disk_limit:
                self.set("disk", detail, MONITOR)
            else:
                self.clear("disk", detail, MONITOR)
        if self._loop is not None:
            with contextlib.suppress(RuntimeError):  # a loop closing under us
                self._disk_timer = self._loop.call_later(DISK_INTERVAL, self.check_disk)
