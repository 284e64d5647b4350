"""RabbitMQ 3.10.8 policies, without I/O: validation, matching, and how values combine with x-arguments.

Why a model of its own: the sharding plugin is configured only through policies (`shards-per-node`,
`routing-key`), and queue/exchange behaviour (TTL, length limits, dead-lettering, alternate
exchange) can come from a policy or from x-arguments, so the broker needs RabbitMQ's exact answers
to "which policy applies to this queue" and "which value wins".

What RabbitMQ does (deps/rabbit/src/rabbit_policy.erl, rabbit_policies.erl, rabbit_amqqueue_process.erl
at v3.10.8; error texts observed with `rabbitmqctl set_policy`, tests/data/sharding_observations.json):

* Matching: `apply-to` (`all`|`exchanges`|`queues`) must fit the kind, the vhost must be equal and
  the pattern is searched unanchored and byte by byte (`re:run` on binaries; matched in linear
  time by broker.entities.patterns). Among matches the highest priority wins
  (`lists:sort` with `>=`, stable, head taken). Equal priorities keep the order
  `rabbit_runtime_parameters:list/2` returns (a Mnesia table walk, not a documented order); we pick
  the policy whose name sorts first by bytes, which is deterministic and matches the observed cases.
* Validation: the definition must be non-empty ("no policy provided"); validator modules run one
  after another (sharding's before the core ones, as observed), each on its own keys in key byte
  order, and the first error wins; keys nobody validates are reported last as
  "[{<<"foo">>,1}] are not recognised policy settings". Values are printed with Erlang's `~p`.
* Policy vs x-argument (classic queues, rabbit_amqqueue_process:process_args_policy): the smaller
  value wins for `expires`, `message-ttl`, `max-length`, `max-length-bytes`; the x-argument wins for
  `dead-letter-exchange`, `dead-letter-routing-key`, `overflow`, `queue-mode`, `queue-version`.
  Exchanges: the `alternate-exchange` x-argument wins over the policy (rabbit_policy:get_arg).
  Operator policies merge with user policies by `min` for the numeric limits (rabbit_policies:
  merge_policy_value); provided here as `merge_operator_value`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from broker.entities.patterns import PatternError, UserPattern, compile_user_pattern
from exchanges.erlang.format import erlang_float, format_binary_p

ApplyTo = Literal["all", "exchanges", "queues"]
Kind = Literal["exchange", "queue"]
#: A queue type's is_policy_applicable: whether a policy may apply to a queue of that type at all.
Applicable = Callable[["Policy"], bool]
APPLY_TO: tuple[str, ...] = ("all", "exchanges", "queues")

# Keys where the smaller of policy and x-argument wins; the rest of QUEUE_ARG_KEYS: the argument wins.
MIN_WINS = frozenset({"expires", "message-ttl", "max-length", "max-length-bytes"})
ARG_WINS = frozenset(
    {"dead-letter-exchange", "dead-letter-routing-key", "overflow", "queue-mode", "queue-version"}
)
OPERATOR_MIN = frozenset(
    {
        "expires",
        "message-ttl",
        "max-length",
        "max-length-bytes",
        "max-in-memory-length",
        "max-in-memory-bytes",
        "delivery-limit",
    }
)


class PolicyError(ValueError):
    """A refused `set_policy`: `message` is the text rabbitmqctl prints.

    `validation_failed` is True when rabbitmqctl prints "Validation failed" above the message (every
    case except JSON decoding errors); rabbitmqctl exits 69 in both cases.
    """

    def __init__(self, message: str, validation_failed: bool = True) -> None:
        super().__init__(message)
        self.message = message
        self.validation_failed = validation_failed


class PolicyCrash(PolicyError):
    """A value RabbitMQ 3.10.8's validator crashes on (its API answers 500 with no body)."""


class PolicyNotFound(KeyError):
    """`clear_policy` of a name that does not exist: rabbitmqctl says "Parameter does not exist"."""

    message = "Parameter does not exist"


# --- Erlang ~p for decoded JSON values ----------------------------------------------------------


def erlang_p(value: Any) -> str:
    """`io_lib:format("~p", [V])` for a JSON value as rabbit_json decodes it (strings are binaries)."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return format_binary_p(value.encode("utf-8")).decode("latin-1")
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return erlang_float(value)
    if isinstance(value, list):
        return "[" + ",".join(erlang_p(v) for v in value) + "]"
    if isinstance(value, Mapping):
        items = sorted(value.items(), key=lambda kv: kv[0].encode())
        return "#{" + ",".join(f"{erlang_p(k)} => {erlang_p(v)}" for k, v in items) + "}"
    return repr(value)


def _unrecognised(items: list[tuple[str, Any]]) -> str:
    body = ",".join(f"{{{erlang_p(k)},{erlang_p(v)}}}" for k, v in items)
    return f"[{body}] are not recognised policy settings"


# --- validators ----------------------------------------------------------------------------------


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _validate_sharding(terms: dict[str, Any]) -> str | None:
    """rabbit_sharding_policy_validator:validate_policy/1."""
    if "shards-per-node" not in terms:
        return "shards-per-node must be specified" if "routing-key" in terms else None
    spn: Any = terms["shards-per-node"]
    if not _is_number(spn):
        return f"shards-per-node should be a number, actually was {erlang_p(spn)}"
    if spn < 0:
        return f"shards-per-node should be greater than 0, actually was {erlang_p(spn)}"
    if "routing-key" in terms and not isinstance(terms["routing-key"], str):
        return f"routing-key should be binary, actually was {erlang_p(terms['routing-key'])}"
    return None


def _check(pred: Callable[[Any], bool], text: str) -> Callable[[Any], str | None]:
    return lambda v: None if pred(v) else f"{erlang_p(v)} {text}"


_CORE: dict[str, Callable[[Any], str | None]] = {
    "alternate-exchange": _check(lambda v: isinstance(v, str), "is not a valid alternate exchange name"),
    "dead-letter-exchange": _check(lambda v: isinstance(v, str), "is not a valid dead letter exchange name"),
    "dead-letter-routing-key": _check(lambda v: isinstance(v, str), "is not a valid dead letter routing key"),
    "dead-letter-strategy": _check(
        lambda v: v in ("at-most-once", "at-least-once"), "is not a valid dead letter strategy"
    ),
    "message-ttl": _check(lambda v: _is_int(v) and v >= 0, "is not a valid message TTL"),
    "expires": _check(lambda v: _is_int(v) and v >= 1, "is not a valid queue expiry"),
    "max-length": _check(lambda v: _is_int(v) and v >= 0, "is not a valid maximum length"),
    "max-length-bytes": _check(lambda v: _is_int(v) and v >= 0, "is not a valid maximum length in bytes"),
    "queue-mode": _check(lambda v: v in ("default", "lazy"), "is not a valid queue-mode value"),
    "queue-version": _check(lambda v: _is_int(v) and v in (1, 2), "is not a valid queue-version value"),
    "overflow": _check(
        lambda v: v in ("drop-head", "reject-publish", "reject-publish-dlx"), "is not a valid overflow value"
    ),
    "delivery-limit": _check(lambda v: _is_int(v) and v >= 0, "is not a valid delivery limit"),
}
_CORE.update(
    {
        "max-in-memory-length": _check(
            lambda v: _is_int(v) and v >= 0, "is not a valid maximum memory in bytes"
        ),
        "max-in-memory-bytes": _check(
            lambda v: _is_int(v) and v >= 0, "is not a valid maximum memory in bytes"
        ),
        "queue-master-locator": _check(
            lambda v: v in ("min-masters", "client-local", "random"), "invalid queue-master-locator value"
        ),
        "queue-leader-locator": _check(
            lambda v: v in ("client-local", "balanced", "random", "least-leaders"),
            "is not a valid queue leader locator value",
        ),
        "initial-cluster-size": _check(lambda v: _is_int(v) and v >= 0, "is not a valid cluster size"),
        "stream-max-segment-size-bytes": _check(
            lambda v: _is_int(v) and v >= 0, "is not a valid segment size"
        ),
    }
)
_MAX_AGE = re.compile(r"[0-9]+(Y|M|D|h|m|s)")


def _validate_max_age(v: Any) -> str | None:
    """rabbit_amqqueue:check_max_age: digits and a unit; without leading digits 3.10.8 crashes."""
    if isinstance(v, str) and _MAX_AGE.fullmatch(v):
        return None
    if isinstance(v, str) and v[:1].isdigit():
        return f"{erlang_p(v)} is not a valid max age"
    raise PolicyCrash(f"{erlang_p(v)} crashes rabbit_amqqueue:check_max_age")


_CORE["max-age"] = _validate_max_age
HA_KEYS = frozenset(
    {
        "ha-mode",
        "ha-params",
        "ha-sync-mode",
        "ha-sync-batch-size",
        "ha-promote-on-shutdown",
        "ha-promote-on-failure",
    }
)


def _validate_ha(terms: dict[str, Any]) -> str | None:
    """rabbit_mirror_queue_misc:validate_policy/1 (classic mirroring: accepted, never applied)."""
    mode = terms.get("ha-mode")
    if mode is None:
        if {"ha-params", "ha-sync-mode", "ha-promote-on-shutdown"} & set(terms):
            return "ha-mode must be specified to specify ha-params, ha-sync-mode or ha-promote-on-shutdown"
        return None
    params = terms.get("ha-params")
    if mode == "all" and params is not None:
        return 'ha-mode="all" does not take parameters'
    if mode == "exactly" and params is None:
        return 'ha-mode="exactly" takes an integer, none given'
    if mode == "nodes" and params is None:
        return 'ha-mode="nodes" takes a list of strings, none given'
    if mode not in ("all", "exactly", "nodes"):
        return f"{erlang_p(mode)} is not a valid ha-mode value"
    sync = terms.get("ha-sync-mode")
    if sync is not None and sync not in ("manual", "automatic"):
        return f'ha-sync-mode must be "manual" or "automatic", got {erlang_p(sync)}'
    return None


SHARDING_KEYS = frozenset({"shards-per-node", "routing-key"})
KNOWN_KEYS = SHARDING_KEYS | HA_KEYS | frozenset(_CORE)


def validate_definition(definition: Mapping[str, Any]) -> None:
    """Raise PolicyError with RabbitMQ's text if the definition would be refused."""
    if not isinstance(definition, Mapping):
        raise PolicyError(f"definition must be a dictionary: {erlang_p(definition)}")
    if not definition:
        raise PolicyError("no policy provided")
    terms = dict(definition)
    # 1. rabbit_sharding_policy_validator (observed to run before the core validator)
    sharding_terms = {k: v for k, v in terms.items() if k in SHARDING_KEYS}
    if sharding_terms:
        error = _validate_sharding(sharding_terms)
        if error:
            raise PolicyError(error)
    # 2. rabbit_policies: its keys in key byte order (maps:to_list), first error wins
    for key in sorted((k for k in terms if k in _CORE), key=lambda k: k.encode()):
        error = _CORE[key](terms[key])
        if error:
            raise PolicyError(error)
    ha_terms = {k: v for k, v in terms.items() if k in HA_KEYS}
    if ha_terms:
        error = _validate_ha(ha_terms)
        if error:
            raise PolicyError(error)
    # 3. leftovers
    left = sorted(((k, v) for k, v in terms.items() if k not in KNOWN_KEYS), key=lambda kv: kv[0].encode())
    if left:
        raise PolicyError(_unrecognised(left))


def validation_errors(pattern: Any, definition: Any, priority: Any, apply_to: Any) -> list[str]:
    """Every reason rabbit_policy refuses a policy, in the order its API lists them (one per line).

    PolicyCrash propagates: RabbitMQ answers those values with a crash, not a list.
    """
    errors = []
    try:
        validate_definition(definition)
    except PolicyCrash:
        raise
    except PolicyError as exc:
        errors.append(exc.message)
    if apply_to not in APPLY_TO:
        errors.append(f"apply-to '{apply_to}' unrecognised; should be 'queues', 'exchanges' or 'all'")
    if not isinstance(pattern, str):
        errors.append(f"pattern should be a binary but was {erlang_p(pattern)}")
    else:
        try:
            compile_pattern(pattern)
        except PolicyError as exc:
            errors.append(exc.message)
    if not _is_number(priority):
        errors.append(f"priority should be a number, actually was {erlang_p(priority)}")
    return errors


def parse_definition(text: str) -> dict[str, Any]:
    """JSON text as rabbitmqctl passes it; "JSON decoding error. Reason: badarg" on bad JSON."""
    try:
        value = json.loads(text)
    except (ValueError, TypeError):
        raise PolicyError("JSON decoding error. Reason: badarg", validation_failed=False) from None
    if not isinstance(value, dict):
        # RabbitMQ 3.10.8 crashes here ({badmap, []} from maps:to_list); we refuse cleanly.
        raise PolicyError(f"definition must be a dictionary: {erlang_p(value)}", validation_failed=False)
    return value


def compile_pattern(pattern: str) -> UserPattern:
    """Compile a policy pattern (broker.entities.patterns: matched in linear time); PolicyError
    shaped like rabbit_parameter_validation:regex/2 for a pattern PCRE refuses too, or naming the
    construct for one only a backtracking engine could run."""
    try:
        return compile_user_pattern(pattern)
    except PatternError as exc:
        raise PolicyError(_INVALID_PATTERN + _pcre_error_p(exc.reason, exc.offset)) from None


_INVALID_PATTERN = "pattern should be regular expression but is invalid: "


def _pcre_error_p(reason: str, offset: int) -> str:
    """`~p` of PCRE's `{Reason, Offset}` printed after `_INVALID_PATTERN`: on one line while it fits
    in ~p's 80 columns, else the offset goes on the next line under the reason (observed)."""
    shown = reason.replace("\\", "\\\\").replace('"', '\\"')
    column = len(_INVALID_PATTERN) + 1
    one_line = f'{{"{shown}",{offset}}}'
    if len(one_line) < 80 - len(_INVALID_PATTERN):
        return one_line
    return f'{{"{shown}",\n{" " * column}{offset}}}'


# --- the model -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Policy:
    """One user policy, as `rabbitmqctl set_policy` stores it."""

    name: str
    pattern: str
    definition: Mapping[str, Any]
    priority: int = 0
    apply_to: ApplyTo = "all"
    vhost: str = "/"
    _regex: UserPattern = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_regex", compile_pattern(self.pattern))

    def applies_to_kind(self, kind: Kind) -> bool:
        return self.apply_to == "all" or self.apply_to == kind + "s"

    def matches(self, kind: Kind, name: str, vhost: str = "/") -> bool:
        """rabbit_policy:matches/2: kind fits apply-to, same vhost, pattern found in the name."""
        return self.vhost == vhost and self.applies_to_kind(kind) and self._regex.search(name)

    def get(self, key: str, default: Any = None) -> Any:
        return self.definition.get(key, default)

    def to_json(self) -> dict[str, Any]:
        """The management API's object, in RabbitMQ's key order."""
        return {
            "vhost": self.vhost,
            "name": self.name,
            "pattern": self.pattern,
            "apply-to": self.apply_to,
            "definition": dict(self.definition),
            "priority": self.priority,
        }

    def row(self) -> dict[str, Any]:
        """A `rabbitmqctl list_policies --formatter json` row: the API's object with the definition
        as list_policies prints it."""
        return {**self.to_json(), "definition": definition_json(self.definition)}


def definition_json(definition: Mapping[str, Any]) -> str:
    """The definition as list_policies prints it: compact JSON, keys in byte order."""
    items = sorted(definition.items(), key=lambda kv: kv[0].encode())
    return json.dumps(dict(items), separators=(",", ":"), ensure_ascii=False)


class PolicyStore:
    """All user policies of a broker; `effective` answers which one applies to an entity."""

    def __init__(self) -> None:
        # by vhost, then name: a declare looks only at its own vhost's policies, so a vhost with many
        # cannot slow the others down
        self._policies: dict[str, dict[str, Policy]] = {}

    def set(
        self,
        name: str,
        pattern: str,
        definition: str | Mapping[str, Any],
        priority: int = 0,
        apply_to: str = "all",
        vhost: str = "/",
    ) -> tuple[Policy | None, Policy]:
        """Validate and store (replacing a same-named policy); returns (old, new).

        Every refusal is reported, in RabbitMQ's order (`validation_errors`).
        """
        parsed = parse_definition(definition) if isinstance(definition, str) else dict(definition)
        if not _is_number(priority):  # rabbitmqctl's own argument check, before rabbit_policy's
            raise PolicyError(f"{erlang_p(priority)} priority must be a number")
        errors = validation_errors(pattern, parsed, priority, apply_to)
        if errors:
            raise PolicyError("\n".join(errors))
        policy = Policy(name, pattern, parsed, priority, apply_to, vhost)  # type: ignore[arg-type]
        here = self._policies.setdefault(vhost, {})
        old = here.get(name)
        here[name] = policy
        return old, policy

    def clear(self, name: str, vhost: str = "/") -> Policy:
        """Remove a policy; PolicyNotFound ("Parameter does not exist") when absent."""
        here = self._policies.get(vhost, {})
        policy = here.pop(name, None)
        if policy is None:
            raise PolicyNotFound(name)
        if not here:
            del self._policies[vhost]
        return policy

    def get(self, name: str, vhost: str = "/") -> Policy | None:
        return self._policies.get(vhost, {}).get(name)

    def policies(self, vhost: str | None = "/") -> list[Policy]:
        """Policies in list_policies order: ascending priority (rabbit_policy:sort_by_priority), then name."""
        if vhost is None:
            chosen = [p for here in self._policies.values() for p in here.values()]
        else:
            chosen = list(self._policies.get(vhost, {}).values())
        return sorted(chosen, key=lambda p: (p.priority, p.name.encode()))

    def list_policies(self, vhost: str = "/") -> list[dict[str, Any]]:
        """Rows as `rabbitmqctl list_policies --formatter json` prints them."""
        return [p.row() for p in self.policies(vhost)]

    def list_policies_table(self, vhost: str = "/") -> list[str]:
        """Tab-separated lines as `rabbitmqctl list_policies --quiet` prints them (header first)."""
        lines = ["vhost\tname\tpattern\tapply-to\tdefinition\tpriority"]
        for r in self.list_policies(vhost):
            lines.append(
                "\t".join(
                    str(r[k]) for k in ("vhost", "name", "pattern", "apply-to", "definition", "priority")
                )
            )
        return lines

    def matching(
        self, kind: Kind, name: str, vhost: str = "/", applicable: Applicable | None = None
    ) -> list[Policy]:
        """All matching policies, the effective one first (priority descending, then name bytes).

        `applicable` is the queue type's is_policy_applicable: rabbit_policy:matches/2 drops a
        policy the type refuses before sorting, so a lower-priority one the type accepts wins."""
        found = [
            p
            for p in self._policies.get(vhost, {}).values()
            if p.matches(kind, name, vhost) and (applicable is None or applicable(p))
        ]
        return sorted(found, key=lambda p: (-p.priority, p.name.encode()))

    def effective(
        self, kind: Kind, name: str, vhost: str = "/", applicable: Applicable | None = None
    ) -> Policy | None:
        """The single policy RabbitMQ applies to the exchange/queue `name`, or None."""
        found = self.matching(kind, name, vhost, applicable)
        return found[0] if found else None

    def affected(
        self, entities: Iterable[tuple[Kind, str, str]]
    ) -> dict[tuple[Kind, str, str], Policy | None]:
        """Effective policy of each (kind, name, vhost): call after set/clear to find what changed."""
        return {e: self.effective(*e) for e in entities}


# --- combining with x-arguments ------------------------------------------------------------------


def resolve(key: str, policy_value: Any, argument_value: Any) -> Any:
    """The effective setting of `key` ("message-ttl", ...) given the policy value and the x-argument
    value (None = absent), as rabbit_queue_type_util:args_policy_lookup with RabbitMQ's resolvers."""
    if policy_value is None:
        return argument_value
    if argument_value is None:
        return policy_value
    if key in MIN_WINS:
        return min(policy_value, argument_value)
    return argument_value  # ARG_WINS, alternate-exchange and anything else: the argument


def queue_settings(policy: Policy | None, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """Effective queue settings keyed by policy key, from a policy and the queue's x-arguments."""
    out: dict[str, Any] = {}
    for key in sorted(MIN_WINS | ARG_WINS):
        value = resolve(key, policy.get(key) if policy else None, arguments.get("x-" + key))
        if value is not None:
            out[key] = value
    return out


def alternate_exchange(policy: Policy | None, arguments: Mapping[str, Any]) -> str | None:
    """An exchange's alternate exchange: the x-argument wins over the policy (rabbit_policy:get_arg)."""
    if "alternate-exchange" in arguments:
        value = arguments["alternate-exchange"]
        return value if isinstance(value, str) else None
    return policy.get("alternate-exchange") if policy else None


def merge_operator_value(key: str, policy_value: Any, operator_value: Any) -> Any:
    """rabbit_policies:merge_policy_value: min for numeric limits, the operator's boolean, else operator's."""
    if key in OPERATOR_MIN:
        return min(policy_value, operator_value)
    return operator_value
