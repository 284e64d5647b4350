"""The session's events (connection, channel, consumer, login), with the headers RabbitMQ's
reader and channel give them (`broker.entities.events` is the hub they are told to).

Process ids do not exist here: a connection's and a channel's are made up in the form of Erlang's
`<node.creation.id.serial>`, unique on the broker and stable for the object's life, so the events
of one channel name the same `pid`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.entities.events import Props, boolean, charlist, long, longstr, resource, terms, texts

if TYPE_CHECKING:
    from broker.entities.queues.catalog import Consumer
    from broker.session.identity import ConnectionIdentity as Link


PROTOCOL = "{0,9,1}"


def connection_pid(node: str, conn_id: int) -> str:
    return f"<{node}.1.{conn_id}.0>"


def channel_pid(node: str, serial: int) -> str:
    """A channel's: `serial` counts the broker's channels (a number a closed channel used is
    open to the next, which is another process in RabbitMQ)."""
    return f"<{node}.2.{serial}.0>"


def _address(hostport: str) -> tuple[str, int]:
    """("{127,0,0,1}", port): an IPv4 address as the Erlang tuple RabbitMQ prints."""
    host, _, port = hostport.rpartition(":")
    host = host.strip("[]")
    parts = host.split(".")
    if len(parts) == 4 and all(p.isdigit() for p in parts):
        host = "{" + ",".join(parts) + "}"
    return host, int(port) if port.isdigit() else 0


def _endpoints(link: Link) -> tuple[str, int, str, int]:
    peer_host, peer_port = _address(link.peer)
    host, port = _address(link.name.rpartition(" -> ")[2])
    return peer_host, peer_port, host, port


def login(link: Link, user: str, refusal: str | None) -> Props:
    """user.authentication.success / .failure (`refusal`: the error text)."""
    peer_host, peer_port, host, _port = _endpoints(link)
    error = (("error", charlist(refusal)),) if refusal is not None else ()
    return (
        *error,
        ("ssl", boolean(False)),
        ("auth_mechanism", longstr(link.auth_mechanism)),
        ("protocol", longstr(PROTOCOL)),
        ("peer_port", long(peer_port)),
        ("peer_host", longstr(peer_host)),
        ("connection_name", longstr(link.name)),
        ("host", longstr(host)),
        ("name", longstr(user)),
        ("connection_type", longstr("network")),
    )


def _provided_name(link: Link) -> Props:
    name = link.user_provided_name
    return (("user_provided_name", longstr(name)),) if name is not None else ()


def connection_created(link: Link, conn_id: int, node: str) -> Props:
    peer_host, peer_port, host, port = _endpoints(link)
    return (
        ("node", longstr(node)),
        ("connected_at", long(link.connected_at)),
        ("client_properties", terms(link.client_properties)),
        ("channel_max", long(link.channel_max)),
        ("frame_max", long(link.frame_max)),
        ("timeout", long(link.heartbeat)),
        *texts(("vhost", link.vhost_name), ("user", link.user), ("protocol", PROTOCOL)),
        *((k, longstr("")) for k in ("ssl_hash", "ssl_cipher", "ssl_key_exchange", "ssl_protocol")),
        ("auth_mechanism", longstr(link.auth_mechanism)),
        *((k, longstr("")) for k in ("peer_cert_validity", "peer_cert_issuer", "peer_cert_subject")),
        ("ssl", boolean(False)),
        ("peer_host", longstr(peer_host)),
        ("host", longstr(host)),
        ("peer_port", long(peer_port)),
        ("port", long(port)),
        ("name", longstr(link.name)),
        ("pid", longstr(connection_pid(node, conn_id))),
        ("type", longstr("network")),
        *_provided_name(link),
    )


def connection_closed(link: Link, conn_id: int, node: str) -> Props:
    return (
        ("client_properties", terms(link.client_properties)),
        ("node", longstr(node)),
        ("pid", longstr(connection_pid(node, conn_id))),
        ("name", longstr(link.name)),
        *_provided_name(link),
    )


def channel_created(link: Link, conn_id: int, node: str, number: int, pid: str) -> Props:
    return (
        ("vhost", longstr(link.vhost_name)),
        ("user", longstr(link.user)),
        ("number", long(number)),
        ("connection", longstr(connection_pid(node, conn_id))),
        ("name", longstr(f"{link.name} ({number})")),
        ("pid", longstr(pid)),
    )


def channel_closed(pid: str) -> Props:
    return (("pid", longstr(pid)),)


def consumer_created(channel: str, consumer: Consumer) -> Props:
    return (
        ("arguments", terms(consumer.args)),
        ("prefetch_count", long(consumer.prefetch)),
        *resource("queue", consumer.queue.name, consumer.queue.vhost.name),
        ("channel", longstr(channel)),
        ("ack_required", boolean(not consumer.no_ack)),
        ("exclusive", boolean(consumer.exclusive)),
        ("consumer_tag", longstr(consumer.tag)),
    )


def consumer_deleted(channel: str, consumer: Consumer) -> Props:
    return (
        *resource("queue", consumer.queue.name, consumer.queue.vhost.name),
        ("channel", longstr(channel)),
        ("consumer_tag", longstr(consumer.tag)),
    )
