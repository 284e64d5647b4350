"""Instructions per ingested (or consumed) message of one source tree's `hashbroker serve`, counted
by callgrind.

    .venv/bin/python bench/callgrind_ingest.py --tree TREE [--small 5000] [--large 25000]
                                               [--workload ingest|quorum-consume]

Wall-clock A/B (`bench/ab_ingest.py`) is at the mercy of a shared VM; instruction counts are not.
This runs the tree's broker under `valgrind --tool=callgrind` twice, feeding it workload (d)'s
pre-encoded publish frames (`--small` messages, then `--large`), and divides the difference of the
two runs' instruction totals by the difference of the message counts: start-up, the handshake and
the queue declaration cancel out. The client ends each run with a passive queue.declare on the
same channel, whose reply can only come after every publish before it was enqueued, so no polling
adds instructions that depend on the wall clock. Keeps the callgrind files (`--out`) for
`callgrind_annotate`. Prints one line per run and the per-message figure; asserts nothing.

`--workload quorum-consume` counts the consume side of `bench/queue_types.py`'s quorum workload
instead: the run publishes its messages (100 B bodies) into a durable quorum queue, then one
consumer with prefetch 1000 drains it, acking with multiple=true every 500 deliveries, and
basic.cancel's reply closes the phase. `callgrind_control --dump` splits the run between the two
phases, and only the consume phase's instructions count.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from pamqp import commands, frame, header
from pamqp.body import ContentBody
from throughput import BODY, free_port


class RawClient:
    """A pre-encoded-frame AMQP client on one socket (no client library in the measured process)."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=600)
        self.buf = b""
        self.sock.sendall(frame.marshal(header.ProtocolHeader(), 0))
        self.read()
        self.sock.sendall(frame.marshal(commands.Connection.StartOk(response="\0guest\0guest"), 0))
        tune = self.read()
        assert isinstance(tune, commands.Connection.Tune)
        tune_ok = commands.Connection.TuneOk(
            channel_max=tune.channel_max, frame_max=tune.frame_max, heartbeat=0
        )
        self.sock.sendall(frame.marshal(tune_ok, 0))
        self.sock.sendall(frame.marshal(commands.Connection.Open(virtual_host="/"), 0))
        self.read()
        self.sock.sendall(frame.marshal(commands.Channel.Open(), 1))
        self.read()

    def read(self) -> object:
        while True:
            try:
                used, _ch, value = frame.unmarshal(self.buf)
                if used:
                    self.buf = self.buf[used:]
                    return value
            except Exception:
                pass
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed")
            self.buf += chunk

    def call(self, method: Any) -> object:
        self.sock.sendall(frame.marshal(method, 1))
        return self.read()

    def publish(self, queue: str, body: bytes, n: int) -> None:
        """`n` pre-encoded publishes to `queue` through the default exchange, then a passive
        queue.declare on the same channel: its reply comes once every publish before it was
        enqueued, and says they all were."""
        one = (
            frame.marshal(commands.Basic.Publish(exchange="", routing_key=queue), 1)
            + frame.marshal(header.ContentHeader(0, len(body), commands.Basic.Properties()), 1)
            + frame.marshal(ContentBody(body), 1)
        )
        sent = 0
        while sent < n:
            k = min(1000, n - sent)
            self.sock.sendall(one * k)
            sent += k
        ok = self.call(commands.Queue.Declare(queue=queue, passive=True))
        assert isinstance(ok, commands.Queue.DeclareOk) and ok.message_count == n, ok

    def drain(self, n: int, ack_every: int) -> None:
        """Read `n` deliveries of a body that fits one frame (method, header, body frames),
        acking with multiple=true every `ack_every` deliveries and at the last; frames are split
        by hand (pamqp per frame would be the slow side)."""
        got = frames = 0
        buf, pos = self.buf, 0
        while frames < 3 * n:
            if len(buf) - pos < 7 or len(buf) < pos + 8 + int.from_bytes(buf[pos + 3 : pos + 7], "big"):
                buf = buf[pos:] + self._recv()
                pos = 0
                continue
            size = int.from_bytes(buf[pos + 3 : pos + 7], "big")
            if buf[pos] == 1 and buf[pos + 7 : pos + 11] == b"\x00\x3c\x00\x3c":
                got += 1
                if got % ack_every == 0 or got == n:
                    at = pos + 11
                    at += 1 + buf[at]  # the consumer tag
                    tag = int.from_bytes(buf[at : at + 8], "big")
                    self.sock.sendall(frame.marshal(commands.Basic.Ack(delivery_tag=tag, multiple=True), 1))
            frames += 1
            pos += 8 + size
        self.buf = buf[pos:]

    def _recv(self) -> bytes:
        chunk = self.sock.recv(1 << 20)
        if not chunk:
            raise ConnectionError("closed")
        return chunk


def run(tree: Path, n: int, out: Path, workload: str = "ingest") -> tuple[int, int]:
    """Total instructions of one broker run that ingests `n` messages (`quorum-consume`: of the
    phase that consumes them), and those of its main thread (the event loop; the store's writer
    thread is the rest). The ingest run counts its threads together: both figures are the total."""
    port = free_port()
    with tempfile.TemporaryDirectory() as data_dir:
        # libuv (under uvloop) batches epoll changes through io_uring, which valgrind cannot run:
        # the broker would hang at start. The plain epoll path is what the count then covers.
        env = dict(os.environ, PYTHONPATH=str(tree), UV_USE_IO_URING="0")
        proc = subprocess.Popen(
            [
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={out}",
                f"--separate-threads={'yes' if workload == 'quorum-consume' else 'no'}",
                sys.executable,
                "-m",
                "broker.cli.main",
                "serve",
                "--port",
                str(port),
                "--data-dir",
                data_dir,
            ],
            cwd=tree,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + 600
        while True:
            try:
                client = RawClient(port)
                break
            except OSError:
                if time.monotonic() > deadline:
                    proc.kill()
                    raise
                time.sleep(0.5)
        if workload == "quorum-consume":
            return consume_phase(client, proc, n, out)
        client.call(commands.Queue.Declare(queue="cg.ingest"))
        client.publish("cg.ingest", BODY, n)
        client.sock.close()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=600)
    found = re.findall(rb"Collected : (\d+)", err)
    if not found:
        raise RuntimeError(err.decode(errors="replace")[-2000:])
    return int(found[-1]), int(found[-1])


def consume_phase(client: RawClient, proc: subprocess.Popen[bytes], n: int, out: Path) -> tuple[int, int]:
    """Publish `n` messages into a quorum queue, dump the counts, drain the queue with one
    consumer, dump again: the instructions of the second part."""
    args = {"x-queue-type": "quorum"}
    client.call(commands.Queue.Declare(queue="cg.consume", durable=True, arguments=args))
    client.publish("cg.consume", b"x" * 100, n)
    dump(proc.pid, "published")
    client.call(commands.Basic.Qos(prefetch_count=1000))
    consume_ok = client.call(commands.Basic.Consume(queue="cg.consume", consumer_tag="cg"))
    assert isinstance(consume_ok, commands.Basic.ConsumeOk), consume_ok
    client.drain(n, 500)
    cancel_ok = client.call(commands.Basic.Cancel(consumer_tag="cg"))
    assert isinstance(cancel_ok, commands.Basic.CancelOk), cancel_ok
    dump(proc.pid, "consumed")
    client.call(commands.Queue.Delete(queue="cg.consume"))
    client.sock.close()
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=600)
    return dumped_total(out, "consumed")


def dump(pid: int, label: str) -> None:
    """A callgrind dump of the counts so far (they restart from zero after it)."""
    subprocess.run(["callgrind_control", f"--dump={label}", str(pid)], check=True, capture_output=True)


def dumped_total(out: Path, label: str) -> tuple[int, int]:
    """The instructions of the dump named `label`, of every thread and of the main one (callgrind
    writes `out.<part>-<thread>` per dump and thread)."""
    total = main = 0
    for part in sorted(out.parent.glob(out.name + ".*")):
        text = part.read_text(errors="replace")
        if f"\ndesc: Trigger: dump {label}\n" not in text:
            continue
        found = re.search(r"^(?:summary|totals): (\d+)", text, re.M)
        if found:
            total += int(found.group(1))
            if re.search(r"^thread: 1$", text, re.M):
                main = int(found.group(1))
    if not total:
        raise RuntimeError(f"no callgrind dump {label!r} next to {out}")
    return total, main


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tree", required=True, type=Path)
    parser.add_argument("--small", type=int, default=5_000)
    parser.add_argument("--large", type=int, default=25_000)
    parser.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()))
    parser.add_argument("--tag", default="")
    parser.add_argument("--workload", choices=("ingest", "quorum-consume"), default="ingest")
    args = parser.parse_args()
    tree = args.tree.resolve()
    args.out.mkdir(parents=True, exist_ok=True)  # callgrind cannot create it: it would exit at start
    tag = args.tag or tree.name
    totals, mains = {}, {}
    for n in (args.small, args.large):
        out = args.out / f"callgrind.{tag}.{args.workload}.{n}"
        for stale in [out, *out.parent.glob(out.name + ".*")]:
            stale.unlink(missing_ok=True)
        totals[n], mains[n] = run(tree, n, out, args.workload)
        main_note = f", main thread {mains[n]:,}" if args.workload != "ingest" else ""
        print(f"{tree} {n} messages: {totals[n]:,} instructions{main_note} ({out})", flush=True)
    per = (totals[args.large] - totals[args.small]) / (args.large - args.small)
    main_per = (mains[args.large] - mains[args.small]) / (args.large - args.small)
    main_note = f" (main thread {main_per:,.0f})" if args.workload != "ingest" else ""
    print(f"{tag}: {per:,.0f} instructions per message{main_note}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
