"""Who may call which management endpoint: rabbit_mgmt_util's is_authorized* family of 3.10.8.

Every route names one `Level`. The decision is made after authentication and before the handler,
with RabbitMQ's 401 bodies (observed live, kept as a differential test):

* every level first needs a management user, i.e. any of the tags `management`, `policymaker`,
  `monitoring`, `administrator` ("Not management user");
* `MONITOR`: `monitoring` or `administrator` ("Not monitor user");
* `ADMIN`: `administrator` ("Not administrator user");
* `VHOST`: the user has permissions on the vhost named in the path, or is an administrator
  ("User not authorised to access virtual host"); a vhost that does not exist passes, so the handler
  answers 404;
* `POLICIES`: an administrator, or a `policymaker` with permissions on the path's vhost (if any)
  ("User not authorised to access object").

Lists are filtered as RabbitMQ filters them: objects of vhosts the user has permissions on (all for
administrators; all vhosts in /api/vhosts for monitors too), and connections and channels of the
user's own unless the user is a monitor.
"""

from __future__ import annotations

from collections.abc import Container, Iterable
from dataclasses import dataclass
from enum import Enum

from amqpwire.errors import AmqpError
from broker.entities.users import Registry

MANAGEMENT_TAGS = frozenset({"management", "policymaker", "monitoring", "administrator"})


class Level(Enum):
    PUBLIC = "public"  # no login needed (/api/auth: the login page reads it first)
    MANAGEMENT = "management"
    MONITOR = "monitor"
    ADMIN = "admin"
    VHOST = "vhost"
    POLICIES = "policies"


@dataclass(frozen=True)
class Rule:
    """A route's requirement; `vhost_segment` is the index (after /api) of the vhost in the path."""

    level: Level
    vhost_segment: int | None = None


@dataclass(frozen=True)
class Identity:
    """An authenticated caller; `password` is kept to act on AMQP as the same user (user_id checks)."""

    name: str
    password: str
    tags: frozenset[str]

    @property
    def is_management(self) -> bool:
        return bool(self.tags & MANAGEMENT_TAGS)

    @property
    def is_admin(self) -> bool:
        return "administrator" in self.tags

    @property
    def is_monitor(self) -> bool:
        return self.is_admin or "monitoring" in self.tags

    @property
    def is_policymaker(self) -> bool:
        return self.is_admin or "policymaker" in self.tags


def identity(registry: Registry, name: str, password: str) -> Identity:
    user = registry.users.get(name)
    return Identity(name, password, frozenset(user.tags) if user is not None else frozenset())


def may_access_vhost(registry: Registry, who: Identity, vhost: str) -> bool:
    """AMQP vhost access: any permission entry for the user on the vhost."""
    return (vhost, who.name) in registry.permissions


def may_read(registry: Registry, who: Identity, vhost: str, resource: str, name: str) -> bool:
    """Whether the caller's AMQP read permission on `vhost` covers `name` (what consuming from it,
    or watching the messages passing through it, needs); administrators are no exception."""
    try:
        registry.check(who.name, vhost, "read", resource, name)
    except AmqpError:
        return False
    return True


def refusal(
    registry: Registry, who: Identity, rule: Rule, segments: list[str], vhosts: Container[str]
) -> str | None:
    """RabbitMQ's 401 reason for this caller on this route, or None when allowed."""
    if not who.is_management:
        return "Not management user"
    level = rule.level
    if level is Level.MONITOR and not who.is_monitor:
        return "Not monitor user"
    if level is Level.ADMIN and not who.is_admin:
        return "Not administrator user"
    vhost = segments[rule.vhost_segment] if rule.vhost_segment is not None else None
    matches_vhost = vhost is None or who.is_admin or _vhost_ok(registry, who, vhost, vhosts)
    if level is Level.VHOST and not matches_vhost:
        return "User not authorised to access virtual host"
    if level is Level.POLICIES and not (who.is_admin or (who.is_policymaker and matches_vhost)):
        return "User not authorised to access object"
    return None


def _vhost_ok(registry: Registry, who: Identity, vhost: str, vhosts: Container[str]) -> bool:
    if vhost not in vhosts:
        return True  # rabbit_mgmt_util:user_matches_vhost: the handler answers 404
    return may_access_vhost(registry, who, vhost)


def visible_vhosts(
    registry: Registry, who: Identity, all_vhosts: Iterable[str], *, monitors: bool
) -> set[str]:
    """The vhosts whose objects a list shows (`monitors`: monitoring users see every vhost)."""
    names = set(all_vhosts)
    if who.is_admin or (monitors and who.is_monitor):
        return names
    return {v for v in names if may_access_vhost(registry, who, v)}
