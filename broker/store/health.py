"""Is the store still writing where a restart will read? Checks of the store's files under a running
broker, and the store's fault status for alarms.

SQLite writes through file descriptors it opened at start. A store file deleted or replaced under
the broker is not noticed by SQLite: commits keep succeeding into an unlinked inode, the broker
keeps confirming, and a restart finds none of it. So the writer compares, before every commit and
every few idle seconds, each file's (device, inode) with the one it opened:

* a database file (the main one or an attached one), its `-wal` or `-shm` gone or replaced: the
  store stops for good (until a restart); nothing more can be confirmed honestly.
* a file not writable (`chattr +i`, a read-only remount): writes stop until it is writable again.
  For `-shm` this is also what keeps the process alive: SQLite maps `-shm` into memory, and
  growing a mapping of a file the kernel refuses to extend raises SIGBUS, which no Python code can
  catch. Not attempting the commit is the only defence.
* `-shm` shorter than before (truncated): the same SIGBUS on the next access; the store stops.

`fault_of(store)` and `watch(store, callback)` are how the rest of the broker (alarms, the
management API) learns about a fault without knowing the store's internals.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

SIDE_FILES = ("-wal", "-shm")


class FileProblem(Exception):
    """A store file is not where the writer writes; `fatal` when only a restart can fix it."""

    def __init__(self, reason: str, *, fatal: bool) -> None:
        super().__init__(reason)
        self.fatal = fatal


class StoreFiles:
    """The identities of the store's database files and their `-wal`/`-shm` as the writer opened
    them: the main file and the files attached beside it."""

    def __init__(self, path: Path, *attached: Path) -> None:
        self.path = path
        self._names = [f"{p}{suffix}" for p in (path, *attached) for suffix in ("", *SIDE_FILES)]
        self._ids: dict[str, tuple[int, int]] = {}
        self._sizes: dict[str, int] = {}

    @classmethod
    def probe(cls, where: str, *beside: str) -> StoreFiles | None:
        """Watch the files of the store at `where` and of the databases attached to it (file names
        `beside` it), or None when it is not a file (in memory)."""
        path = Path(where)
        if not path.is_file():
            return None
        files = cls(path, *(path.with_name(name) for name in beside))
        files.note()
        return files

    def note(self) -> None:
        """Record the files not seen yet (SQLite creates `-wal`/`-shm` on first use)."""
        if len(self._ids) == len(self._names):
            return
        for name in self._names:
            if name in self._ids:
                continue
            try:
                st = os.stat(name)
            except OSError:
                continue
            self._ids[name] = (st.st_dev, st.st_ino)
            self._sizes[name] = st.st_size

    def check(self) -> None:
        """Raise `FileProblem` when a file the writer uses is gone, replaced, shrunk or read-only."""
        for name, ident in self._ids.items():
            try:
                st = os.stat(name)
            except FileNotFoundError:
                raise FileProblem(f"{name} was deleted under the running broker", fatal=True) from None
            except OSError as exc:
                raise FileProblem(f"cannot stat {name} ({exc.strerror or exc})", fatal=False) from None
            if (st.st_dev, st.st_ino) != ident:
                raise FileProblem(f"{name} was replaced under the running broker", fatal=True)
            if name.endswith("-shm"):
                if st.st_size < self._sizes[name]:
                    raise FileProblem(f"{name} was truncated under the running broker", fatal=True)
                self._sizes[name] = st.st_size
            if not os.access(name, os.W_OK):
                raise FileProblem(f"{name} is not writable (read-only or immutable)", fatal=False)


# -- status for the rest of the broker --------------------------------------------------------------


class _HasWriterFault(Protocol):
    @property
    def fault(self) -> str | None: ...

    on_fault: Callable[[str | None], None] | None


def _writer_of(store: object) -> _HasWriterFault | None:
    writer = getattr(store, "writer", None)
    return writer if writer is not None and hasattr(writer, "on_fault") else None


def fault_of(store: object) -> str | None:
    """One line describing why the store is not confirming writes now, or None when it is healthy
    (a store without a writer, `:memory:`, never has a fault)."""
    writer = _writer_of(store)
    return None if writer is None else writer.fault


def watch_flow(store: object, callback: Callable[[bool], None]) -> None:
    """Call `callback(True)` on the event loop when the store's writer falls too far behind its
    publishers and `callback(False)` when it has caught up (a store without a writer never does)."""
    writer = getattr(store, "writer", None)
    if writer is not None and hasattr(writer, "on_flow"):
        writer.on_flow = callback


def watch(store: object, callback: Callable[[str | None], None]) -> None:
    """Call `callback(reason)` on the event loop when the store enters a fault and
    `callback(None)` when it recovers (e.g. to set and clear a resource alarm)."""
    writer = _writer_of(store)
    if writer is not None:
        writer.on_fault = callback
