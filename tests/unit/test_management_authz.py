"""Management authorization decisions (broker.management.authz) on a plain user registry."""

from __future__ import annotations

import pytest

from broker.entities.users import Registry
from broker.management.authz import Identity, Level, Rule, identity, refusal, visible_vhosts

VHOSTS = {"/", "v", "w"}


@pytest.fixture
def registry() -> Registry:
    reg = Registry()
    for name, tags in [
        ("none", ()),
        ("mgmt", ("management",)),
        ("pm", ("policymaker",)),
        ("mon", ("monitoring",)),
        ("admin", ("administrator",)),
        ("odd", ("impersonator", "custom")),
    ]:
        reg.add_user(name, "pw", tags)
        if name != "admin":
            reg.set_permissions("v", name, ".*", ".*", ".*")
    return reg


def who(reg: Registry, name: str) -> Identity:
    return identity(reg, name, "pw")


def test_users_without_a_management_tag_are_refused_everything(registry: Registry) -> None:
    for user in ("none", "odd", "ghost"):
        for level in Level:
            rule = Rule(level, 1 if level in (Level.VHOST, Level.POLICIES) else None)
            assert (
                refusal(registry, who(registry, user), rule, ["queues", "v"], VHOSTS) == "Not management user"
            )


@pytest.mark.parametrize(
    ("user", "monitor", "admin"),
    [
        ("mgmt", "Not monitor user", "Not administrator user"),
        ("pm", "Not monitor user", "Not administrator user"),
        ("mon", None, "Not administrator user"),
        ("admin", None, None),
    ],
)
def test_monitor_and_admin_levels(
    registry: Registry, user: str, monitor: str | None, admin: str | None
) -> None:
    me = who(registry, user)
    assert refusal(registry, me, Rule(Level.MANAGEMENT), ["overview"], VHOSTS) is None
    assert refusal(registry, me, Rule(Level.MONITOR), ["nodes"], VHOSTS) == monitor
    assert refusal(registry, me, Rule(Level.ADMIN), ["users"], VHOSTS) == admin


def test_vhost_level_needs_permissions_unless_administrator(registry: Registry) -> None:
    rule = Rule(Level.VHOST, 1)
    assert refusal(registry, who(registry, "mgmt"), rule, ["queues", "v"], VHOSTS) is None
    denied = "User not authorised to access virtual host"
    assert refusal(registry, who(registry, "mgmt"), rule, ["queues", "w"], VHOSTS) == denied
    assert refusal(registry, who(registry, "mon"), rule, ["queues", "w"], VHOSTS) == denied
    assert refusal(registry, who(registry, "admin"), rule, ["queues", "w"], VHOSTS) is None
    # an unknown vhost passes, so the handler can answer 404
    assert refusal(registry, who(registry, "mgmt"), rule, ["queues", "nope"], VHOSTS) is None


def test_policies_need_policymaker_with_vhost_access(registry: Registry) -> None:
    rule = Rule(Level.POLICIES, 1)
    denied = "User not authorised to access object"
    assert refusal(registry, who(registry, "pm"), rule, ["policies", "v", "p"], VHOSTS) is None
    assert refusal(registry, who(registry, "pm"), rule, ["policies", "w", "p"], VHOSTS) == denied
    assert refusal(registry, who(registry, "mgmt"), rule, ["policies", "v", "p"], VHOSTS) == denied
    assert refusal(registry, who(registry, "mon"), rule, ["policies", "v", "p"], VHOSTS) == denied
    assert refusal(registry, who(registry, "admin"), rule, ["policies", "w", "p"], VHOSTS) is None


def test_lists_show_the_vhosts_a_user_may_use(registry: Registry) -> None:
    assert visible_vhosts(registry, who(registry, "mgmt"), VHOSTS, monitors=False) == {"v"}
    assert visible_vhosts(registry, who(registry, "mon"), VHOSTS, monitors=False) == {"v"}
    assert visible_vhosts(registry, who(registry, "mon"), VHOSTS, monitors=True) == VHOSTS
    assert visible_vhosts(registry, who(registry, "admin"), VHOSTS, monitors=False) == VHOSTS


def test_tag_changes_take_effect_at_once(registry: Registry) -> None:
    """Identity is read from the registry on each request: a tag removed is a right removed."""
    assert who(registry, "mon").is_monitor
    registry.add_user("mon", "pw", ())
    assert (
        refusal(registry, who(registry, "mon"), Rule(Level.MONITOR), ["nodes"], VHOSTS)
        == "Not management user"
    )


def test_set_tags_keeps_the_password_and_changes_rights(registry: Registry) -> None:
    assert registry.set_tags("none", ("monitoring",))
    assert registry.check_credentials("none", "pw")
    assert refusal(registry, who(registry, "none"), Rule(Level.MONITOR), ["nodes"], VHOSTS) is None
    assert not registry.set_tags("ghost", ("administrator",))
    assert "ghost" not in registry.users


def test_blank_passwords_never_log_in() -> None:
    reg = Registry()
    reg.add_user("blank", "", ("administrator",))
    assert not reg.check_credentials("blank", "")
