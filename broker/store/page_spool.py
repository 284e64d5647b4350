"""Page files: where classic queues keep the messages they page out of memory.

`PageDirectory` is `<data dir>/paging`, emptied when the store opens: paged messages are a
running broker's overflow, never state to recover (persistent messages are in the store anyway),
so transient messages never survive a restart. Each `Spool` is one queue level's append-only
stream, cut into segment files; a queue reads its spool front to back, so a segment is deleted
once the queue has read past it. Writes are buffered and never fsynced.

A write that fails (a full disk) costs no message and no connection: that spool keeps the rest of
its stream in memory, as if paging had stopped, until the queue has read it; the next spool tries
the disk again. The disk alarm (`disk_free_limit`) normally blocks publishers before this happens.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import time
from pathlib import Path

log = logging.getLogger("hashbroker.paging")

#: A spool starts a new segment file past this size (the unit disk space is given back in).
SEGMENT_BYTES = 16 << 20
#: Writes are collected up to this size before they go to the file.
WRITE_BUFFER = 1 << 20
#: At most one log line per this many seconds about failed page writes.
LOG_INTERVAL = 10.0
_last_log = -LOG_INTERVAL


def _log_failure(exc: OSError) -> None:
    global _last_log
    now = time.monotonic()
    if now - _last_log >= LOG_INTERVAL:
        _last_log = now
        log.warning("cannot write a page file (%s): the queue keeps these messages in memory", exc)


class PageDirectory:
    """The page files of one broker (broker.entities.queues.classic.paging.PageSpool factory)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._next = 0
        shutil.rmtree(path, ignore_errors=True)

    def new_spool(self) -> Spool:
        if self._next == 0:
            self.path.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._next += 1
        return Spool(self.path / f"spool-{self._next}")


class Spool:
    """An append-only byte stream in segment files `<prefix>.<n>` (see the module docstring)."""

    def __init__(self, prefix: Path) -> None:
        self.prefix = prefix
        self.end = 0  # the stream's length
        self._segments: list[list[int]] = []  # [number, start offset, end offset]
        self._fd = -1
        self._written = 0  # stream offset up to which the current segment's file has the bytes
        self._buf = bytearray()
        self._mem: bytearray | None = None  # after a failed write: the stream from `_mem_base` on
        self._mem_base = 0
        self._file_end = 0  # after a failed write: where the files' part of the stream ends

    def _path(self, number: int) -> str:
        return f"{self.prefix}.{number}"

    def append(self, blob: bytes) -> int:
        off = self.end
        self.end = off + len(blob)
        if self._mem is not None:
            self._mem += blob
            return off
        segs = self._segments
        if not segs or off - segs[-1][1] >= SEGMENT_BYTES:
            self._flush()
            try:
                if self._mem is None:
                    if self._fd >= 0:
                        os.close(self._fd)
                        self._fd = -1
                    number = segs[-1][0] + 1 if segs else 0
                    self._fd = os.open(self._path(number), os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
                    segs.append([number, off, off])
            except OSError as exc:
                self._to_memory(exc, bytearray())
            if self._mem is not None:
                self._mem += blob
                return off
        self._buf += blob
        segs[-1][2] = self.end
        if len(self._buf) >= WRITE_BUFFER:
            self._flush()
        return off

    def _flush(self) -> None:
        buf = self._buf
        if not buf or self._mem is not None:
            return
        try:
            while buf:
                n = os.write(self._fd, buf)
                self._written += n
                del buf[:n]
        except OSError as exc:
            self._to_memory(exc, bytearray(buf))
            buf.clear()

    def _to_memory(self, exc: OSError, unwritten: bytearray) -> None:
        """A write failed: the stream from what the files hold on lives in memory."""
        _log_failure(exc)
        self._mem = unwritten
        self._mem_base = self._file_end = self._written
        if self._segments:
            self._segments[-1][2] = self._written

    def read(self, start: int, end: int) -> bytes:
        if end > self._written:
            self._flush()
        parts: list[bytes] = []
        mem = self._mem
        file_end = self._file_end if mem is not None else end
        if start < file_end:
            last = self._segments[-1][0]
            for number, s, e in self._segments:
                if e <= start or s >= min(end, file_end):
                    continue
                lo, hi = max(start, s), min(end, e, file_end)
                if number == last and self._fd >= 0:
                    parts.append(os.pread(self._fd, hi - lo, lo - s))
                    continue
                fd = os.open(self._path(number), os.O_RDONLY)
                try:
                    parts.append(os.pread(fd, hi - lo, lo - s))
                finally:
                    os.close(fd)
        if mem is not None and end > self._file_end:
            base = self._mem_base
            parts.append(bytes(mem[max(start, base) - base : end - base]))
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def release(self, upto: int) -> None:
        mem = self._mem
        if mem is not None and upto > self._mem_base:
            del mem[: upto - self._mem_base]  # the memory part is read front to back too
            self._mem_base = upto
        segs = self._segments
        while len(segs) > 1 and segs[0][2] <= upto:
            number = segs.pop(0)[0]
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self._path(number))

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        for number, _s, _e in self._segments:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self._path(number))
        self._segments.clear()
        self._buf.clear()
        self._mem = None
