"""The quorum queue type driven without sockets (ManualClock, recording channel): declaration checks,
delivery counts, requeue order, delivery limit, reject-publish soft limit, at-least-once store."""

from __future__ import annotations

import copy

import pytest

from amqpwire.errors import AmqpError, ReplyCode
from amqpwire.fields import Field, FieldTable
from broker.entities.clock import ManualClock
from broker.entities.message import StoredMessage
from broker.entities.policy import Policy
from broker.entities.queues.arguments import (
    assert_args_equivalence,
    check_queue_arguments,
    check_server_named,
)
from broker.entities.queues.quorum.queue import QuorumEntry, QuorumQueue
from broker.entities.vhost import VHost
from exchanges.base import Binding, Destination
from tests.unit.entities_support import RecordingChannel, args, consumer, message, quorum, vhost

RS = "queue 'q' in vhost '/'"


def refusal(table: FieldTable, **flags: bool) -> str:
    with pytest.raises(AmqpError) as err:
        check_queue_arguments(table, "q", "/", **{"durable": True, **flags})
    assert err.value.reply_code == ReplyCode.PRECONDITION_FAILED
    return err.value.explanation


def count_header(msg: StoredMessage) -> object:
    h = msg.headers()
    f = h.get("x-delivery-count") if h is not None else None
    return None if f is None else (f.type, f.value)


def test_declare_values_first_then_unsupported_keys_then_properties() -> None:
    qq = ("x-queue-type", Field("longstr", b"quorum"))
    prio = ("x-max-priority", Field("long", 5))
    neg = ("x-max-length", Field("long", -1))
    assert (
        refusal(FieldTable([qq, prio, neg])) == f"invalid arg 'x-max-length' for {RS}: {{value_negative,-1}}"
    )
    mode = ("x-queue-mode", Field("longstr", b"lazy"))
    assert refusal(FieldTable([qq, mode, prio]), auto_delete=True) == (
        f"invalid arg 'x-queue-mode' for {RS} of queue type rabbit_quorum_queue"
    )
    assert refusal(FieldTable([qq]), auto_delete=True, exclusive=True) == (
        f"invalid property 'auto-delete' for {RS}"
    )
    assert refusal(FieldTable([qq]), durable=False) == f"invalid property 'non-durable' for {RS}"
    strategy = ("x-dead-letter-strategy", Field("longstr", b"x"))
    overflow = ("x-overflow", Field("longstr", b"nope"))
    assert refusal(FieldTable([qq, overflow, strategy])).endswith(
        "'x-dead-letter-strategy' for " + RS + ": invalid_dlx_strategy"
    )
    group = ("x-quorum-initial-group-size", Field("long", 0))
    assert refusal(FieldTable([qq, group])).endswith(": {value_zero,0}")
    locator = ("x-queue-leader-locator", Field("longstr", b"nowhere"))
    assert refusal(FieldTable([qq, locator])).endswith(": invalid_queue_locator_arg")
    # accepted: delivery limit of any type, an unknown key, the locators RabbitMQ knows
    check_queue_arguments(
        FieldTable([qq, ("x-delivery-limit", Field("longstr", b"5")), ("x-whatever", Field("long", 1))]),
        "q",
        "/",
        durable=True,
    )
    with pytest.raises(AmqpError) as err:
        check_server_named(FieldTable([qq]))
    assert err.value.explanation == "Cannot declare a server-named queue for type rabbit_quorum_queue"
    check_server_named(FieldTable())


def test_classic_redeclare_treats_absent_type_as_classic() -> None:
    typed = FieldTable([("x-queue-type", Field("longstr", b"classic"))])
    keys = ("x-queue-type",)
    assert_args_equivalence(typed, FieldTable(), RS, keys)
    assert_args_equivalence(FieldTable(), typed, RS, keys)
    with pytest.raises(AmqpError) as err:
        assert_args_equivalence(
            FieldTable(), FieldTable([("x-queue-type", Field("longstr", b"quorum"))]), RS, keys
        )
    assert "received the value 'quorum' of type 'longstr' but current is none" in err.value.explanation
    with pytest.raises(AmqpError) as err:
        assert_args_equivalence(
            FieldTable([("x-queue-type", Field("longstr", b"quorum"))]), FieldTable(), RS, keys
        )
    assert "received none but current is the value 'quorum' of type 'longstr'" in err.value.explanation


def test_quorum_redeclare_compares_its_own_arguments() -> None:
    q = quorum(vhost(), x_delivery_limit=3)
    q.check_equivalent(True, False, args(x_queue_type="quorum", x_delivery_limit=3))
    with pytest.raises(AmqpError) as err:
        q.check_equivalent(True, False, args(x_queue_type="quorum", x_delivery_limit=4))
    assert (
        err.value.explanation
        == f"inequivalent arg 'x-delivery-limit' for {RS}: received '4' but current is '3'"
    )


def test_get_always_shows_the_count_consumers_only_after_a_return() -> None:
    v = vhost()
    q = quorum(v)
    q.enqueue(message(b"a"))
    e = q.get(False)
    assert e is not None and count_header(e.msg) == ("long", 0) and not e.redelivered
    q.settled()
    q.requeue([e])
    ch = RecordingChannel()
    q.add_consumer(consumer(ch, q, "c"))
    (_c, _q, delivered) = ch.entries[0]
    assert count_header(delivered.msg) == ("long", 1) and delivered.redelivered
    assert isinstance(delivered, QuorumEntry) and delivered.orig.headers() is None
    q.enqueue(message(b"b"))
    assert ch.entries[1][2].msg.headers() is None


def test_requeue_goes_to_the_back_without_a_limit_and_to_the_front_with_one() -> None:
    for limit, order in ((None, [b"c", b"d", b"b", b"a"]), (5, [b"b", b"a", b"c", b"d"])):
        q = quorum(vhost()) if limit is None else quorum(vhost(), x_delivery_limit=limit)
        for body in (b"a", b"b", b"c", b"d"):
            q.enqueue(message(body))
        a, b = q.get(False), q.get(False)
        assert a is not None and b is not None
        q.settled(2)
        q.requeue([b])
        q.requeue([a])
        got = []
        while (e := q.get(True)) is not None:
            got.append(e.msg.body)
        assert got == order


def test_closed_channel_returns_go_to_the_front_in_order_and_count() -> None:
    q = quorum(vhost())
    for body in (b"h", b"i", b"j", b"k"):
        q.enqueue(message(body))
    h, i = q.get(False), q.get(False)
    assert h is not None and i is not None
    q.settled(2)
    q.requeue_on_close([h, i])
    got = [(e.msg.body, count_header(e.msg)) for e in iter(lambda: q.get(True), None)]
    assert got == [(b"h", ("long", 1)), (b"i", ("long", 1)), (b"j", ("long", 0)), (b"k", ("long", 0))]


def test_delivery_limit_dead_letters_on_the_return_past_the_limit() -> None:
    v = vhost()
    v.declare_exchange(
        "dlx", "fanout", durable=True, auto_delete=False, internal=False, arguments=FieldTable()
    )
    target = quorum(v, "target")
    v.add_binding(v.exchanges["dlx"], Binding(Destination.queue("target"), "", FieldTable()))
    q = quorum(v, x_delivery_limit=1, x_dead_letter_exchange="dlx")
    q.enqueue(message(b"m"))
    for _ in range(2):
        e = q.get(False)
        assert e is not None
        q.settled()
        q.requeue([e])
    assert q.count == 0 and target.count == 1
    dead = target.get(True)
    assert dead is not None
    headers = dead.msg.headers()
    assert headers is not None
    xd = headers.get("x-death")
    assert xd is not None
    death = xd.value[0].value
    assert death.get("reason") == Field("longstr", b"delivery_limit")
    assert death.get("count") == Field("long", 1)
    assert count_header(dead.msg) == ("long", 0)  # the target's own get count, none carried over


def test_reject_publish_lets_one_over_then_waits_for_80_percent() -> None:
    q = quorum(vhost(), x_max_length=10, x_overflow="reject-publish")
    accepted = []
    for i in range(13):
        full = q.would_overflow(1)
        accepted.append(not full)
        if not full:
            q.enqueue(message(str(i).encode()))
    assert accepted == [True] * 11 + [False] * 2
    trace = []
    for _ in range(5):
        assert q.get(True) is not None
        full = q.would_overflow(1)
        trace.append((q.count, not full))
        if not full:
            q.enqueue(message(b"x"))
    assert trace == [(10, False), (9, False), (8, True), (8, True), (8, True)]


def test_reject_publish_dlx_is_drop_head() -> None:
    q = quorum(vhost(), x_max_length=3, x_overflow="reject-publish-dlx")
    for i in range(5):
        assert not q.would_overflow(1)
        q.enqueue(message(f"m{i}".encode()))
    assert [e.msg.body for e in iter(lambda: q.get(True), None)] == [b"m2", b"m3", b"m4"]


def test_at_least_once_holds_unroutable_dead_letters_and_retries() -> None:
    clock = ManualClock()
    v = vhost(clock)
    v.declare_exchange(
        "dlx", "direct", durable=True, auto_delete=False, internal=False, arguments=FieldTable()
    )
    q = quorum(
        v,
        x_dead_letter_exchange="dlx",
        x_dead_letter_strategy="at-least-once",
        x_overflow="reject-publish",
    )
    q.enqueue(message(b"one"))
    e = q.get(False)
    assert e is not None
    q.settled()
    q.dead_letter([e], "rejected")
    assert q.info().details["messages_dlx"] == 1 and q.info().details["message_bytes_dlx"] == 3
    target = quorum(v, "dlq")
    v.add_binding(v.exchanges["dlx"], Binding(Destination.queue("dlq"), "q", FieldTable()))
    clock.advance(1.0)
    assert target.count == 0  # the retry is timer driven
    clock.advance(200.0)
    assert target.count == 1 and q.info().details["messages_dlx"] == 0


def test_sac_get_is_locked_and_unsupported_deletes_are_540() -> None:
    q = quorum(vhost(), x_single_active_consumer=True)
    with pytest.raises(AmqpError) as err:
        q.get(False)
    assert err.value.reply_code == ReplyCode.RESOURCE_LOCKED
    assert "basic.get operations are not supported by quorum queues with single active consumer" in str(
        err.value
    )
    for flags, word in (
        ({"if_unused": True, "if_empty": True}, "if-unused"),
        ({"if_unused": False, "if_empty": True}, "if-empty"),
    ):
        with pytest.raises(AmqpError) as err:
            q.check_delete(**flags)
        assert err.value.reply_code == ReplyCode.NOT_IMPLEMENTED and err.value.hard
        assert err.value.explanation == (
            f"cannot delete {RS}. queue.delete operations with {word} flag set "
            "are not supported by quorum queues"
        )
    q.check_delete(if_unused=False, if_empty=False)
    with pytest.raises(AmqpError) as err:
        q.check_global_qos(5)
    assert err.value.explanation == f"{RS} does not support global qos" and err.value.hard
    q.check_global_qos(0)
    q.check_consume(FieldTable(), exclusive=True, no_ack=False, prefetch=0)
    with pytest.raises(AmqpError) as err:
        q.check_consume(
            FieldTable([("x-stream-offset", Field("long", 1))]), exclusive=False, no_ack=False, prefetch=0
        )
    assert (
        err.value.explanation == f"invalid arg 'x-stream-offset' for {RS} of queue type rabbit_quorum_queue"
    )


def policy_on_every_queue(definition: dict[str, object]) -> Policy:
    return Policy(vhost="/", name="p", pattern=".*", apply_to="queues", priority=0, definition=definition)


def test_a_policy_with_an_unsupported_key_is_not_applied() -> None:
    q = quorum(vhost())
    q.apply_policy(policy_on_every_queue({"max-length": 2, "queue-mode": "lazy"}))
    assert q.policy is None and q.max_length is None
    q.apply_policy(policy_on_every_queue({"max-length": 2, "delivery-limit": 3}))
    assert q.policy is not None and q.max_length == 2 and q.delivery_limit == 3


def test_message_expiring_behind_the_head_is_counted_until_it_is_the_head() -> None:
    clock = ManualClock()
    q = quorum(vhost(clock))
    q.enqueue(message(b"long", expiration="60000"))
    q.enqueue(message(b"zero", expiration="0"))
    clock.advance(0.5)
    e = q.get(False)
    assert e is not None and e.msg.body == b"long" and q.count == 1
    assert q.get(True) is None and q.count == 0


def test_declaring_is_not_a_use_for_x_expires() -> None:
    clock = ManualClock()
    v = vhost(clock)
    q = quorum(v, x_expires=1000)
    clock.advance(0.6)
    q.reset_expiry()  # a (passive) declare
    clock.advance(0.6)
    assert q.deleted and "q" not in v.queues


class KeptState:
    """The store's side of a quorum queue, as broker.runtime.durability keeps it: per position the
    message, the checked-out mark, the delivery count and the return order."""

    def __init__(self) -> None:
        self.rows: dict[int, list[object]] = {}

    def queue_added(self, vhost: VHost, q: QuorumQueue) -> None:
        q.store = self  # type: ignore[assignment]

    def publish(self, q: QuorumQueue, body: bytes) -> None:
        """broker.runtime.durability.persist_publish: a position, and the message written even when
        transient (the type `keeps_transient`), before the queue takes it."""
        assert q.keeps_transient
        q.seq += 1
        self.rows[q.seq] = [message(body), False, 0, 0]
        q.enqueue(message(body), q.seq)

    def delivery_state(self, q: QuorumQueue, states: list[tuple[int, bool, int, int]]) -> None:
        for seq, out, count, order in states:
            self.rows[seq][1:] = [out, count, order]

    def messages_removed(self, q: QuorumQueue, entries: list[QuorumEntry]) -> None:
        for e in entries:
            self.rows.pop(e.seq, None)

    def first_delivery(self, e: QuorumEntry) -> None:
        """What the channel marks on a message's first delivery (broker.session.delivery)."""
        self.rows[e.seq][1] = True

    def restart(self, clock: ManualClock, **arguments: object) -> QuorumQueue:
        v = vhost(clock)
        v.persistence = self  # type: ignore[assignment]
        q = quorum(v, **arguments)
        q.restore_state({seq: (int(r[2]), int(r[3]), 0) for seq, r in self.rows.items()})  # type: ignore[call-overload]
        for seq in sorted(self.rows):
            msg, out = self.rows[seq][:2]
            q.restore(seq, msg, bool(out))  # type: ignore[arg-type]
        clock.advance(0)
        return q


def test_a_restart_puts_messages_back_with_their_counts_and_places() -> None:
    """A return is written with its count and place (front: rank; back: after what was published
    before it); at boot the checked-out messages come back returned once more after the waiting
    returns, and that is written back so a second restart counts nothing again."""
    clock = ManualClock()
    kept = KeptState()
    v = vhost(clock)
    v.persistence = kept  # type: ignore[assignment]
    q = quorum(v)
    for body in (b"a", b"b", b"c", b"d"):
        kept.publish(q, body)
    a = q.get(False)
    assert isinstance(a, QuorumEntry)
    kept.first_delivery(a)
    q.settled()
    q.requeue([a])  # no limit: to the back, after d
    b = q.get(False)
    assert isinstance(b, QuorumEntry) and b.orig.body == b"b"
    kept.first_delivery(b)  # held when the broker stops
    kept.publish(q, b"e")
    assert kept.rows[1][1:] == [False, 1, 4 * (1 << 20) + 1]
    again = kept.restart(clock)
    assert kept.rows[2][1:3] == [False, 1]  # the restart's return, written back
    assert [(e.orig.body, e.count) for e in again.returns] == [(b"b", 1)]
    assert [(e.orig.body, e.count) for e in again.messages] == [(b"c", 0), (b"d", 0), (b"a", 1), (b"e", 0)]
    third = kept.restart(clock)
    got = [(e.msg.body, count_header(e.msg)) for e in iter(lambda: third.get(True), None)]
    assert got == [(b"b", ("long", 1)), (b"c", ("long", 0)), (b"d", ("long", 0)), (b"a", ("long", 1)),
                   (b"e", ("long", 0))]  # fmt: skip


def test_returns_keep_their_rank_and_redeliveries_count_on_after_a_restart() -> None:
    """With a delivery limit returns wait at the front in the order they were returned; a
    redelivered message checked out at the restart comes back with its count plus one, after
    them, and goes over the limit there like any return."""
    clock = ManualClock()
    kept = KeptState()
    v = vhost(clock)
    v.persistence = kept  # type: ignore[assignment]
    q = quorum(v, x_delivery_limit=2)
    for body in (b"a", b"b", b"c", b"z"):
        kept.publish(q, body)
    entries = {}
    for _ in range(3):
        e = q.get(False)
        assert isinstance(e, QuorumEntry)
        kept.first_delivery(e)
        entries[e.orig.body] = e
    q.settled(3)
    q.requeue([entries[b"c"]])
    q.requeue([entries[b"a"]])  # returns: c, a
    q.requeue([entries[b"b"]])  # returns: c, a, b
    c = q.get(False)
    assert isinstance(c, QuorumEntry) and (c.orig.body, c.count) == (b"c", 1)  # held at the restart
    before = copy.deepcopy(kept.rows)
    again = kept.restart(clock, x_delivery_limit=2)
    assert [(e.orig.body, e.count) for e in again.returns] == [(b"a", 1), (b"b", 1), (b"c", 2)]
    assert [e.orig.body for e in again.messages] == [b"z"]
    kept.rows = before  # the same stop, restarted with a limit of 1: c's return goes over it
    lower = kept.restart(clock, x_delivery_limit=1)
    assert [(e.orig.body, e.count) for e in lower.returns] == [(b"a", 1), (b"b", 1)]
    assert 3 not in kept.rows  # dead-lettered (no DLX: dropped) by the restart's return
