"""`hashbroker demo`: consistent-hash routing of 100,000 keys, compared with RabbitMQ 3.10.8.

Starts an embedded broker on a free port and publishes through pika (a real AMQP client) with
publisher confirms, pipelined: up to `WINDOW` messages in flight, counted as the broker's
(multiple) acks come back, so the run is bound by the client's encoding, not by round trips. Once
every message is confirmed it is routed, and the per-queue depths (passive queue.declare) are
compared with the counts recorded on RabbitMQ 3.10.8. `rich` draws the progress bar and the table;
it is imported only here. `--spark` runs examples/spark_pipeline.py instead.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from exchanges import hash_implementation

# Recorded from RabbitMQ 3.10.8 (Debian 3.10.8-1.1+deb12u1, Erlang/OTP 25.2.3, consistent-hash plugin):
# exchange type x-consistent-hash, queues bound in order with binding keys "1", "1", "2", "2", one
# message per routing key "0".."99999" (topology "chx_weights_1_1_2_2", per_queue_counts).
RABBITMQ_3_10_8_COUNTS: dict[str, int] = {"q1": 16638, "q2": 16631, "q3": 33441, "q4": 33290}
WEIGHTS: dict[str, int] = {"q1": 1, "q2": 1, "q3": 2, "q4": 2}
EXCHANGE = "e"
#: Messages published but not yet confirmed, at most; more only grows the broker's buffers.
WINDOW = 5_000
#: Messages published per turn of pika's I/O loop, so confirms are read in between.
CHUNK = 500


@dataclass
class PublishRun:
    """The state of one pipelined publish through pika's SelectConnection."""

    total: int
    on_progress: Callable[[int], None]
    published: int = 0
    confirmed: int = 0
    nacked: int = 0
    error: str | None = None
    seconds: float = 0.0
    started: float = field(default=0.0, repr=False)


def publish_confirmed(url: str, total: int, on_progress: Callable[[int], None]) -> PublishRun:
    """Publish routing keys "0".."total-1" to EXCHANGE with confirms, WINDOW in flight."""
    import pika

    run = PublishRun(total, on_progress)
    keys = [str(i) for i in range(total)]
    properties = pika.BasicProperties()
    state: dict[str, Any] = {}

    def pump() -> None:
        channel = state["channel"]
        limit = min(total, run.confirmed + run.nacked + WINDOW, run.published + CHUNK)
        publish = channel.basic_publish
        for i in range(run.published, limit):
            publish(EXCHANGE, keys[i], b"", properties)
        run.published = limit
        if run.published < total and run.published - run.confirmed - run.nacked < WINDOW:
            connection.ioloop.add_callback_threadsafe(pump)

    def on_confirm(frame: Any) -> None:
        method = frame.method
        settled = run.confirmed + run.nacked
        count = method.delivery_tag - settled if method.multiple else 1
        if isinstance(method, pika.spec.Basic.Ack):
            run.confirmed += count
        else:
            run.nacked += count
        run.on_progress(run.confirmed)
        if run.confirmed + run.nacked >= total:
            run.seconds = time.perf_counter() - run.started
            connection.close()
        elif run.published < total and run.published - run.confirmed - run.nacked < WINDOW // 2:
            pump()

    def on_confirm_ok(_frame: Any) -> None:
        run.started = time.perf_counter()
        pump()

    def on_channel(channel: Any) -> None:
        state["channel"] = channel
        channel.confirm_delivery(on_confirm, callback=on_confirm_ok)

    def on_open(conn: Any) -> None:
        conn.channel(on_open_callback=on_channel)

    def on_failed(_conn: Any, exc: BaseException) -> None:
        run.error = str(exc)
        connection.ioloop.stop()

    def on_closed(_conn: Any, reason: BaseException) -> None:
        if run.confirmed + run.nacked < total and run.error is None:
            run.error = f"connection closed: {reason}"
        connection.ioloop.stop()

    connection = pika.SelectConnection(
        pika.URLParameters(url),
        on_open_callback=on_open,
        on_open_error_callback=on_failed,
        on_close_callback=on_closed,
    )
    connection.ioloop.start()
    return run


def declare_topology(url: str) -> None:
    import pika

    with pika.BlockingConnection(pika.URLParameters(url)) as conn:
        channel = conn.channel()
        channel.exchange_declare(EXCHANGE, "x-consistent-hash")
        for name, weight in WEIGHTS.items():
            channel.queue_declare(name)
            channel.queue_bind(name, EXCHANGE, routing_key=str(weight))


def queue_counts(url: str) -> dict[str, int]:
    import pika

    with pika.BlockingConnection(pika.URLParameters(url)) as conn:
        channel = conn.channel()
        return {name: channel.queue_declare(name, passive=True).method.message_count for name in WEIGHTS}


def chi_squared(counts: dict[str, int]) -> float:
    total = sum(counts.values())
    wsum = sum(WEIGHTS.values())
    chi2 = 0.0
    for name, weight in WEIGHTS.items():
        expected = total * weight / wsum
        chi2 += (counts.get(name, 0) - expected) ** 2 / expected if expected else 0.0
    return chi2


def report(counts: dict[str, int]) -> tuple[str, bool]:
    """The verdict under the table: chi-squared and whether the counts are RabbitMQ 3.10.8's."""
    same = counts == RABBITMQ_3_10_8_COUNTS
    verdict = (
        "counts are IDENTICAL to RabbitMQ 3.10.8's recorded counts"
        if same
        else f"counts DIFFER from RabbitMQ 3.10.8's recorded counts {RABBITMQ_3_10_8_COUNTS}"
    )
    chi2 = f"chi-squared = {chi_squared(counts):.2f} (3 degrees of freedom; 7.81 is the 5% critical value)"
    return f"{chi2}\n{verdict}", same


_BROKER_CHILD = """
import sys
from broker.embedded import BrokerThread
with BrokerThread(host="127.0.0.1", port=0) as broker:
    print(broker.url, flush=True)
    sys.stdin.read()
"""


@contextlib.contextmanager
def broker_process() -> Iterator[str]:
    """hashbroker in a child process, so the broker and the client each have an interpreter (and a
    core) of their own instead of sharing one GIL; it stops when its stdin closes."""
    import subprocess
    import sys

    proc = subprocess.Popen(
        [sys.executable, "-c", _BROKER_CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        url = proc.stdout.readline().strip()
        if not url.startswith("amqp://"):
            raise SystemExit("hashbroker demo: the broker did not start")
        yield url
    finally:
        proc.stdin.close()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


def run_demo(total: int = 100_000) -> int:
    """Returns the exit code: 0 when the counts equal RabbitMQ's (or a non-standard total ran)."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.table import Table

    console = Console()
    started = time.perf_counter()
    with broker_process() as url:
        console.print(f"hashbroker listening on {url.rsplit('@', 1)[1].split('/')[0]}")
        declare_topology(url)
        with Progress(
            TextColumn("publishing with confirms"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[rate]:>8,.0f} msg/s"),
            TimeElapsedColumn(),
            console=console,
        ) as progress:
            task = progress.add_task("publish", total=total, rate=0.0)
            t0 = time.perf_counter()

            def on_progress(done: int) -> None:
                progress.update(task, completed=done, rate=done / max(time.perf_counter() - t0, 1e-9))

            run = publish_confirmed(url, total, on_progress)
        if run.error is not None or run.confirmed != total:
            console.print(f"[red]publishing failed[/red]: {run.error or f'{run.nacked} messages nacked'}")
            return 1
        counts = queue_counts(url)
    rate = total / run.seconds if run.seconds else 0.0
    console.print(f"{total:,} messages confirmed in {run.seconds:.2f} s ({rate:,.0f} msg/s)")
    wsum = sum(WEIGHTS.values())
    table = Table(title="x-consistent-hash, weights 1:1:2:2")
    for column in ("queue", "weight", "messages", "share", "expected", "RabbitMQ 3.10.8"):
        table.add_column(column, justify="left" if column == "queue" else "right")
    for name, weight in WEIGHTS.items():
        n = counts.get(name, 0)
        ref = RABBITMQ_3_10_8_COUNTS[name]
        table.add_row(
            name,
            str(weight),
            f"{n:,}",
            f"{n / max(sum(counts.values()), 1):.2%}",
            f"{weight / wsum:.2%}",
            f"{ref:,}" if n == ref else f"[red]{ref:,}[/red]",
        )
    console.print(table)
    text, same = report(counts)
    chi2_line, verdict = text.split("\n")
    console.print(chi2_line)
    console.print(verdict, style="green" if same else "red", highlight=False)
    console.print(f"hashing: {hash_implementation()} (HASHBROKER_PURE=1 forces python)")
    console.print(f"total {time.perf_counter() - started:.1f} s")
    return 0 if same or total != 100_000 else 1


def run_spark_demo() -> int:
    """Run examples/spark_pipeline.py (a source checkout's) with this interpreter as Spark's Python."""
    import importlib.util
    import os
    import subprocess
    import sys
    from pathlib import Path

    example = Path(__file__).resolve().parent.parent / "examples" / "spark_pipeline.py"
    if not example.is_file():
        print(
            f"hashbroker demo --spark: {example} not found (it comes with a source checkout)", file=sys.stderr
        )
        return 2
    if importlib.util.find_spec("pyspark") is None:
        print(
            "hashbroker demo --spark needs the spark extra: pip install 'hashbroker[spark]'", file=sys.stderr
        )
        return 2
    env = dict(os.environ)
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    return subprocess.call([sys.executable, str(example)], env=env)
