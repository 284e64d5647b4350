"""Store faults under a running `hashbroker serve`: a full disk, store files deleted, an immutable
`-shm`. The broker must never confirm what a restart cannot bring back, must not keep nacked
messages in its queues, must resume by itself when the fault goes, and must say so in one line.

The disk-full test mounts a 20 MB tmpfs (root only; skipped with the reason otherwise) and fills
it with a filler file; the `-shm` test needs `chattr +i` (skipped where the filesystem refuses it).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aio_pika
import aio_pika.exceptions
import pika
import pika.exceptions
import pytest

from tests.serve_support import free_port, start_serve, stop_serve

QUEUE = "storefault-q"
STORE = "store.sqlite3"


class Serve:
    """One `hashbroker serve` subprocess on `data_dir`, its stderr kept in `log_path`."""

    def __init__(self, data_dir: Path, log_path: Path) -> None:
        self.data_dir = data_dir
        self.log_path = log_path
        self.port = free_port()
        env = {"HASHBROKER_LOG_LEVEL": "WARNING"}
        self.management_port = free_port()
        # disk_free_limit 0: these tests exercise the store when a write really fails; with the
        # default 50MB the disk alarm would block the publishers of a 20 MB filesystem first
        # (tests/robustness/test_disk_alarm.py covers that)
        args = ("--data-dir", str(data_dir), "--disk-free-limit", "0")
        args += ("--management-port", str(self.management_port))
        self._log = open(log_path, "ab")  # noqa: SIM115 - closed in stop()
        try:
            self.proc, _port = start_serve(
                *args, port=self.port, env=env, stdout=subprocess.DEVNULL, stderr=self._log
            )
        except RuntimeError as exc:
            self._log.close()
            raise AssertionError(f"broker did not start: {self.log()}") from exc

    def connect(self) -> pika.BlockingConnection:
        return pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", self.port, heartbeat=0))

    def confirming_channel(self) -> tuple[pika.BlockingConnection, Any]:
        """A connection and a channel in confirm mode, QUEUE declared durable."""
        conn = self.connect()
        ch = conn.channel()
        ch.queue_declare(QUEUE, durable=True)
        ch.confirm_delivery()
        return conn, ch

    def node(self) -> dict[str, Any]:
        """This broker's /api/nodes entry."""
        import base64
        import json
        import urllib.request

        req = urllib.request.Request(f"http://127.0.0.1:{self.management_port}/api/nodes")
        req.add_header("Authorization", "Basic " + base64.b64encode(b"guest:guest").decode())
        with urllib.request.urlopen(req, timeout=10) as resp:
            nodes: list[dict[str, Any]] = json.load(resp)
        return nodes[0]

    def stop(self) -> int | None:
        code = stop_serve(self.proc, 30)
        self._log.close()
        return code

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_log(self, text: str, within: float = 60.0) -> bool:
        """Whether `text` shows up in the log (the fault's end is logged once commits settle)."""
        deadline = time.monotonic() + within
        while text not in self.log():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.1)
        return True

    def error_lines(self) -> list[str]:
        return [line for line in self.log().splitlines() if " ERROR " in line or "Traceback" in line]


@contextlib.contextmanager
def serving(data_dir: Path, log_path: Path) -> Iterator[Serve]:
    serve = Serve(data_dir, log_path)
    try:
        yield serve
    finally:
        serve.stop()


def publish(
    ch: pika.adapters.blocking_connection.BlockingChannel, ids: range, body: bytes
) -> tuple[list[int], int]:
    """Publish persistent messages with confirms; the ids that were acked and the nack count."""
    acked: list[int] = []
    nacked = 0
    props = pika.BasicProperties(delivery_mode=2)
    for i in ids:
        props.message_id = str(i)
        try:
            ch.basic_publish("", QUEUE, body, props)
            acked.append(i)
        except pika.exceptions.NackError:
            nacked += 1
    return acked, nacked


def depth(ch: pika.adapters.blocking_connection.BlockingChannel) -> int:
    return int(ch.queue_declare(QUEUE, durable=True, passive=True).method.message_count)


def stored_ids(serve: Serve) -> set[int]:
    """Every message in the queue, by id (consumed with basic.get and acked)."""
    conn = serve.connect()
    try:
        ch = conn.channel()
        ids: set[int] = set()
        while True:
            method, props, _body = ch.basic_get(QUEUE, auto_ack=True)
            if method is None:
                return ids
            ids.add(int(props.message_id))
    except pika.exceptions.ChannelClosedByBroker as exc:
        if exc.reply_code != 404:
            raise
        return set()  # the queue itself is not there
    finally:
        if conn.is_open:
            conn.close()


@pytest.fixture(autouse=True)
def quiet_pika() -> Iterator[None]:
    """pika logs a warning per nack; thousands of them bury a failure's report."""
    logger = logging.getLogger("pika")
    level = logger.level
    logger.setLevel(logging.ERROR)
    yield
    logger.setLevel(level)


@pytest.fixture
def small_fs() -> Iterator[Path]:
    """A 20 MB tmpfs, unmounted afterwards."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    where = Path(tempfile.mkdtemp(prefix="hb-full-"))
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=20m", "tmpfs", str(where)], capture_output=True, text=True
    )
    if done.returncode != 0:
        where.rmdir()
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)
        with contextlib.suppress(OSError):
            where.rmdir()


def fill(path: Path) -> int:
    """Write `path` until the filesystem is full; returns the bytes written."""
    chunk = b"\0" * (64 * 1024)
    written = 0
    with open(path, "wb", buffering=0) as f:
        while True:
            try:
                written += f.write(chunk)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                break
            if len(chunk) > 4096 and written > 0 and os.statvfs(path).f_bavail * 4096 < len(chunk):
                chunk = b"\0" * 4096
    return written


def test_disk_full_nacks_without_queueing_and_resumes_without_restart(small_fs: Path, tmp_path: Path) -> None:
    """Disk full: nacked messages are not queued; publishing confirms again after space returns,
    no restart; after a restart every confirmed message is present."""
    data, log = small_fs / "data", tmp_path / "broker.log"
    body = b"m" * 8192
    confirmed: list[int] = []
    with serving(data, log) as serve:
        conn, ch = serve.confirming_channel()
        acked, nacked = publish(ch, range(0, 100), body)
        assert nacked == 0
        confirmed += acked
        filler = small_fs / "filler"
        fill(filler)
        acked, nacked = publish(ch, range(100, 1100), body)
        confirmed += acked
        print(f"disk full: {len(acked)} acked, {nacked} nacked of 1000")
        assert nacked > 0
        assert depth(ch) == len(confirmed)  # nothing nacked waits in the queue
        filler.unlink()
        acked, nacked = publish(ch, range(1100, 1300), body)  # no restart
        confirmed += acked
        assert nacked == 0
        assert depth(ch) == len(confirmed)
        conn.close()
        errors = serve.error_lines()
        assert len(errors) == 1, errors  # one line for the fault, none per publish
        assert "write failed" in errors[0]
        assert serve.wait_log("writes resumed")
        assert serve.stop() == 0
    with serving(data, log) as again:
        assert stored_ids(again) == set(confirmed)


async def flood(port: int, ids: range, body: bytes, window: int = 500) -> tuple[list[int], int]:
    """Publish with up to `window` confirms outstanding (big commit batches); acked ids, nacks."""
    conn = await aio_pika.connect(f"amqp://guest:guest@127.0.0.1:{port}/")
    try:
        ch = await conn.channel(publisher_confirms=True)
        acked: list[int] = []
        nacked = 0

        async def one(i: int) -> None:
            nonlocal nacked
            msg = aio_pika.Message(body, message_id=str(i), delivery_mode=aio_pika.DeliveryMode.PERSISTENT)
            try:
                await ch.default_exchange.publish(msg, QUEUE)
                acked.append(i)
            except aio_pika.exceptions.DeliveryError:
                nacked += 1

        for start in range(ids.start, ids.stop, window):
            await asyncio.gather(*(one(i) for i in range(start, min(start + window, ids.stop))))
        return acked, nacked
    finally:
        await conn.close()


@pytest.mark.slow
def test_disk_full_under_concurrent_publishers(small_fs: Path, tmp_path: Path) -> None:
    """The same with 500 confirms in flight: failed batches hold many messages at once."""
    data, log = small_fs / "data", tmp_path / "broker.log"
    body = b"c" * 1024
    with serving(data, log) as serve:
        conn = serve.connect()
        ch = conn.channel()
        ch.queue_declare(QUEUE, durable=True)
        confirmed, nacked = asyncio.run(flood(serve.port, range(0, 2000), body))
        assert nacked == 0
        filler = small_fs / "filler"
        fill(filler)
        acked, nacked = asyncio.run(flood(serve.port, range(2000, 12000), body))
        confirmed += acked
        full_depth = depth(ch)
        filler.unlink()
        again, renacked = asyncio.run(flood(serve.port, range(12000, 14000), body))
        confirmed += again
        print(f"concurrent disk full: {len(acked)} acked, {nacked} nacked of 10000; depth {full_depth}")
        assert nacked > 0
        assert full_depth == len(confirmed) - len(again)
        assert renacked == 0
        assert depth(ch) == len(confirmed)
        conn.close()
        assert serve.wait_log("writes resumed")
        assert len(serve.error_lines()) == 1, serve.error_lines()
        assert serve.stop() == 0
    with serving(data, log) as restarted:
        assert stored_ids(restarted) == set(confirmed)


def test_deleted_store_files_stop_confirming(tmp_path: Path) -> None:
    """Messages confirmed after the store files were deleted are present after a restart, or none
    were confirmed."""
    data, log = tmp_path / "data", tmp_path / "broker.log"
    with serving(data, log) as serve:
        conn, ch = serve.confirming_channel()
        acked, nacked = publish(ch, range(0, 50), b"before")
        assert (len(acked), nacked) == (50, 0)
        for suffix in ("", "-wal", "-shm"):
            (data / f"{STORE}{suffix}").unlink()
        after, nacked = publish(ch, range(50, 550), b"after")
        print(f"store deleted: {len(after)} acked, {nacked} nacked of 500")
        assert depth(ch) == 50  # the nacked ones left the queue; the earlier ones are in memory
        conn.close()
        errors = serve.error_lines()
        assert len(errors) == 1, errors
        assert "was deleted under the running broker" in errors[0]
        assert "deleted" in (serve.node()["store_fault"] or "")
        serve.stop()
    with serving(data, log) as again:
        present = stored_ids(again)
    assert set(after) <= present
    assert after == []  # a restart finds a new, empty store: nothing may have been confirmed


def test_immutable_shm_pauses_writes_without_killing_the_broker(tmp_path: Path) -> None:
    """SQLite maps `-shm`: writing through a mapping of a file the kernel will not extend is a
    SIGBUS. The broker must stay up, nack, log one line and resume once the file is writable."""
    data, log = tmp_path / "data", tmp_path / "broker.log"
    with serving(data, log) as serve:
        conn, ch = serve.confirming_channel()
        confirmed, _ = publish(ch, range(0, 20), b"x")
        shm = data / f"{STORE}-shm"
        if subprocess.run(["chattr", "+i", str(shm)], capture_output=True).returncode != 0:
            pytest.skip("chattr +i is not supported here")
        try:
            acked, nacked = publish(ch, range(20, 4020), b"y" * 4096)  # enough to grow the WAL index
            confirmed += acked
            assert serve.proc.poll() is None, serve.log()
            assert nacked == 4000
            assert depth(ch) == len(confirmed)
        finally:
            subprocess.run(["chattr", "-i", str(shm)], check=False)
        acked, nacked = publish(ch, range(4020, 4040), b"z")
        confirmed += acked
        assert nacked == 0
        conn.close()
        errors = serve.error_lines()
        assert len(errors) == 1, errors
        assert "-shm is not writable" in errors[0]
        assert serve.stop() == 0
    with serving(data, log) as again:
        assert stored_ids(again) == set(confirmed)


def test_tx_commit_fails_when_its_publish_was_not_stored(tmp_path: Path) -> None:
    """A transaction whose publish failed to store is refused (541) and leaves nothing queued, even
    when its store sync lands in a later batch that commits."""
    from broker.embedded import BrokerThread

    with BrokerThread(host="127.0.0.1", port=0, data_dir=str(tmp_path / "data")) as b:
        store = b.broker.store
        assert store is not None
        writer = store.writer  # type: ignore[attr-defined]
        conn = pika.BlockingConnection(pika.URLParameters(b.url))
        ch = conn.channel()
        ch.queue_declare(QUEUE, durable=True)
        calls = 0

        def fail_once() -> None:
            nonlocal calls
            calls += 1
            if calls == 1:
                raise OSError("disk full (simulated)")

        def later_sync() -> asyncio.Future[None]:
            """The sync reaches the writer after the publish's batch was taken: its own batch."""
            fut = writer.new_future()
            asyncio.get_running_loop().call_later(0.3, writer.submit, [], fut)
            return fut

        ch.tx_select()

        async def settled() -> None:
            await store.sync()

        # the declaration's own write must be committed before the hook is armed (on a loaded
        # machine it can still be pending here, and would take the failure meant for the publish)
        assert b.loop is not None
        asyncio.run_coroutine_threadsafe(settled(), b.loop).result(30)
        writer.commit_hook = fail_once
        store.sync = later_sync  # type: ignore[method-assign]
        ch.basic_publish("", QUEUE, b"tx", pika.BasicProperties(delivery_mode=2))
        with pytest.raises(pika.exceptions.ChannelClosedByBroker) as info:
            ch.tx_commit()
        writer.commit_hook = None
        assert info.value.reply_code == 541
        assert calls == 1  # only the publish's batch ran the hook: the sync had a batch of its own
        assert depth(conn.channel()) == 0
        conn.close()
