"""Page files (broker.store.page_spool): reads across segment files, space given back once read
past, nothing left after close, and a directory emptied when a store opens it."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.store import page_spool
from broker.store.page_spool import PageDirectory


def test_reads_span_segments_and_released_segments_leave_the_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(page_spool, "SEGMENT_BYTES", 1000)
    monkeypatch.setattr(page_spool, "WRITE_BUFFER", 300)
    spool = PageDirectory(tmp_path / "paging").new_spool()
    blobs = [bytes([i % 256]) * (37 + i % 90) for i in range(200)]
    offs = [spool.append(b) for b in blobs]
    files = sorted((tmp_path / "paging").iterdir())
    assert len(files) > 5
    whole = spool.read(0, offs[-1] + len(blobs[-1]))
    assert whole == b"".join(blobs)
    assert spool.read(offs[50], offs[120]) == b"".join(blobs[50:120])
    spool.release(offs[150])
    left = sorted((tmp_path / "paging").iterdir())
    assert 0 < len(left) < len(files)
    assert spool.read(offs[150], offs[199] + len(blobs[199])) == b"".join(blobs[150:])
    spool.close()
    assert not list((tmp_path / "paging").iterdir())


def test_a_page_directory_starts_empty(tmp_path: Path) -> None:
    stale = tmp_path / "paging"
    stale.mkdir()
    (stale / "spool-1.0").write_bytes(b"from a previous run")
    pages = PageDirectory(stale)
    assert not stale.exists()
    spool = pages.new_spool()
    assert spool.read(spool.append(b"abc"), 3) == b"abc"


@pytest.mark.parametrize("fail_on", ["write", "partial", "open"])
def test_a_failed_write_keeps_the_rest_in_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fail_on: str
) -> None:
    """A full disk: no exception reaches the queue, every byte reads back, released memory goes."""
    monkeypatch.setattr(page_spool, "SEGMENT_BYTES", 1000)
    monkeypatch.setattr(page_spool, "WRITE_BUFFER", 300)
    real_write, real_open = page_spool.os.write, page_spool.os.open
    calls = {"write": 0, "open": 0}

    def write(fd: int, data: bytes | memoryview) -> int:
        calls["write"] += 1
        if calls["write"] == 4 and fail_on == "partial":
            return int(real_write(fd, bytes(data)[:100]))  # a short write, then ENOSPC
        if calls["write"] >= (5 if fail_on == "partial" else 4) and fail_on != "open":
            raise OSError(28, "No space left on device")
        return int(real_write(fd, data))

    def open_(path: str, flags: int, mode: int = 0o777) -> int:
        if flags & page_spool.os.O_CREAT:
            calls["open"] += 1
            if fail_on == "open" and calls["open"] == 3:
                raise OSError(28, "No space left on device")
        return int(real_open(path, flags, mode))

    monkeypatch.setattr(page_spool.os, "write", write)
    monkeypatch.setattr(page_spool.os, "open", open_)
    spool = PageDirectory(tmp_path / "paging").new_spool()
    blobs = [bytes([i % 256]) * (37 + i % 90) for i in range(200)]
    offs = [spool.append(b) for b in blobs]
    assert spool._mem is not None  # the failure happened and was absorbed
    end = offs[-1] + len(blobs[-1])
    assert spool.read(0, end) == b"".join(blobs)
    assert spool.read(offs[5], offs[190]) == b"".join(blobs[5:190])
    spool.release(offs[150])
    assert len(spool._mem) <= end - offs[150]
    assert spool.read(offs[150], end) == b"".join(blobs[150:])
    spool.close()
    assert not list((tmp_path / "paging").iterdir())
