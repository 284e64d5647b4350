"""What it would cost to split the broker over processes: the numbers docs/scaling.md decides on.

    .venv/bin/python bench/ipc_cost.py [--messages 1000000] [--size 100]

1. Handing messages from one process to another over a Unix socketpair, length-prefixed, written in
   batches of 1, 16 and 256: the writer's and the reader's CPU per message (the reader parses the
   records in Python, as a queue-owner process would have to).
2. Handing an accepted connection's socket to another process (SCM_RIGHTS): CPU per connection on
   both sides.
Both sides' CPU is `time.process_time()` of each process, so other load on the machine changes the
wall time, not these figures much. Asserts nothing.
"""

from __future__ import annotations

import argparse
import array
import os
import socket
import struct
import time

_LEN = struct.Struct(">I")


def _read_records(sock: socket.socket, count: int) -> None:
    buf = bytearray()
    got = 0
    unpack = _LEN.unpack_from
    while got < count:
        data = sock.recv(1 << 20)
        if not data:
            break
        buf += data
        pos, end = 0, len(buf)
        while end - pos >= 4:
            (n,) = unpack(buf, pos)
            if end - pos - 4 < n:
                break
            bytes(buf[pos + 4 : pos + 4 + n])
            pos += 4 + n
            got += 1
        del buf[:pos]


def messages(count: int, size: int, batch: int) -> tuple[float, float]:
    """(writer, reader) CPU microseconds per message."""
    a, b = socket.socketpair()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the reader
        a.close()
        started = time.process_time()
        _read_records(b, count)
        os.write(w, struct.pack(">d", time.process_time() - started))
        os._exit(0)
    b.close()
    chunk = (_LEN.pack(size) + b"x" * size) * batch
    started = time.process_time()
    for _ in range(count // batch):
        a.sendall(chunk)
    a.close()
    writer = time.process_time() - started
    os.waitpid(pid, 0)
    (reader,) = struct.unpack(">d", os.read(r, 8))
    per = 1e6 / (count // batch * batch)
    return writer * per, reader * per


def sockets(count: int) -> tuple[float, float]:
    """(sender, receiver) CPU microseconds per socket handed over."""
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        a.close()
        started = time.process_time()
        for _ in range(count):
            _msg, ancillary, _flags, _addr = b.recvmsg(16, socket.CMSG_LEN(4))
            fds = array.array("i")
            fds.frombytes(ancillary[0][2][:4])
            os.close(fds[0])
        os.write(w, struct.pack(">d", time.process_time() - started))
        os._exit(0)
    b.close()
    conn, _peer = socket.socketpair()
    rights = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [conn.fileno()]))]
    started = time.process_time()
    for _ in range(count):
        a.sendmsg([b"/"], rights)
    sender = time.process_time() - started
    os.waitpid(pid, 0)
    (receiver,) = struct.unpack(">d", os.read(r, 8))
    return sender * 1e6 / count, receiver * 1e6 / count


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--connections", type=int, default=20_000)
    args = ap.parse_args()
    print("| hand-over | batch | sender CPU µs | receiver CPU µs |")
    print("|---|---:|---:|---:|")
    for batch in (1, 16, 256):
        writer, reader = messages(args.messages, args.size, batch)
        print(f"| {args.size}-byte message | {batch} | {writer:.2f} | {reader:.2f} |")
    sender, receiver = sockets(args.connections)
    print(f"| connection socket (SCM_RIGHTS) | 1 | {sender:.1f} | {receiver:.1f} |")


if __name__ == "__main__":
    main()
