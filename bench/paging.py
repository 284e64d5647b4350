"""Memory per queued message and time to serve after a restart, for a hashbroker source tree.

    python bench/paging.py flood   --tree DIR --messages N [--persistent]   # RSS per queued 1 KB message
    python bench/paging.py fill    --tree DIR --messages N --data DATA      # N persistent 1 KB messages
    python bench/paging.py restart --tree DIR --data DATA                   # seconds until AMQP answers

`--tree` is the source tree the broker runs from (PYTHONPATH), so two trees can be compared on the
same stored data: `fill` once, copy DATA, `restart` each tree on its copy.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pika

BODY = b"x" * 1024


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def serve(tree: str, data: str, port: int) -> tuple[subprocess.Popen[bytes], float]:
    env = {**os.environ, "PYTHONPATH": tree, "HASHBROKER_LOG_LEVEL": "WARNING"}
    cmd = [sys.executable, "-m", "broker.cli.main", "serve", "--port", str(port), "--data-dir", data]
    proc = subprocess.Popen(cmd, env=env, cwd=tree, stdout=subprocess.DEVNULL)
    t0 = time.monotonic()
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=600) as s:
                s.sendall(b"AMQP\x00\x00\x09\x01")
                s.settimeout(600)
                if s.recv(1) == b"\x01":
                    return proc, time.monotonic() - t0
        except (ConnectionRefusedError, ConnectionResetError):
            pass
        if proc.poll() is not None:
            raise SystemExit("broker exited")
        time.sleep(0.02)


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    proc.wait(600)


def publish(port: int, queue: str, n: int, mode: int) -> None:
    conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", port, heartbeat=0))
    ch = conn.channel()
    ch.queue_declare(queue, durable=True)
    props = pika.BasicProperties(delivery_mode=mode)
    for _ in range(n):
        ch.basic_publish("", queue, BODY, props)
    while ch.queue_declare(queue, passive=True).method.message_count != n:
        time.sleep(0.2)
    conn.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["flood", "fill", "restart"])
    ap.add_argument("--tree", default=str(Path(__file__).resolve().parents[1]))
    ap.add_argument("--messages", type=int, default=200_000)
    ap.add_argument("--data")
    ap.add_argument("--persistent", action="store_true")
    a = ap.parse_args()
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        data = a.data or str(Path(tmp) / "data")
        proc, seconds = serve(a.tree, data, port)
        try:
            if a.mode == "restart":
                print(f"answered AMQP after {seconds:.2f} s; RSS {rss(proc.pid) / 1e6:.0f} MB")
                return
            before = rss(proc.pid)
            publish(port, "bench-paging", a.messages, 2 if a.persistent or a.mode == "fill" else 1)
            time.sleep(3)
            grown = rss(proc.pid) - before
            print(
                f"{a.messages} x 1 KB queued: RSS +{grown / 1e6:.0f} MB, {grown / a.messages:.0f} B/message"
            )
        finally:
            stop(proc)


if __name__ == "__main__":
    main()
