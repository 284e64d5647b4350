"""Definitions export/import in RabbitMQ's format (`/api/definitions`, `rabbitmqctl export_definitions`).

Export mirrors rabbit_mgmt_wm_definitions of 3.10.8: the same top-level keys in the same order, the
same per-object fields, and the same exclusions (the default exchange, `amq.*` exchanges, exclusive
queues and the implicit default-exchange bindings). One deliberate difference: bindings are listed
per source in the order they were made, not sorted, because for x-consistent-hash that order *is*
the bucket ring; re-importing the file into hashbroker rebuilds the identical ring.

Import validates the whole document first and changes nothing if any part asks for something the
broker cannot do (runtime parameters, unknown password hashing). Users, then vhosts, then
permissions are created first, as rabbit_definitions does. Queues, exchanges and bindings
are then declared in file order by the internal superuser (broker.management.writes), so the
importer's own permissions do not limit them; one the broker refuses (e.g. a weight that is not a
number) stops the import with its error and leaves what was declared before it, as RabbitMQ's
import does. Policies are stored last, only when every declaration succeeded.
"""

from __future__ import annotations

import base64
import binascii
import html
import json
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from broker import __version__
from broker.entities.info import BindingView
from broker.entities.policy import Policy, PolicyCrash, validation_errors
from broker.management.http import Response
from broker.management.render import bad_request, key_missing
from broker.management.values import table_to_json

log = logging.getLogger("hashbroker.management.definitions")

if TYPE_CHECKING:
    from broker.management.state import BrokerState


class RefusedPolicy(Exception):
    """A policy the API refuses: `response` is the answer."""

    def __init__(self, response: Response) -> None:
        super().__init__(response.status)
        self.response = response

    @property
    def reason(self) -> str:
        """The refusal as text (RabbitMQ's `reason`; its crashes have none)."""
        if not self.response.body:
            return f"refused with status {self.response.status}"
        return str(json.loads(self.response.body).get("reason", ""))


def policy_from_body(vhost: str, name: str, body: dict[str, Any]) -> Policy:
    """The policy a PUT body or a definitions entry describes (one shape for both); RefusedPolicy
    as RabbitMQ refuses it: every reason on its own line after "Validation failed", HTML-escaped as
    RabbitMQ sends it, and the 500 RabbitMQ answers where its validator crashes."""
    missing = key_missing(body, "pattern", "definition")
    if missing is not None:
        raise RefusedPolicy(missing)
    pattern, definition = body["pattern"], body["definition"]
    priority, apply_to = body.get("priority", 0), body.get("apply-to", "all")
    if not isinstance(definition, dict):
        raise RefusedPolicy(Response(500))  # rabbit_policy crashes on a non-object definition
    try:
        errors = validation_errors(pattern, definition, priority, apply_to)
    except PolicyCrash:
        raise RefusedPolicy(Response(500)) from None
    if errors:
        reason = html.escape("\n".join(errors), quote=False)
        raise RefusedPolicy(bad_request(f"Validation failed\n\n{reason}\n"))
    return Policy(name, pattern, definition, priority, apply_to, vhost)


def binding_json(b: BindingView) -> dict[str, Any]:
    """A binding as the definitions document and /api/bindings show it (the API adds its key)."""
    return {
        "source": b.source,
        "vhost": b.vhost,
        "destination": b.destination,
        "destination_type": b.destination_type,
        "routing_key": b.routing_key,
        "arguments": table_to_json(b.arguments),
    }


def export(
    state: BrokerState,
    users: list[dict[str, Any]],
    permissions: list[dict[str, Any]],
    vhost: str | None = None,
) -> dict[str, Any]:
    """The definitions document; with `vhost`, the per-vhost form (no users, vhosts, permissions).

    `users` and `permissions` are the rows /api/users and /api/permissions show.
    """
    queues = [
        {
            "name": q.name,
            "vhost": q.vhost,
            "durable": q.durable,
            "auto_delete": q.auto_delete,
            "arguments": table_to_json(q.arguments),
        }
        for q in state.queues(vhost)
        if not q.exclusive
    ]
    exportable_queues = {(q["vhost"], q["name"]) for q in queues}
    exchanges = [
        {
            "name": e.name,
            "vhost": e.vhost,
            "type": e.type,
            "durable": e.durable,
            "auto_delete": e.auto_delete,
            "internal": e.internal,
            "arguments": table_to_json(e.arguments),
        }
        for e in state.exchanges(vhost)
        if e.name and not e.name.startswith("amq.")
    ]
    bindings = [
        binding_json(b)
        for b in state.bindings_in_order(vhost)
        if b.destination_type == "exchange" or (b.vhost, b.destination) in exportable_queues
    ]
    pol = [p.to_json() for p in state.policies() if vhost is None or p.vhost == vhost]
    if vhost is not None:  # rabbit_mgmt_wm_definitions:vhost_definitions/3 drops the vhost field
        items: list[dict[str, Any]] = [*queues, *exchanges, *bindings, *pol]
        for item in items:
            item.pop("vhost", None)
        return {
            "rabbit_version": state.compat_version,
            "rabbitmq_version": state.compat_version,
            "product_name": "hashbroker",
            "product_version": __version__,
            "parameters": [],
            "policies": pol,
            "queues": queues,
            "exchanges": exchanges,
            "bindings": bindings,
        }
    return {
        "rabbit_version": state.compat_version,
        "rabbitmq_version": state.compat_version,
        "product_name": "hashbroker",
        "product_version": __version__,
        "users": users,
        "vhosts": [{"name": v} for v in state.vhost_names()],
        "permissions": permissions,
        "topic_permissions": [],
        "parameters": [],
        "global_parameters": [],
        "policies": pol,
        "queues": queues,
        "exchanges": exchanges,
        "bindings": bindings,
    }


@dataclass
class ImportPlan:
    """What an import will do, per vhost, in file order; `problems` non-empty means refuse it."""

    queues: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    exchanges: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    bindings: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    policies: list[Policy] = field(default_factory=list)
    users: list[dict[str, Any]] = field(default_factory=list)
    new_vhosts: list[str] = field(default_factory=list)
    permissions: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)
    reason: Any = None
    """RabbitMQ's 400 reason for the first problem it would refuse the same way, else None."""

    def refuse(self, problem: str, reason: Any) -> None:
        self.problems.append(problem)
        if self.reason is None:
            self.reason = reason

    def vhosts(self) -> list[str]:
        seen: dict[str, None] = {}
        for d in (self.queues, self.exchanges, self.bindings):
            seen.update(dict.fromkeys(d))
        return list(seen)


def _user_refusal(user: dict[str, Any]) -> Any:
    """What RabbitMQ's import answers for a user it cannot store, or None: a password_hash that is
    not base64 (["not_base64", value]), tags neither a string nor a list of strings."""
    password_hash = user.get("password_hash", "")
    if not isinstance(password_hash, str):
        return "function_clause"
    try:
        base64.b64decode("".join(password_hash.split()), validate=True)
    except (binascii.Error, ValueError):
        return ["not_base64", password_hash]
    tags = user.get("tags", "")
    if isinstance(tags, list):
        return None if all(isinstance(t, str) for t in tags) else "badarg"
    return None if isinstance(tags, str) else "function_clause"


def _list(doc: dict[str, Any], key: str, plan: ImportPlan) -> list[dict[str, Any]]:
    value = doc.get(key) or []
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        plan.problems.append(f"'{key}' must be a list of objects")
        return []
    return value


def plan_import(state: BrokerState, doc: Any, vhost: str | None = None) -> ImportPlan:
    """Check a definitions document against what this broker supports, without changing anything.

    With `vhost` (POST /api/definitions/{vhost}) every object goes to that vhost whatever its
    `vhost` field says, and users/vhosts/permissions are ignored, as RabbitMQ does.
    """
    plan = ImportPlan()
    if not isinstance(doc, dict):
        plan.problems.append("definitions must be a JSON object")
        return plan
    if vhost is None:
        from broker.entities.users import SHA256, RegexError, validate_regex

        known_users = set(state.users())
        for u in _list(doc, "users", plan):
            if not isinstance(u.get("name"), str) or not u["name"]:
                plan.problems.append(f"user {u!r}: lacks a name")
            elif u.get("hashing_algorithm", SHA256) != SHA256:
                plan.problems.append(f"user '{u['name']}': only {SHA256} password hashes are supported")
            elif (bad := _user_refusal(u)) is not None:
                plan.refuse(f"user '{u['name']}': {bad}", bad)
            else:
                plan.users.append(u)
                known_users.add(u["name"])
        for v in _list(doc, "vhosts", plan):
            name = v.get("name")
            if not isinstance(name, str) or not name:
                plan.problems.append(f"vhost {v!r}: lacks a name")
            elif not state.has_vhost(name) and name not in plan.new_vhosts:
                plan.new_vhosts.append(name)
        for p in _list(doc, "permissions", plan):
            who = f"permissions of '{p.get('user')}' on '{p.get('vhost')}'"
            if p.get("user") not in known_users or not (
                state.has_vhost(str(p.get("vhost"))) or p.get("vhost") in plan.new_vhosts
            ):
                plan.problems.append(f"{who}: unknown user or vhost")
                continue
            try:
                for k in ("configure", "write", "read"):
                    if not isinstance(p.get(k), str):
                        raise RegexError(f"'{k}' missing")
                    validate_regex(p[k])
            except RegexError as exc:
                plan.problems.append(f"{who}: {exc}")
                continue
            plan.permissions.append(p)
        if _list(doc, "topic_permissions", plan):
            plan.ignored.append("topic_permissions (not enforced by hashbroker)")
        if _list(doc, "global_parameters", plan):
            plan.ignored.append("global_parameters")
    for p in _list(doc, "parameters", plan):
        plan.problems.append(
            f"parameter {p.get('component')}/{p.get('name')}: runtime parameters are not supported"
        )

    def where(item: dict[str, Any]) -> str | None:
        name = vhost if vhost is not None else str(item.get("vhost", "/"))
        if not state.has_vhost(name) and name not in plan.new_vhosts:
            plan.problems.append(f"vhost '{name}' does not exist (needed by '{item.get('name', '')}')")
            return None
        return name

    for p in _list(doc, "policies", plan):
        vh = where(p)
        if vh is None:
            continue
        try:
            plan.policies.append(policy_from_body(vh, str(p.get("name", "")), p))
        except RefusedPolicy as refused:
            plan.problems.append(f"policy '{p.get('name')}': {refused.reason}".strip())
    for key, target in (("queues", plan.queues), ("exchanges", plan.exchanges), ("bindings", plan.bindings)):
        required = ("source", "destination") if key == "bindings" else ("name",)
        for item in _list(doc, key, plan):
            missing = [k for k in required if k not in item]
            if missing:
                plan.problems.append(f"{key} entry {item!r} lacks {', '.join(missing)}")
                continue
            if key != "bindings" and str(item["name"]).startswith("amq."):
                # rabbit_definitions skips server-named and reserved objects (amq.gen-* queues
                # from an export of a running broker among them) with a warning
                what = key[:-1]
                log.warning(
                    "Skipping import of a %s whose name begins with 'amq.', name: %s", what, item["name"]
                )
                plan.ignored.append(f"{what} '{item['name']}' (names beginning with 'amq.' are reserved)")
                continue
            vh = where(item)
            if vh is not None:
                target.setdefault(vh, []).append(item)
    return plan
