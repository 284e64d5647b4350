"""Policy storage for `/api/policies` until the broker has its own policy engine (issue 4).

hashbroker does not apply policies to queues or exchanges yet. Tools that provision a broker
(rabbitmqadmin, definitions files, `hashbroker ctl set_policy`) still set them, and refusing would
break their scripts, so the management layer stores them, validates them as RabbitMQ 3.10.8 does and
hands them back (also in definitions exports). `Api` prefers the broker's own store
(`BrokerState.native_policies()`) as soon as one exists; this module is the stop-gap.
"""

from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass
from typing import Any

APPLY_TO = ("all", "queues", "exchanges")

# Keys RabbitMQ 3.10.8 recognises (core, plus the federation and sharding plugins' validators).
KNOWN_KEYS = frozenset(
    {
        "alternate-exchange",
        "dead-letter-exchange",
        "dead-letter-routing-key",
        "dead-letter-strategy",
        "delivery-limit",
        "expires",
        "federation-upstream",
        "federation-upstream-set",
        "ha-mode",
        "ha-params",
        "ha-promote-on-failure",
        "ha-promote-on-shutdown",
        "ha-sync-batch-size",
        "ha-sync-mode",
        "initial-cluster-size",
        "max-age",
        "max-in-memory-bytes",
        "max-in-memory-length",
        "max-length",
        "max-length-bytes",
        "message-ttl",
        "overflow",
        "queue-leader-locator",
        "queue-master-locator",
        "queue-mode",
        "queue-version",
        "routing-key",
        "shards-per-node",
        "stream-max-segment-size-bytes",
    }
)


class PolicyError(ValueError):
    """A policy RabbitMQ would refuse; `str(error)` is RabbitMQ's `reason` text."""


@dataclass(frozen=True)
class Policy:
    vhost: str
    name: str
    pattern: str
    apply_to: str
    definition: dict[str, Any]
    priority: int

    def to_json(self) -> dict[str, Any]:
        """RabbitMQ's key order: vhost, name, pattern, apply-to, definition, priority."""
        return {
            "vhost": self.vhost,
            "name": self.name,
            "pattern": self.pattern,
            "apply-to": self.apply_to,
            "definition": self.definition,
            "priority": self.priority,
        }


def _erl_binary(value: Any) -> str:
    """How RabbitMQ's validation messages print a value (`<<"x">>`), HTML-escaped as it sends it."""
    if isinstance(value, str):
        return html.escape(f'<<"{value}">>', quote=False)
    return html.escape(json.dumps(value), quote=False)


def parse_policy(vhost: str, name: str, body: dict[str, Any]) -> Policy:
    """Validate a PUT body the way rabbit_policy does; raise `PolicyError` with RabbitMQ's reason."""
    missing = [k for k in ("pattern", "definition") if k not in body]
    if missing:
        raise PolicyError("[" + ",".join(f"{{key_missing,{k}}}" for k in missing) + "]")
    pattern, definition = body["pattern"], body["definition"]
    apply_to = body.get("apply-to", "all")
    priority = body.get("priority", 0)
    if isinstance(definition, str):  # rabbitmqctl and some tools send the definition as JSON text
        try:
            definition = json.loads(definition)
        except ValueError:
            raise PolicyError("Validation failed\n\ndefinition must be a JSON object\n") from None
    if not isinstance(definition, dict) or not definition:
        raise PolicyError("Validation failed\n\nno policy provided\n")
    unknown = [(k, v) for k, v in definition.items() if k not in KNOWN_KEYS]
    if unknown:
        terms = ",".join(f"{{{_erl_binary(k)},{_erl_binary(v)}}}" for k, v in unknown)
        raise PolicyError(f"Validation failed\n\n[{terms}] are not recognised policy settings\n")
    if apply_to not in APPLY_TO:
        raise PolicyError(
            f"Validation failed\n\napply-to '{apply_to}' unrecognised; "
            "should be 'queues', 'exchanges' or 'all'\n"
        )
    if isinstance(priority, str) and re.fullmatch(r"-?[0-9]+", priority):
        priority = int(priority)
    if not isinstance(priority, int) or isinstance(priority, bool):
        raise PolicyError(
            f"Validation failed\n\npriority should be a number, actually was {_erl_binary(priority)}\n"
        )
    if not isinstance(pattern, str):
        raise PolicyError(f"Validation failed\n\npattern should be a string, actually was {pattern!r}\n")
    try:
        re.compile(pattern)
    except re.error as exc:
        reason = f"{_erl_binary(pattern)} is not a valid regex: {exc}"
        raise PolicyError(f"Validation failed\n\n{reason}\n") from None
    return Policy(vhost, name, pattern, apply_to, definition, priority)


class PolicyStore:
    """In-memory policies by (vhost, name), in the order they were first set.

    `applied` is False: nothing reads these when declaring queues or routing yet, so a policy set
    here is only reported back (API, definitions export, `hashbroker ctl list_policies`).
    """

    applied = False

    def __init__(self) -> None:
        self._policies: dict[tuple[str, str], Policy] = {}

    def list(self, vhost: str | None = None) -> list[Policy]:
        return [p for p in self._policies.values() if vhost is None or p.vhost == vhost]

    def get(self, vhost: str, name: str) -> Policy | None:
        return self._policies.get((vhost, name))

    def put(self, policy: Policy) -> bool:
        """Store `policy`; True when it is new (RabbitMQ answers 201), False when replaced (204)."""
        key = (policy.vhost, policy.name)
        new = key not in self._policies
        self._policies[key] = policy
        return new

    def delete(self, vhost: str, name: str) -> bool:
        return self._policies.pop((vhost, name), None) is not None
