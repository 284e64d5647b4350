"""Workload (c) of bench/throughput.py with each message's latency: what waiting for company costs.

    .venv/bin/python bench/e2e_latency.py [--reference URL] [--messages N] [--rounds R] [--prefetch P]

One pika producer thread publishes ``--messages`` 16-byte bodies (the first 8 bytes its
perf_counter at publish) while one pika consumer in the same process (prefetch ``--prefetch``,
an ack with multiple=true every half prefetch) reads them and records now minus that stamp
(`bench_end_to_end` of bench/throughput.py, the workload (c) itself). Rounds
alternate between a hashbroker started here and the reference RabbitMQ; the table gives each
broker's median rate, client CPU per message, and the median over rounds of each round's 50th,
90th and 99th latency percentile. hashbroker holds a delivery for up to 1 ms when the consumer
already has more than 64 unacknowledged (`broker.session.link.DELIVERY_HOLD`): this shows what that
adds to latency and what it saves the client. Asserts nothing.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from throughput import REFERENCE_URL, bench_end_to_end, free_port, start_serve


def one_round(url: str, n: int, prefetch: int) -> tuple[float, float, list[float]]:
    """The rate, the client's CPU microseconds per message, and the sorted latencies in ms."""
    latencies: list[float] = []
    cpu0 = time.process_time()
    rate = bench_end_to_end(url, n, prefetch, latencies)
    cpu = time.process_time() - cpu0
    latencies.sort()
    return rate, cpu / n * 1e6, latencies


def percentile(sorted_values: list[float], p: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, int(len(sorted_values) * p))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--reference", default=REFERENCE_URL, help="reference broker URL (RabbitMQ)")
    parser.add_argument("--messages", type=int, default=30_000, help="messages per round")
    parser.add_argument("--rounds", type=int, default=4, help="alternating rounds (medians)")
    parser.add_argument("--prefetch", type=int, default=1000, help="consumer prefetch")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory() as data_dir:
        port = free_port()
        proc, _, _ = start_serve(port, data_dir)
        try:
            targets = {"hashbroker": f"amqp://guest:guest@127.0.0.1:{port}/%2F", "RabbitMQ": args.reference}
            results: dict[str, list[tuple[float, float, list[float]]]] = {t: [] for t in targets}
            for _ in range(args.rounds):
                for name, url in targets.items():
                    rate, cpu, lat = one_round(url, args.messages, args.prefetch)
                    print(
                        f"  {name}: {rate:,.0f} msg/s, client {cpu:.0f} us/msg, latency p50"
                        f" {percentile(lat, 0.5):.2f} p90 {percentile(lat, 0.9):.2f}"
                        f" p99 {percentile(lat, 0.99):.2f} ms",
                        file=sys.stderr,
                        flush=True,
                    )
                    results[name].append((rate, cpu, lat))
        finally:
            proc.terminate()
            proc.wait(10)
    print(
        f"# {time.strftime('%Y-%m-%d %H:%M:%S')} {args.messages:,} x 16 B per round, {args.rounds} rounds,"
        f" prefetch {args.prefetch}; medians over rounds"
    )
    print(f"{'broker':<12} {'msg/s':>8} {'client us/msg':>14} {'p50 ms':>7} {'p90 ms':>7} {'p99 ms':>7}")
    for name, rounds in results.items():

        def med(p: float, rounds: list[tuple[float, float, list[float]]] = rounds) -> float:
            return statistics.median(percentile(r[2], p) for r in rounds)

        rate = statistics.median(r[0] for r in rounds)
        cpu = statistics.median(r[1] for r in rounds)
        print(f"{name:<12} {rate:>8,.0f} {cpu:>14.0f} {med(0.5):>7.2f} {med(0.9):>7.2f} {med(0.99):>7.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
