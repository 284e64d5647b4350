"""Users, password hashes and per-vhost permissions, as rabbit_auth_backend_internal keeps them.

Passwords are stored as rabbit_password_hashing_sha256 hashes: base64(salt ++ sha256(salt ++ password))
with a 4-byte salt, so hashes move between hashbroker and RabbitMQ through definitions files.
Permissions are three regular expressions (configure, write, read) per (vhost, user); a resource is
allowed when the regex *searches* its name (not anchored and byte by byte, as Erlang's `re:run` on
binaries; matched in linear time by broker.entities.patterns, since whoever may set permissions
must not be able to stall the broker with a catastrophic regex), and an empty regex allows only the
empty name (RabbitMQ reads "" as "^$"). The default exchange is checked as
'amq.default', as rabbit_access_control does.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import os
from dataclasses import dataclass, field
from typing import Protocol

from amqpwire.errors import AmqpError
from broker.entities.patterns import PatternError, UserPattern, compile_user_pattern, never_matching

log = logging.getLogger(__name__)

SHA256 = "rabbit_password_hashing_sha256"


def hash_password(password: str, salt: bytes | None = None) -> str:
    salt = os.urandom(4) if salt is None else salt
    return base64.b64encode(salt + hashlib.sha256(salt + password.encode()).digest()).decode()


def check_password(password_hash: str, password: str) -> bool:
    try:
        raw = base64.b64decode(password_hash, validate=True)
    except ValueError:
        return False
    if len(raw) < 5:
        return False
    salt, digest = raw[:4], raw[4:]
    return hmac.compare_digest(hashlib.sha256(salt + password.encode()).digest(), digest)


def parse_tags(tags: object) -> tuple[str, ...]:
    """Tags as the management API takes them: "a,b" or ["a", "b"]."""
    if isinstance(tags, list):
        return tuple(str(t).strip() for t in tags if str(t).strip())
    return tuple(t.strip() for t in str(tags or "").split(",") if t.strip())


@dataclass
class User:
    name: str
    password_hash: str
    tags: tuple[str, ...] = ()
    hashing_algorithm: str = SHA256


def _compile(regex: str) -> UserPattern:
    """Permissions set here were validated; one read back from a store that this broker cannot
    run (see broker.entities.patterns) grants nothing rather than stopping the boot."""
    try:
        return compile_user_pattern(regex or "^$")
    except PatternError as exc:
        log.warning("permission regex %r refused (%s): it grants nothing", regex, exc.reason)
        return never_matching(regex)


#: Names a permission remembers its answers for (then it starts over).
_SEEN_MAX = 1024


@dataclass
class Permission:
    configure: str
    write: str
    read: str
    _compiled: dict[str, UserPattern] = field(default_factory=dict, repr=False, compare=False)
    _seen: dict[tuple[str, str], bool] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        for kind in ("configure", "write", "read"):
            self._compiled[kind] = _compile(getattr(self, kind))

    def allows(self, kind: str, name: str) -> bool:
        """Memoised per (kind, name): a stream connection asks for every publish frame, and the
        patterns are fixed for this object's life (a changed permission is a new object)."""
        key = (kind, name)
        hit = self._seen.get(key)
        if hit is None:
            if len(self._seen) >= _SEEN_MAX:
                self._seen.clear()
            hit = self._seen[key] = self._compiled[kind].search(name)
        return hit


class RegexError(ValueError):
    pass


def validate_regex(regex: str) -> None:
    """RegexError for a regex RabbitMQ refuses (`{invalid_regexp, Regex, {Reason, Offset}}`), or
    one that could only be matched by backtracking (see broker.entities.patterns)."""
    try:
        compile_user_pattern(regex)
    except PatternError as exc:
        raise RegexError(
            f"invalid regular expression '{regex}': {exc.reason} at offset {exc.offset}"
        ) from None


class UserPersistence(Protocol):
    """What keeps users and permissions across a restart (the server's store adapter)."""

    def user_saved(self, user: User) -> None: ...

    def user_deleted(self, name: str) -> None: ...

    def permission_saved(self, vhost: str, user: str, permission: Permission) -> None: ...

    def permission_deleted(self, vhost: str, user: str) -> None: ...


class Registry:
    """The broker's users and permissions; every change is written to `store` when one is set."""

    def __init__(self) -> None:
        self.users: dict[str, User] = {}
        self.permissions: dict[tuple[str, str], Permission] = {}  # (vhost, user)
        self.store: UserPersistence | None = None
        # bumped by every change to users or permissions: channels cache granted decisions
        # (broker.channel: write access per exchange) only while it is unchanged
        self.version = 0

    def changed(self) -> None:
        """Users or permissions changed: drop every cached access decision."""
        self.version += 1

    # -- users --------------------------------------------------------------------------------------

    def put_user(self, user: User) -> None:
        self.users[user.name] = user
        self.changed()
        if self.store is not None:
            self.store.user_saved(user)

    def add_user(self, name: str, password: str, tags: tuple[str, ...] = ()) -> User:
        user = User(name, hash_password(password), tags)
        self.put_user(user)
        return user

    def delete_user(self, name: str) -> bool:
        if self.users.pop(name, None) is None:
            return False
        self.changed()
        for key in [k for k in self.permissions if k[1] == name]:
            del self.permissions[key]
        if self.store is not None:
            self.store.user_deleted(name)
        return True

    def change_password(self, name: str, password: str) -> None:
        u = self.users[name]
        self.put_user(User(name, hash_password(password), u.tags, SHA256))

    def set_tags(self, name: str, tags: tuple[str, ...]) -> bool:
        """Replace a user's tags, keeping its password (`rabbitmqctl set_user_tags`); False if no such user.

        Tags decide management access (broker.management.authz) on the user's next request.
        """
        u = self.users.get(name)
        if u is None:
            return False
        self.put_user(User(name, u.password_hash, tags, u.hashing_algorithm))
        return True

    def check_credentials(self, name: str, password: str) -> bool:
        """rabbit_auth_backend_internal: a blank password is always refused, whatever the hash."""
        u = self.users.get(name)
        return (
            u is not None
            and password != ""
            and bool(u.password_hash)
            and check_password(u.password_hash, password)
        )

    # -- permissions --------------------------------------------------------------------------------

    def set_permissions(self, vhost: str, user: str, configure: str, write: str, read: str) -> None:
        for regex in (configure, write, read):
            validate_regex(regex)
        permission = self.permissions[(vhost, user)] = Permission(configure, write, read)
        self.changed()
        if self.store is not None:
            self.store.permission_saved(vhost, user, permission)

    def clear_permissions(self, vhost: str, user: str) -> bool:
        if self.permissions.pop((vhost, user), None) is None:
            return False
        self.changed()
        if self.store is not None:
            self.store.permission_deleted(vhost, user)
        return True

    def forget_vhost(self, vhost: str) -> None:
        """The vhost is gone: drop its permissions (the store drops them with the vhost)."""
        for key in [k for k in self.permissions if k[0] == vhost]:
            del self.permissions[key]
        self.changed()

    def check(self, user: str, vhost: str, kind: str, resource: str, name: str) -> None:
        """Raise RabbitMQ's 403 unless `user` may `kind` (configure/write/read) the resource."""
        if resource == "exchange" and name == "":
            name = "amq.default"
        p = self.permissions.get((vhost, user))
        if p is None or not p.allows(kind, name):
            raise AmqpError(
                403, f"access to {resource} '{name}' in vhost '{vhost}' refused for user '{user}'"
            )
