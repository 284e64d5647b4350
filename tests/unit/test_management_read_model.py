"""The management's read side over fakes of its port (broker.management.ports): the session views,
the joins from a queue's owner and consumers to them, the unacked bytes the channels hold, and
the shape of the package (it names nothing above it, imports nothing that does not exist, and its
resource views import neither the URL table nor the request pipeline)."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path
from types import SimpleNamespace

import pytest

from amqpwire.fields import Field, FieldTable
from broker.entities.cluster import Cluster
from broker.entities.policy import Policy
from broker.entities.queues.catalog import Queue
from broker.entities.users import Registry
from broker.management.state import BrokerState
from tests.unit.entities_support import RecordingChannel, consumer, declare, message, vhost

MANAGEMENT = Path(__file__).resolve().parents[2] / "broker" / "management"


class FakeChannel(RecordingChannel):
    """A consumer's channel that is also what /api/channels reads (ports.ChannelReads)."""

    def __init__(self, number: int) -> None:
        super().__init__()
        self.number = number
        self.consumers: dict[str, object] = {}
        self.unacked: dict[int, SimpleNamespace] = {}
        self.limiter = SimpleNamespace(prefetch=3, global_prefetch=0)
        self.confirm = False
        self.tx: list[object] | None = None

    def hold(self, tag: int, queue: Queue, body: bytes) -> None:
        """A delivery awaiting its ack, as the session's unacked tracker keeps it."""
        self.unacked[tag] = SimpleNamespace(
            queue=queue, entry=SimpleNamespace(msg=SimpleNamespace(body=body))
        )


class FakeConnection:
    """ports.ConnectionReads with plain values."""

    def __init__(self, port: int, state: str = "running", user: str = "guest") -> None:
        self.peer = f"10.0.0.1:{port}"
        self.name = f"{self.peer} -> 127.0.0.1:5672"
        self.user = user
        self.vhost_name = "/"
        self.state = state
        self.frame_max = 131072
        self.channel_max = 2047
        self.heartbeat = 60
        self.auth_mechanism = "PLAIN"
        self.tls_info = None
        self.channels: dict[int, FakeChannel] = {}
        self.client_properties = FieldTable([("connection_name", Field("longstr", b"app"))])
        self.user_provided_name: str | None = "app"
        self.connected_at = 1_700_000_000_000
        self.recv_oct = self.send_oct = self.recv_cnt = self.send_cnt = 0

    def open_channel(self, number: int) -> FakeChannel:
        ch = self.channels[number] = FakeChannel(number)
        return ch


class FakePolicies:
    def __init__(self) -> None:
        self.stored: dict[tuple[str, str], Policy] = {}

    def get(self, vhost: str, name: str) -> Policy | None:
        return self.stored.get((vhost, name))

    def queue_node(self, queue_name: str) -> str:
        return "rabbit@localhost"


def broker(*connections: FakeConnection) -> SimpleNamespace:
    """The management port (ports.ManagementBroker) over one vhost of real entities."""
    return SimpleNamespace(
        settings=SimpleNamespace(rabbitmq_compat_version="3.10.8", default_user="guest", loopback_users=[]),
        host="127.0.0.1",
        port=5672,
        vhosts={"/": vhost()},
        connections=set(connections),
        auth=Registry(),
        policies=FakePolicies(),
        cluster=Cluster(),
        store=None,
    )


def test_sessions_show_open_connections_and_their_channels_by_name() -> None:
    late, early, opening = FakeConnection(2), FakeConnection(1), FakeConnection(3, state="handshake")
    late.open_channel(2).tx = []
    late.open_channel(1)
    early.open_channel(1).confirm = True
    opening.open_channel(1)
    sessions = BrokerState(broker(late, early, opening)).sessions()  # type: ignore[arg-type]
    assert [c.peer_port for c in sessions.connections()] == [1, 2]
    assert [(ch.connection.peer_port, ch.number) for ch in sessions.channels()] == [(1, 1), (2, 1), (2, 2)]
    first = sessions.connections()[0]
    assert (first.peer_host, first.channels, first.timeout, first.user_provided_name) == (
        "10.0.0.1",
        1,
        60,
        "app",
    )
    assert [(ch.confirm, ch.transactional, ch.prefetch_count) for ch in sessions.channels()] == [
        (True, False, 3),
        (False, False, 3),
        (False, True, 3),
    ]


def test_queue_views_count_the_bytes_the_channels_hold_for_that_very_queue() -> None:
    conn = FakeConnection(1)
    ch = conn.open_channel(1)
    b = broker(conn)
    v = b.vhosts["/"]
    q = declare(v, "work")
    for body in (b"12345", b"123"):
        q.enqueue(message(body))
    ch.hold(1, q, b"12345")
    ch.hold(2, q, b"123")
    gone = declare(v, "gone")  # deleted with a delivery unacked, then declared again: not its bytes
    ch.hold(3, gone, b"1234567")
    v.delete_queue(gone, reason="test")
    declare(v, "gone")
    state = BrokerState(b)  # type: ignore[arg-type]
    views = {view.name: view for view in state.queues()}
    assert views["work"].message_bytes_unacknowledged == 8
    assert views["gone"].message_bytes_unacknowledged == 0
    assert state.queue("/", "work").message_bytes_unacknowledged == 8  # type: ignore[union-attr]


def test_a_queues_owner_and_consumers_are_found_among_the_session_views() -> None:
    conn, other = FakeConnection(1), FakeConnection(2, user="other")
    ch = other.open_channel(7)
    b = broker(conn, other)
    v = b.vhosts["/"]
    mine = Queue(v, "mine", durable=False, exclusive_owner=conn, auto_delete=False, arguments=FieldTable())
    v.add_queue(mine)
    mine.add_consumer(consumer(ch, mine, "c1"))
    state = BrokerState(b)  # type: ignore[arg-type]
    view = state.queue("/", "mine")
    assert view is not None and view.owner is conn
    sessions = state.sessions()
    assert sessions.connection_of(view.owner).peer_port == 1
    channel = sessions.channel_of(view.consumers[0].channel)
    assert (channel.number, channel.connection.user) == (7, "other")
    with pytest.raises(LookupError):
        sessions.channel_of(object())


def test_a_queue_shows_its_effective_policys_definition() -> None:
    b = broker()
    q = declare(b.vhosts["/"], "capped")
    policy = Policy("cap", "^capped$", {"max-length": 5}, apply_to="queues")
    b.policies.stored[("/", "cap")] = policy
    q.apply_policy(policy)
    state = BrokerState(b)  # type: ignore[arg-type]
    view = state.queue("/", "capped")
    assert view is not None and view.policy == "cap"
    assert state.policy_definition("/", view.policy) == {"max-length": 5}
    assert state.policy_definition("/", None) == {}


def imports_of(path: Path) -> list[str]:
    """Every module `path` imports, TYPE_CHECKING blocks and function bodies included."""
    package = "broker.management" if path.parent == MANAGEMENT else "broker.management.views"
    out: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.extend(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*parts, node.module] if node.module else parts)
            else:
                base = node.module or ""
            out.append(base)
    return out


def management_modules() -> list[Path]:
    return sorted(MANAGEMENT.rglob("*.py"))


def test_management_names_nothing_above_it_and_nothing_that_does_not_exist() -> None:
    for path in management_modules():
        for name in imports_of(path):
            assert name != "broker.server", f"{path.name} imports the server: use broker.management.ports"
            assert importlib.util.find_spec(name) is not None, f"{path.name} imports missing module {name}"


def test_resource_views_import_neither_the_url_table_nor_the_pipeline() -> None:
    for path in sorted((MANAGEMENT / "views").glob("*.py")):
        names = set(imports_of(path))
        assert not names & {"broker.management.api", "broker.management.routes"}, path.name
