"""A/B of raw ingest (workload (d) of bench/throughput.py) and of start-up between two source trees.

    .venv/bin/python bench/ab_ingest.py --a OLD_TREE --b NEW_TREE [--rounds 7] [--messages 200000]
        [--rabbitmq amqp://guest:guest@127.0.0.1:5672/%2F]
        [--starts 0]

A refactor of the broker's core states its effect on the ingest hot path with this: each tree gets
its own `hashbroker serve` (`python -m broker.cli.main serve` with PYTHONPATH set to that tree, each with
its own data dir so the SQLite store is on, as with the default data dir), and the rounds alternate
between them so that the VM's drifting speed hits both alike. Prints each round and the medians;
asserts nothing. Make the old tree with `git worktree add /tmp/old <commit>`.

With `--starts N` it first starts each tree's broker N times, alternating trees, and reports the
medians of the time to serve (Connection.Start answers the protocol header) and of the idle RSS
(1 s after serving, no client), measured as `bench/throughput.py` measures them; both trees are
byte-compiled first, as an install would. `--rounds 0` skips the ingest rounds.
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

from throughput import bench_raw_pipelined, free_port, rss_mib


def serve_cmd(tree: Path) -> list[str]:
    """`python -m <the tree's CLI module> serve`: the CLI moved from `broker/cli.py` to
    `broker/cli/main.py`, and an A/B must start either tree with its own code."""
    module = "broker.cli.main" if (tree / "broker" / "cli" / "main.py").exists() else "broker.cli"
    return [sys.executable, "-m", module, "serve"]


def start(tree: Path, port: int, data_dir: str) -> subprocess.Popen[bytes]:
    env = dict(os.environ, PYTHONPATH=str(tree))
    proc = subprocess.Popen(
        [*serve_cmd(tree), "--port", str(port), "--data-dir", data_dir],
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


def compile_tree(tree: Path) -> None:
    """Byte-compile a tree's packages (see `throughput.ensure_bytecode`)."""
    import compileall

    for package in ("amqpwire", "broker", "exchanges"):
        if (tree / package).is_dir():
            compileall.compile_dir(str(tree / package), quiet=1)


def start_once(tree: Path) -> tuple[float, float]:
    """Seconds to serve and idle RSS (MiB, 1 s after serving) of one fresh broker of `tree`."""
    port = free_port()
    with tempfile.TemporaryDirectory() as data_dir:
        env = dict(os.environ, PYTHONPATH=str(tree))
        t0 = time.perf_counter()
        cmd = [*serve_cmd(tree), "--host", "127.0.0.1", "--port", str(port), "--data-dir", data_dir]
        proc = subprocess.Popen(cmd, cwd=tree, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = t0 + 30
            while True:
                if time.perf_counter() > deadline or proc.poll() is not None:
                    raise RuntimeError(f"{tree}: hashbroker serve did not serve within 30 s")
                try:
                    with socket.create_connection(("127.0.0.1", port), timeout=0.2) as sock:
                        sock.settimeout(10)
                        sock.sendall(b"AMQP\x00\x00\x09\x01")
                        if sock.recv(1)[:1] == b"\x01":
                            serving = time.perf_counter() - t0
                            break
                except OSError:
                    time.sleep(0.01)
            time.sleep(1.0)
            return serving, rss_mib(proc.pid)
        finally:
            proc.terminate()
            proc.wait(10)


def measure_starts(trees: dict[str, Path], count: int) -> None:
    for tree in trees.values():
        compile_tree(tree)
    serve: dict[str, list[float]] = {name: [] for name in trees}
    rss: dict[str, list[float]] = {name: [] for name in trees}
    for r in range(count):
        for name in ("A", "B") if r % 2 == 0 else ("B", "A"):
            s, m = start_once(trees[name])
            serve[name].append(s * 1000)
            rss[name].append(m)
            print(f"start {r + 1} {name}: serving in {s * 1000:.0f} ms, idle RSS {m:.1f} MiB", flush=True)
    for name, tree in trees.items():
        print(
            f"{name} {tree}: time to serve median {statistics.median(serve[name]):.0f} ms "
            f"({min(serve[name]):.0f}-{max(serve[name]):.0f}); idle RSS median "
            f"{statistics.median(rss[name]):.2f} MiB ({min(rss[name]):.2f}-{max(rss[name]):.2f}; "
            f"{statistics.median(rss[name]) * 1.048576:.2f} MB), {count} starts"
        )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--a", required=True, type=Path, help="first source tree (e.g. the old code)")
    parser.add_argument("--b", required=True, type=Path, help="second source tree (e.g. the new code)")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--starts", type=int, default=0, help="fresh starts per tree (time to serve, RSS)")
    parser.add_argument(
        "--rabbitmq",
        default=None,
        help="also ingest into this reference broker (amqp URL) in every round, between A and B",
    )
    args = parser.parse_args()
    trees = {"A": args.a.resolve(), "B": args.b.resolve()}
    if args.starts:
        measure_starts(trees, args.starts)
    if not args.rounds:
        return 0
    rates: dict[str, list[float]] = {"A": [], "B": []}
    if args.rabbitmq:
        rates["R"] = []
    with tempfile.TemporaryDirectory() as tmp:
        procs = {}
        urls = {}
        for name, tree in trees.items():
            port = free_port()
            procs[name] = start(tree, port, os.path.join(tmp, name))
            urls[name] = f"amqp://guest:guest@127.0.0.1:{port}/%2F"
        if args.rabbitmq:
            urls["R"] = args.rabbitmq
        try:
            for r in range(args.rounds):
                order = tuple(n for n in ("A", "R", "B") if n in rates)
                order = order if r % 2 == 0 else order[::-1]
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
    if "R" in rates:
        ref = statistics.median(rates["R"])
        print(f"reference {args.rabbitmq}: median {ref:,.0f} msg/s")
        for name in ("A", "B"):
            print(f"{name}/R: {statistics.median(rates[name]) / ref:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
