"""Classic and quorum queues are sibling types that compose the same parts (a ready list, consumer
selection, the x-expires countdown), so a quorum rule is the quorum type's own and cannot depend on
the order a shared implementation happens to call it in."""

from __future__ import annotations

from broker.entities.policy import Policy
from broker.entities.queues.catalog import ClassicQueue, Queue
from broker.entities.queues.quorum.queue import QuorumQueue
from tests.unit.entities_support import args, message, vhost


def quorum(**arguments: object) -> Queue:
    v = vhost()
    q = Queue(v, "qq", durable=True, exclusive_owner=None, auto_delete=False, arguments=args(**arguments))
    v.add_queue(q)
    return q


def test_the_quorum_type_composes_the_ready_list_instead_of_extending_the_classic_type() -> None:
    from broker.entities.queues.ready import ReadyList

    assert not issubclass(QuorumQueue, ClassicQueue) and not issubclass(ClassicQueue, QuorumQueue)
    q = quorum(x_queue_type="quorum")
    assert isinstance(q, QuorumQueue) and isinstance(q.ready, ReadyList)


def test_a_policy_lowering_max_length_trims_a_reject_publish_dlx_quorum_queue_at_once() -> None:
    """reject-publish-dlx is drop-head for a quorum queue, policy or not. Observed on RabbitMQ
    3.10.8: 5 messages in a quorum queue with x-overflow reject-publish-dlx (or drop-head) and
    x-max-length 10, then a policy max-length 2: 2 left; with reject-publish: 5 left."""
    left = {}
    for overflow in ("reject-publish-dlx", "drop-head", "reject-publish"):
        q = quorum(x_queue_type="quorum", x_overflow=overflow, x_max_length=10)
        for i in range(5):
            q.enqueue(message(b"m%d" % i))
        q.apply_policy(Policy("p", "^qq$", {"max-length": 2}, 0, "queues", "/"))
        left[overflow] = q.count
    assert left == {"reject-publish-dlx": 2, "drop-head": 2, "reject-publish": 5}
