"""Command keys, response codes and defaults of the stream protocol (rabbit_stream.hrl, 3.10.8)."""

from __future__ import annotations

from enum import IntEnum

VERSION = 1
RESPONSE_BIT = 0x8000


class Key(IntEnum):
    DECLARE_PUBLISHER = 1
    PUBLISH = 2
    PUBLISH_CONFIRM = 3
    PUBLISH_ERROR = 4
    QUERY_PUBLISHER_SEQUENCE = 5
    DELETE_PUBLISHER = 6
    SUBSCRIBE = 7
    DELIVER = 8
    CREDIT = 9
    STORE_OFFSET = 10
    QUERY_OFFSET = 11
    UNSUBSCRIBE = 12
    CREATE_STREAM = 13
    DELETE_STREAM = 14
    METADATA = 15
    METADATA_UPDATE = 16
    PEER_PROPERTIES = 17
    SASL_HANDSHAKE = 18
    SASL_AUTHENTICATE = 19
    TUNE = 20
    OPEN = 21
    CLOSE = 22
    HEARTBEAT = 23
    ROUTE = 24
    PARTITIONS = 25


class Code(IntEnum):
    OK = 0x01
    STREAM_DOES_NOT_EXIST = 0x02
    SUBSCRIPTION_ID_ALREADY_EXISTS = 0x03
    SUBSCRIPTION_ID_DOES_NOT_EXIST = 0x04
    STREAM_ALREADY_EXISTS = 0x05
    STREAM_NOT_AVAILABLE = 0x06
    SASL_MECHANISM_NOT_SUPPORTED = 0x07
    AUTHENTICATION_FAILURE = 0x08
    SASL_ERROR = 0x09
    SASL_CHALLENGE = 0x0A
    SASL_AUTHENTICATION_FAILURE_LOOPBACK = 0x0B
    VHOST_ACCESS_FAILURE = 0x0C
    UNKNOWN_FRAME = 0x0D
    FRAME_TOO_LARGE = 0x0E
    INTERNAL_ERROR = 0x0F
    ACCESS_REFUSED = 0x10
    PRECONDITION_FAILED = 0x11
    PUBLISHER_DOES_NOT_EXIST = 0x12
    NO_OFFSET = 0x13


class OffsetType(IntEnum):
    FIRST = 1
    LAST = 2
    NEXT = 3
    OFFSET = 4
    TIMESTAMP = 5


#: rabbitmq_stream's defaults (rabbit_stream.hrl and the plugin's application environment).
DEFAULT_INITIAL_CREDITS = 50_000
DEFAULT_CREDITS_REQUIRED_FOR_UNBLOCKING = 12_500
DEFAULT_FRAME_MAX = 1_048_576
DEFAULT_HEARTBEAT = 60
#: connection_negotiation_step_timeout: each handshake step, and the wait for a close response.
NEGOTIATION_STEP_TIMEOUT = 10.0
#: Mechanisms RabbitMQ 3.10.8 offers by default, in its order.
AUTH_MECHANISMS = ("PLAIN", "AMQPLAIN")
#: The peer-properties answer's product entries, as RabbitMQ 3.10.8 sends them (a broker adds its
#: cluster_name and platform).
SERVER_PROPERTIES = {
    "product": "RabbitMQ",
    "version": "3.10.8",
    "copyright": "Copyright (c) 2007-2022 VMware, Inc. or its affiliates.",
    "information": "Licensed under the MPL 2.0. Website: https://rabbitmq.com",
}
#: A frame longer than this closes the connection with FRAME_TOO_LARGE. RabbitMQ 3.10.8 enforces no
#: limit at all (a 1.2 MB publish with frame_max 1 MiB is accepted); this bound only keeps one
#: connection from making the broker buffer an arbitrary length.
HARD_FRAME_LIMIT = 64 * 1024 * 1024
