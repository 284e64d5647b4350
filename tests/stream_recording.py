"""RabbitMQ's answers to a stream-protocol program, recorded in tests/data/stream_protocol/ so a
clone compares hashbroker with them without a live RabbitMQ. A differential test checks the
recording against the live broker, and rewrites it when run with HB_RECORD=1."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

DATA = Path(__file__).parent / "data" / "stream_protocol"


def jsonable(answers: dict[str, Any]) -> dict[str, Any]:
    """The answers as a recording holds them (tuples become lists)."""
    return json.loads(json.dumps(answers))  # type: ignore[no-any-return]


def recorded(name: str) -> dict[str, Any]:
    return json.loads((DATA / name).read_text())["answers"]  # type: ignore[no-any-return]


def check_live(name: str, rabbit: dict[str, Any]) -> dict[str, Any]:
    """The live broker's answers (`rabbit`) as JSON; with HB_RECORD=1 they are written first.
    They must equal the recording."""
    rabbit = jsonable(rabbit)
    if os.environ.get("HB_RECORD"):
        text = json.dumps({"broker": "RabbitMQ 3.10.8, rabbitmq_stream", "answers": rabbit}, indent=1)
        (DATA / name).write_text(text + "\n")
    assert rabbit == recorded(name)
    return rabbit
