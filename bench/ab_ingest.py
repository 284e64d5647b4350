"""A/B of raw ingest (workload (d) of bench/throughput.py) between two source trees, in one run.

    .venv/bin/python bench/ab_ingest.py --a OLD_TREE --b NEW_TREE [--rounds 7] [--messages 200000]

A refactor of the broker's core states its effect on the ingest hot path with this: each tree gets
its own `hashbroker serve` (`python -m broker.cli serve` with PYTHONPATH set to that tree, each with
its own data dir so the SQLite store is on, as with the default data dir), and the rounds alternate
between them so that the VM's drifting speed hits both alike. Prints each round and the medians;
asserts nothing. Make the old tree with `git worktree add /tmp/old <commit>`.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from throughput import bench_raw_pipelined, free_port


def start(tree: Path, port: int, data_dir: str) -> subprocess.Popen[bytes]:
    env = dict(os.environ, PYTHONPATH=str(tree))
    proc = subprocess.Popen(
        [sys.executable, "-m", "broker.cli", "serve", "--port", str(port), "--data-dir", data_dir],
        cwd=tree,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return proc
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError(f"{tree}: hashbroker serve did not listen within 30 s")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--a", required=True, type=Path, help="first source tree (e.g. the old code)")
    parser.add_argument("--b", required=True, type=Path, help="second source tree (e.g. the new code)")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--messages", type=int, default=200_000)
    args = parser.parse_args()
    trees = {"A": args.a.resolve(), "B": args.b.resolve()}
    rates: dict[str, list[float]] = {"A": [], "B": []}
    with tempfile.TemporaryDirectory() as tmp:
        procs = {}
        urls = {}
        for name, tree in trees.items():
            port = free_port()
            procs[name] = start(tree, port, os.path.join(tmp, name))
            urls[name] = f"amqp://guest:guest@127.0.0.1:{port}/%2F"
        try:
            for r in range(args.rounds):
                order = ("A", "B") if r % 2 == 0 else ("B", "A")
                for name in order:
                    rate = bench_raw_pipelined(urls[name], args.messages)
                    rates[name].append(rate)
                    print(f"round {r + 1} {name}: {rate:,.0f} msg/s", flush=True)
        finally:
            for proc in procs.values():
                proc.terminate()
                proc.wait(10)
    for name, tree in trees.items():
        print(
            f"{name} {tree}: median {statistics.median(rates[name]):,.0f} msg/s "
            f"(range {min(rates[name]):,.0f}-{max(rates[name]):,.0f}, {args.rounds} rounds)"
        )
    print(f"B/A: {statistics.median(rates['B']) / statistics.median(rates['A']):.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
