"""Exchange types load when first declared: a vhost with only the built-in types never imports the
hash exchanges (and the hash code under them); declaring one loads it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import json, sys
from amqpwire.fields import FieldTable
from broker.entities.vhost import VHost
from exchanges.compat import Compat
v = VHost("/", Compat.for_version("3.10.8"))
v.declare_exchange("d", "direct", durable=False, auto_delete=False, internal=False, arguments=FieldTable())
hash_modules = (
    "exchanges.types.consistent_hash",
    "exchanges.types.modulus_hash",
    "exchanges.hashing.hashcore",
)
before = [m for m in hash_modules if m in sys.modules]
v.declare_exchange("h", "x-consistent-hash", durable=False, auto_delete=False, internal=False,
                   arguments=FieldTable())
after = [m for m in hash_modules if m in sys.modules]
print(json.dumps({"before": before, "after": after, "predeclared": sorted(v.exchanges)}))
"""


def test_hash_exchange_types_load_on_first_declare() -> None:
    out = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, check=True, timeout=60
    )
    seen = json.loads(out.stdout)
    assert seen["before"] == []
    assert (
        "exchanges.types.consistent_hash" in seen["after"]
        and "exchanges.types.modulus_hash" not in seen["after"]
    )
    assert seen["predeclared"] == [
        "",
        "amq.direct",
        "amq.fanout",
        "amq.headers",
        "amq.match",
        "amq.rabbitmq.trace",
        "amq.topic",
        "d",
        "h",
    ]
