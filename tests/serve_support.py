"""`hashbroker serve` in a subprocess, for the tests that need the broker in a process of its own:
to SIGKILL it, to signal it, to read its resident memory or its log, or to limit its descriptors
(an embedded `broker.embedded.BrokerThread` shares the test's process)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

REPO = Path(__file__).resolve().parent.parent


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on (at the time of asking)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_serve(
    *args: str,
    port: int | None = None,
    env: dict[str, str] | None = None,
    stdout: int | IO[Any] | None = None,
    stderr: int | IO[Any] | None = None,
    preexec_fn: Callable[[], Any] | None = None,
    wait: float = 30.0,
) -> tuple[subprocess.Popen[bytes], int]:
    """`hashbroker serve --port PORT *args` once it accepts connections: the process and the port.

    `env` is added to this process's environment. A broker that exits or does not listen within
    `wait` seconds is killed and the start fails.
    """
    port = port or free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "broker.cli.main", "serve", "--port", str(port), *args],
        cwd=REPO,
        env={**os.environ, **(env or {})},
        stdout=stdout,
        stderr=stderr,
        preexec_fn=preexec_fn,  # only to lower a resource limit in the child
    )
    wait_listening(proc, port, time.monotonic() + wait)
    return proc, port


def wait_listening(proc: subprocess.Popen[bytes], port: int, deadline: float) -> None:
    """Return once `port` accepts connections; kill `proc` and fail if it exits first or the
    monotonic `deadline` passes."""
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                proc.wait()
                raise RuntimeError(f"hashbroker serve did not start (exit code {proc.returncode})") from None
            time.sleep(0.05)


@contextlib.contextmanager
def serving_quietly(*args: str, log_level: str = "WARNING") -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """`start_serve` with its output discarded, SIGKILLed at the end: for the tests that may freeze
    the broker, which would then not answer a graceful stop."""
    proc, port = start_serve(
        *args,
        env={"HASHBROKER_LOG_LEVEL": log_level},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield proc, port
    finally:
        proc.kill()
        proc.wait(10)


def stop_serve(proc: subprocess.Popen[bytes], timeout: float = 30.0) -> int:
    """SIGTERM (a clean stop), SIGKILL if the broker has not exited within `timeout`; its exit code."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode


def proc_status(pid: int, key: str) -> int:
    """A size from /proc/<pid>/status in bytes (VmRSS: resident now, VmHWM: the peak)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no {key} in /proc/{pid}/status")
