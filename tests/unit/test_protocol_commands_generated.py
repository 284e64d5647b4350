"""broker/protocol/commands.py is what tools/gen_commands.py makes of pamqp's metadata, and it decodes
every client method pamqp encodes into the typed tuple with the same field values."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from pamqp import frame

from amqpwire.fields import FieldTable
from broker.protocol import commands as C

ROOT = Path(__file__).resolve().parents[2]


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_commands", ROOT / "tools" / "gen_commands.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_checked_in_module_is_the_generator_output() -> None:
    generated = _generator().render()
    checked_in = (ROOT / "broker" / "protocol" / "commands.py").read_text()
    assert generated == checked_in, "run: python tools/gen_commands.py"


def test_every_spec_method_is_a_client_method_or_server_only() -> None:
    methods = _generator().spec_methods()
    ids = {(m.class_id, m.method_id) for m in methods}
    assert ids == set(C.SPECS) | set(C.SERVER_ONLY)
    assert not set(C.SPECS) & set(C.SERVER_ONLY)
    assert C.SPECS[(40, 10)].cls._fields[2] == "type"  # pamqp's exchange_type, RabbitMQ's record field


SAMPLE = {"octet": 7, "short": 513, "long": 70000, "longlong": 2**40 + 3}


def _sample(domain: str, position: int) -> Any:
    if domain == "bit":
        return position % 3 != 1  # not all alike, so that a misplaced bit shows
    if domain == "shortstr":
        return f"f{position}-é"
    if domain == "longstr":
        return f"f{position}-\x01"
    if domain == "table":
        return {"k": "v", "n": position}
    return SAMPLE[domain] + position


@pytest.mark.parametrize("name", [spec.name for spec in C.SPECS.values()])
def test_pamqp_encoded_method_decodes_to_its_fields(name: str) -> None:
    method = next(m for m in _generator().spec_methods() if m.name == name)
    slots = method.frame.__slots__
    sent = [_sample(getattr(method.frame, "_" + slot), i) for i, slot in enumerate(slots)]
    unchecked = type("Unchecked", (method.frame,), {"validate": lambda self: None})  # reserved fields too
    command = unchecked.__new__(unchecked)
    for slot, value in zip(slots, sent, strict=True):
        setattr(command, slot, value)
    payload = frame.marshal(command, 1)[7:-1]
    decoded = C.decode_method(payload)
    assert type(decoded) is C.SPECS[(method.class_id, method.method_id)].cls
    assert len(decoded) == len(sent)
    for field, value, expected in zip(decoded._fields, decoded, sent, strict=True):
        if isinstance(value, FieldTable):
            assert value.to_python() == expected, field
        elif isinstance(value, bytes):
            assert value == expected.encode(), field
        else:
            assert value == expected, field
