"""What a stream tracks beside its records, as osiris does, and the rules both stream logs (the
in-memory one and the broker's stream queues) follow: one place for them.

osiris keeps, per stream, each named writer's last publishing id (the chunk trailer of each write,
so a producer that comes back with the same reference has its already written ids dropped: publisher
deduplication) and each consumer reference's stored offset (a tracking chunk). Both are part of the
log on RabbitMQ and survive a restart; `Tracking.rows` / `Tracking.from_rows` are that state as the
(kind, reference, value) rows a store keeps.

The create-stream arguments are checked here too: both brokers map the same known arguments with
rabbit_stream_manager's rules.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TypeVar

from broker.streamproto.chunk import TRACK_OFFSET, TRACK_SEQUENCE, Entry
from broker.streamproto.constants import Code
from broker.streamproto.frames import Published
from broker.streamproto.ports import Confirm, Crashed, Entries

E = TypeVar("E")

#: A store row's kind for the offset the last tracking chunk took (not an osiris tracking type:
#: those are 0 and 1): a restart continues the log after it.
TRACKING_CHUNK = 255

#: The create-stream arguments RabbitMQ 3.10.8 takes: integers, and strings (x- prefixed as queue
#: arguments); any other argument is ignored.
INTEGER_ARGUMENTS = ("max-length-bytes", "stream-max-segment-size-bytes", "initial-cluster-size")
STRING_ARGUMENTS = ("max-age", "queue-leader-locator")
LEADER_LOCATORS = ("client-local", "balanced", "random", "least-leaders")


def create_arguments(
    arguments: Mapping[str, str], max_segment_bytes: int | None = None
) -> dict[str, str | int]:
    """The known create-stream arguments, integers parsed. As rabbit_stream_manager: every integer
    is converted first (one that does not parse crashes the connection, binary_to_integer), then
    the values are checked (one the stream manager refuses raises `Refused`)."""
    out: dict[str, str | int] = {}
    for key, value in arguments.items():
        if key in INTEGER_ARGUMENTS:
            try:
                out[key] = int(value)
            except ValueError:
                raise Crashed(f"binary_to_integer({value!r})") from None
        elif key in STRING_ARGUMENTS:
            out[key] = value
    size = out.get("initial-cluster-size")
    if isinstance(size, int) and size <= 0:
        raise Refused("initial-cluster-size")
    segment = out.get("stream-max-segment-size-bytes")
    if max_segment_bytes is not None and isinstance(segment, int) and segment > max_segment_bytes:
        raise Refused("stream-max-segment-size-bytes")
    if out.get("queue-leader-locator", LEADER_LOCATORS[0]) not in LEADER_LOCATORS:
        raise Refused("queue-leader-locator")
    return out


class Refused(Exception):
    """A create-stream argument the stream manager refuses (PRECONDITION_FAILED)."""

    code = Code.PRECONDITION_FAILED


def publishing_ids(entries: Sequence[tuple[int, object]]) -> list[int]:
    """The publishing ids of (id, entry) pairs (a parsed frame has them without its entries)."""
    return entries.ids if isinstance(entries, Published) else [i for i, _ in entries]


class Tracking:
    """One stream's writers (reference -> last publishing id) and stored consumer offsets."""

    __slots__ = ("offsets", "writers")

    def __init__(self) -> None:
        self.writers: dict[str, int] = {}
        self.offsets: dict[str, int] = {}

    def fresh(self, entries: Sequence[tuple[int, E]], writer: str | None) -> Sequence[tuple[int, E]]:
        """osiris deduplication: of a named writer's entries, those whose publishing id is above
        the writer's last one (`wrote` records the new last one once they are written)."""
        last = self.writers.get(writer) if writer is not None else None
        if last is None or all(i > last for i in publishing_ids(entries)):
            return entries  # as they came (a publish frame kept whole)
        return [(i, e) for i, e in entries if i > last]

    def wrote(self, writer: str | None, publishing_id: int) -> None:
        """A named writer's entries up to `publishing_id` were written."""
        if writer is not None:
            self.writers[writer] = publishing_id

    def store_offset(self, reference: str, offset: int) -> None:
        self.offsets[reference] = offset

    def query_offset(self, reference: str) -> int | None:
        return self.offsets.get(reference)

    def writer_sequence(self, reference: str) -> int | None:
        return self.writers.get(reference)

    def rows(self) -> list[tuple[int, str, int]]:
        """The state as (kind, reference, value) rows: osiris's tracking types."""
        return [(TRACK_SEQUENCE, r, v) for r, v in self.writers.items()] + [
            (TRACK_OFFSET, r, v) for r, v in self.offsets.items()
        ]

    @classmethod
    def from_rows(cls, rows: Iterable[tuple[int, str, int]]) -> Tracking:
        """The state `rows` describe (rows of other kinds are skipped)."""
        t = cls()
        for kind, reference, value in rows:
            if kind == TRACK_SEQUENCE:
                t.writers[reference] = value
            elif kind == TRACK_OFFSET:
                t.offsets[reference] = value
        return t


class TrackedLog:
    """What both stream logs do alike (`broker.streamproto.ports.StreamLog`): deduplicate a named
    writer's entries, keep stored offsets, answer the queries. A log writes the kept entries
    (`write`) and the tracking chunk of a stored offset (`write_tracking`) its own way."""

    tracking: Tracking

    def append(self, entries: Entries, writer: str | None, confirm: Confirm) -> None:
        ids = publishing_ids(entries)
        kept = self.tracking.fresh(entries, writer)
        if not kept:  # all written before: confirmed again, nothing written
            confirm(ids)
            return
        self.write(kept, writer, lambda: confirm(ids))
        if writer is not None:  # not when the write failed (it raised)
            self.tracking.wrote(writer, publishing_ids(kept)[-1])

    def write(
        self, kept: Sequence[tuple[int, Entry]], writer: str | None, committed: Callable[[], None]
    ) -> None:
        """Write one chunk of `kept` (the writer's sequence is the last id); `committed` once it
        committed."""
        raise NotImplementedError

    def store_offset(self, reference: str, offset: int) -> None:
        self.tracking.store_offset(reference, offset)
        self.write_tracking(reference, offset)

    def write_tracking(self, reference: str, offset: int) -> None:
        """Write the tracking chunk of a stored offset (it takes one offset of the log)."""
        raise NotImplementedError

    def query_offset(self, reference: str) -> int | None:
        return self.tracking.query_offset(reference)

    def writer_sequence(self, reference: str) -> int | None:
        return self.tracking.writer_sequence(reference)
