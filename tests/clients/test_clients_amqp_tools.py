"""amqp-tools (the C librabbitmq command line tools) against hashbroker and RabbitMQ 3.10.8.

Debian's ``amqp-tools`` (amqp-declare-queue, amqp-publish, amqp-get, amqp-consume, amqp-delete-queue)
run as a shell user would run them, over real sockets. One script (:func:`tools_script`) declares
queues, publishes with ``-e/-r/-p/-C/-E/-t/-H/-b/-l``, reads back with ``amqp-get`` and
``amqp-consume -c N``, routes through an ``x-consistent-hash`` exchange, and provokes the errors the
tools print (missing exchange/queue/vhost, bad password, reserved names, inequivalent redeclare,
``--if-empty``). Every step records ``[argv, exit code, stdout bytes, stderr text]``; the run's name
suffix, server-generated ``amq.gen-`` names and the broker's port are the only things normalized.
The live RabbitMQ's record must equal hashbroker's byte for byte.

The tools cannot bind or set message properties they have no flag for, so bindings and an
x-consistent-hash exchange are made with pika, and pika's basic.get shows which properties
amqp-publish's flags produced. Skipped with the reason when the tools are missing
(apt-get install -y amqp-tools).
"""

from __future__ import annotations

import difflib
import re
import shutil
import subprocess
import time
import uuid
from typing import Any

import pika
import pytest

from tests.differential_support import delete_declared, hashbroker_url, host_port, props_obs, url_params

pytestmark = [pytest.mark.slow]

TOOLS = ("amqp-declare-queue", "amqp-publish", "amqp-get", "amqp-consume", "amqp-delete-queue")
TOOL_TIMEOUT = 30.0
#: Messages published one amqp-publish process each (then read back), and lines published with -l.
N_SINGLE = 12
N_LINES = 40
N_HASHED = 24

_GEN = re.compile(rb"amq\.gen-[A-Za-z0-9_\-]+")
Step = list[Any]


def tools_missing() -> str | None:
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        return f"amqp-tools not installed (apt-get install -y amqp-tools): missing {', '.join(missing)}"
    return None


class Tools:
    """Runs the tools against one broker and records normalized steps."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.port = host_port(url)[1]
        self.suffix = uuid.uuid4().hex[:12]
        self.steps: list[Step] = []
        self.queues: list[str] = []
        self.exchanges: list[str] = []
        self.last_stdout = b""

    def name(self, label: str) -> str:
        return f"hb.tools.{label}.{self.suffix}"

    def queue(self, label: str) -> str:
        q = self.name(label)
        self.queues.append(q)
        return q

    def norm(self, data: bytes) -> bytes:
        data = data.replace(self.suffix.encode(), b"<s>")
        data = _GEN.sub(b"amq.gen-*", data)
        return data.replace(f":{self.port}".encode(), b":<port>")

    def run(self, tool: str, *args: str, url: tuple[str, str] | None = None, stdin: bytes = b"") -> Step:
        """Run one tool; record and return [argv, rc, stdout, stderr] normalized.

        ``url`` is (label, url) to connect elsewhere than the broker's default URL; the label stands
        for it in the recorded argv. The raw stdout stays in ``last_stdout``."""
        proc = subprocess.run(
            [tool, "-u", url[1] if url else self.url, *args],
            input=stdin,
            capture_output=True,
            timeout=TOOL_TIMEOUT,
        )
        self.last_stdout = proc.stdout
        argv = [self.norm(a.encode()).decode() for a in (tool, *((url[0],) if url else ()), *args)]
        step: Step = [argv, proc.returncode, self.norm(proc.stdout), self.norm(proc.stderr).decode()]
        self.steps.append(step)
        return step

    def note(self, label: str, value: Any) -> None:
        """Record something observed with pika (after normalizing names)."""
        self.steps.append([label, self.norm_value(value)])

    def norm_value(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.norm(value.encode()).decode()
        if isinstance(value, list):
            return [self.norm_value(v) for v in value]
        if isinstance(value, dict):
            return {k: self.norm_value(v) for k, v in value.items()}
        return value

    def pika_channel(self) -> tuple[pika.BlockingConnection, Any]:
        conn = pika.BlockingConnection(url_params(self.url))
        return conn, conn.channel()

    def cleanup(self) -> None:
        delete_declared(self.url, self.queues, self.exchanges)


def _wait_for_consumer(t: Tools, queue: str, deadline: float = 10.0) -> int:
    conn, ch = t.pika_channel()
    try:
        end = time.monotonic() + deadline
        while True:
            consumers = ch.queue_declare(queue, passive=True).method.consumer_count
            if consumers or time.monotonic() > end:
                return int(consumers)
            time.sleep(0.05)
    finally:
        conn.close()


def tools_script(t: Tools) -> list[Step]:
    q, qd, qb = t.queue("q"), t.queue("durable"), t.queue("binary")
    qh1, qh2 = t.queue("h1"), t.queue("h2")
    chx = t.name("chx")
    t.exchanges.append(chx)

    # declare ------------------------------------------------------------------------------------
    t.run("amqp-declare-queue", "-q", q)
    t.run("amqp-declare-queue", "-q", qd, "-d")
    t.run("amqp-declare-queue", "-q", qb)
    t.run("amqp-declare-queue", "-q", "")  # server-named, neither exclusive nor auto-delete
    if t.last_stdout.strip():
        t.queues.append(t.last_stdout.decode().strip())
    t.run("amqp-declare-queue", "-q", q)  # redeclare: same answer
    t.run("amqp-declare-queue", "-q", q, "-d")  # 406 inequivalent arg 'durable'
    t.run("amqp-declare-queue", "-q", "amq.hb-reserved")  # 403 reserved prefix
    conn, ch = t.pika_channel()
    try:
        ch.queue_bind(q, "amq.direct", t.name("rk"))
    finally:
        conn.close()

    # publish: one process per message, every flag -------------------------------------------------
    for i in range(N_SINGLE):
        args = ["-b", f"single-{i}"]
        if i % 4 == 0:
            args += ["-r", q]
        elif i % 4 == 1:
            args += ["-e", "amq.direct", "-r", t.name("rk"), "-p"]
        elif i % 4 == 2:
            args += ["-r", q, "-C", "text/plain", "-E", "utf-8", "-t", "reply.here"]
        else:
            args += ["-e", "", "-r", q, "-H", f"k: v{i}", "-H", "plain:no-space", "-H", "empty: "]
        t.run("amqp-publish", *args)
    # -l: one message per line, newline kept (N_LINES + the empty line); the unterminated last line
    # is not published
    lines = b"".join(b"line-%d\n" % i for i in range(N_LINES))
    t.run("amqp-publish", "-r", q, "-l", stdin=lines + b"\n" + b"last-without-newline")
    t.run("amqp-publish", "-r", qb, "-p", "-C", "application/octet-stream", stdin=bytes(range(256)) * 3)

    # what the flags put on the wire, seen by pika (then put back at the head of the queue) ----------
    conn, ch = t.pika_channel()
    try:
        seen = []
        tags = []
        for _ in range(4):
            method, props, body = ch.basic_get(q, auto_ack=False)
            assert method is not None
            tags.append(method.delivery_tag)
            seen.append({"body": body.decode(), "routing_key": method.routing_key, **props_obs(props)})
        t.note("pika_properties", seen)
        ch.basic_nack(tags[-1], multiple=True, requeue=True)
    finally:
        conn.close()

    # read back: amqp-get, amqp-consume -c N, amqp-get on empty ------------------------------------
    for _ in range(3):
        t.run("amqp-get", "-q", q)
    t.run("amqp-consume", "-q", q, "-c", str(N_SINGLE - 3), "-p", "5", "--", "sh", "-c", "cat; echo '|'")
    # -A (no-ack): the broker pushes everything at once, so -c takes exactly what is left
    t.run("amqp-consume", "-q", q, "-c", str(N_LINES + 1), "-A", "--", "sh", "-c", "cat; echo '|'")
    t.run("amqp-get", "-q", q)  # empty: exit code 2
    t.run("amqp-get", "-q", qb)  # a binary body (NUL bytes included) from stdin

    # amqp-consume declaring a server-named queue bound with -e/-r ---------------------------------
    consumer = subprocess.Popen(
        ["amqp-consume", "-u", t.url, "-e", "amq.direct", "-r", t.name("live"), "-c", "2", "--", "cat"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert consumer.stderr is not None
        first = consumer.stderr.readline()
        match = re.search(rb"amq\.gen-[A-Za-z0-9_\-]+", first)
        consumers = _wait_for_consumer(t, match.group().decode()) if match else -1
        t.note("server_named_consumers", consumers)
        for body in ("live-1", "live-2"):
            t.run("amqp-publish", "-e", "amq.direct", "-r", t.name("live"), "-b", body)
        out, err = consumer.communicate(timeout=TOOL_TIMEOUT)
    finally:
        if consumer.poll() is None:
            consumer.kill()
            consumer.wait()
    t.steps.append(
        [
            ["amqp-consume", "-e", "amq.direct", "-r", "<live>", "-c", "2"],
            consumer.returncode,
            t.norm(out),
            t.norm(first + err).decode(),
        ]
    )
    if match:
        conn, ch = t.pika_channel()
        try:
            ch.queue_declare(match.group().decode(), passive=True)
            t.note("server_named_after", "still there")
        except pika.exceptions.ChannelClosedByBroker as exc:
            t.note("server_named_after", f"{exc.reply_code} {exc.reply_text}")
        finally:
            if conn.is_open:
                conn.close()

    # x-consistent-hash through amqp-publish -------------------------------------------------------
    conn, ch = t.pika_channel()
    try:
        ch.exchange_declare(chx, "x-consistent-hash")
        ch.queue_declare(qh1)
        ch.queue_declare(qh2)
        ch.queue_bind(qh1, chx, "1")
        ch.queue_bind(qh2, chx, "2")
    finally:
        conn.close()
    for i in range(N_HASHED):
        t.run("amqp-publish", "-e", chx, "-r", str(i), "-b", f"hashed-{i}")
    t.run("amqp-consume", "-q", qh1, "-c", "1", "--", "cat")
    t.run("amqp-delete-queue", "-q", qh1)  # prints the messages left
    t.run("amqp-delete-queue", "-q", qh2)

    # errors -----------------------------------------------------------------------------------------
    t.run("amqp-publish", "-e", t.name("no-such-exchange"), "-r", "k", "-b", "x")
    t.run("amqp-get", "-q", t.name("no-such-queue"))
    t.run("amqp-consume", "-q", t.name("no-such-queue"), "-c", "1", "--", "cat")
    t.run("amqp-delete-queue", "-q", t.name("no-such-queue"))
    t.run("amqp-publish", "-r", qd, "-b", "keeps the queue non-empty")
    t.run("amqp-delete-queue", "-q", qd, "--if-empty")
    t.run("amqp-delete-queue", "-q", qd)
    host, port = host_port(t.url)
    t.run("amqp-get", "-q", q, url=("<bad-password>", f"amqp://guest:wrong-password@{host}:{port}/%2F"))
    t.run("amqp-get", "-q", q, url=("<no-vhost>", f"amqp://guest:guest@{host}:{port}/no-such-vhost"))
    t.run("amqp-delete-queue", "-q", q)
    return t.steps


def run_tools(url: str) -> list[Step]:
    t = Tools(url)
    try:
        return tools_script(t)
    finally:
        t.cleanup()


def _show(steps: list[Step]) -> list[str]:
    return [repr(s) for s in steps]


@pytest.fixture(scope="module")
def tools_available() -> None:
    reason = tools_missing()
    if reason:
        pytest.skip(reason)


@pytest.mark.live
@pytest.mark.timeout(240)
def test_amqp_tools_differential(tools_available: None, request: pytest.FixtureRequest) -> None:
    expected = run_tools(request.getfixturevalue("rabbitmq_url"))
    actual = run_tools(hashbroker_url(request))
    if actual != expected:
        diff = difflib.unified_diff(
            _show(expected), _show(actual), "rabbitmq-3.10.8", "hashbroker", lineterm=""
        )
        pytest.fail("amqp-tools see hashbroker differ from RabbitMQ:\n" + "\n".join(diff), pytrace=False)


@pytest.mark.timeout(120)
def test_amqp_tools_on_hashbroker_alone(tools_available: None, request: pytest.FixtureRequest) -> None:
    """A few of the differential's steps pinned to RabbitMQ 3.10.8's output, without a live RabbitMQ."""
    steps = {tuple(s[0]) if isinstance(s[0], list) else s[0]: s for s in run_tools(hashbroker_url(request))}
    assert steps[("amqp-declare-queue", "-q", "")][1:3] == [0, b"amq.gen-*\n"]
    assert steps[("amqp-publish", "-e", "hb.tools.no-such-exchange.<s>", "-r", "k", "-b", "x")][1:] == [
        1,
        b"",
        "closing channel: server channel error 404, message: "
        "NOT_FOUND - no exchange 'hb.tools.no-such-exchange.<s>' in vhost '/'\n",
    ]
    assert steps[("amqp-get", "-q", "hb.tools.no-such-queue.<s>")][1:] == [
        1,
        b"",
        "basic.get: server channel error 404, message: NOT_FOUND - no queue 'hb.tools.no-such-queue.<s>' "
        "in vhost '/'\n",
    ]
    assert steps[("amqp-get", "-q", "hb.tools.q.<s>")][1:] == [2, b"", ""]  # the last one: queue empty
    assert steps[("amqp-get", "-q", "hb.tools.binary.<s>")][1:] == [0, bytes(range(256)) * 3, ""]
    left = [int(steps[("amqp-delete-queue", "-q", f"hb.tools.{h}.<s>")][2]) for h in ("h1", "h2")]
    assert sum(left) == N_HASHED - 1
    assert steps[("amqp-delete-queue", "-q", "hb.tools.durable.<s>", "--if-empty")][1:] == [
        1,
        b"",
        "queue.delete: server channel error 406, message: PRECONDITION_FAILED - queue "
        "'hb.tools.durable.<s>' in vhost '/' not empty\n",
    ]
    assert steps["server_named_after"][1].startswith("404 NOT_FOUND - no queue 'amq.gen-*'")
