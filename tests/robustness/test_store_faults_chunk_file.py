"""The stream chunk file (`streams.sqlite3`, attached to the store) is watched like the main store
file: deleted under the running broker, the store stops confirming instead of writing into an
unlinked file that a restart would not find."""

from __future__ import annotations

from pathlib import Path

import pika

from broker.store.sqlite.schema import CHUNK_FILE
from tests.robustness.test_store_faults import serving


def test_a_deleted_chunk_file_stops_confirming(tmp_path: Path) -> None:
    data, log = tmp_path / "data", tmp_path / "broker.log"
    with serving(data, log) as serve:
        conn, ch = serve.confirming_channel()
        ch.basic_publish("", "storefault-q", b"before", pika.BasicProperties(delivery_mode=2))
        for suffix in ("", "-wal", "-shm"):
            (data / f"{CHUNK_FILE}{suffix}").unlink(missing_ok=True)
        nacked = 0
        for i in range(20):
            try:
                ch.basic_publish("", "storefault-q", b"after %d" % i, pika.BasicProperties(delivery_mode=2))
            except pika.exceptions.NackError:
                nacked += 1
        conn.close()
        errors = serve.error_lines()
        assert len(errors) == 1, errors
        assert f"{CHUNK_FILE} was deleted under the running broker" in errors[0]
        assert nacked == 20
        serve.stop()
