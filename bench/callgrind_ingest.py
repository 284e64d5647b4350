"""Instructions per ingested message of one source tree's `hashbroker serve`, counted by callgrind.

    .venv/bin/python bench/callgrind_ingest.py --tree TREE [--small 5000] [--large 25000]

Wall-clock A/B (`bench/ab_ingest.py`) is at the mercy of a shared VM; instruction counts are not.
This runs the tree's broker under `valgrind --tool=callgrind` twice, feeding it workload (d)'s
pre-encoded publish frames (`--small` messages, then `--large`), and divides the difference of the
two runs' instruction totals by the difference of the message counts: start-up, the handshake and
the queue declaration cancel out. The client ends each run with a passive queue.declare on the
same channel, whose reply can only come after every publish before it was enqueued, so no polling
adds instructions that depend on the wall clock. Keeps the callgrind files (`--out`) for
`callgrind_annotate`. Prints one line per run and the per-message figure; asserts nothing.
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


def run(tree: Path, n: int, out: Path) -> int:
    """Total instructions of one broker run that ingests `n` messages."""
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
        client.call(commands.Queue.Declare(queue="cg.ingest"))
        one = (
            frame.marshal(commands.Basic.Publish(exchange="", routing_key="cg.ingest"), 1)
            + frame.marshal(header.ContentHeader(0, len(BODY), commands.Basic.Properties()), 1)
            + frame.marshal(ContentBody(BODY), 1)
        )
        sent = 0
        while sent < n:
            k = min(1000, n - sent)
            client.sock.sendall(one * k)
            sent += k
        ok = client.call(commands.Queue.Declare(queue="cg.ingest", passive=True))
        assert isinstance(ok, commands.Queue.DeclareOk) and ok.message_count == n, ok
        client.sock.close()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=600)
    found = re.findall(rb"Collected : (\d+)", err)
    if not found:
        raise RuntimeError(err.decode(errors="replace")[-2000:])
    return int(found[-1])


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tree", required=True, type=Path)
    parser.add_argument("--small", type=int, default=5_000)
    parser.add_argument("--large", type=int, default=25_000)
    parser.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()))
    parser.add_argument("--tag", default="")
    args = parser.parse_args()
    tree = args.tree.resolve()
    tag = args.tag or tree.name
    totals = {}
    for n in (args.small, args.large):
        out = args.out / f"callgrind.{tag}.{n}"
        totals[n] = run(tree, n, out)
        print(f"{tree} {n} messages: {totals[n]:,} instructions ({out})", flush=True)
    per = (totals[args.large] - totals[args.small]) / (args.large - args.small)
    print(f"{tag}: {per:,.0f} instructions per message")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
