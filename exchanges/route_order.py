"""RabbitMQ's route-table order of an exchange's bindings.

RabbitMQ keeps bindings in the `rabbit_route` ordered_set, keyed by the Erlang record
`#binding{source, key, destination = #resource{virtual_host, kind, name}, args}`, so anything that
reads an exchange's bindings back from that table sees them in Erlang term order: binding key bytes,
then destination kind (`exchange` before `queue`) and name bytes, then the binding arguments as the
list of `{Name, Type, Value}` triples. Two places depend on it: x-modulus-hash picks its destination
by position in that list, and on boot the consistent-hash plugin rebuilds every durable exchange's
ring from `lists:usort` of it (not from the order the bindings were made).
"""

from __future__ import annotations

from typing import Any

from exchanges.base import Binding
from exchanges.erlang.terms import term_order_key
from exchanges.hashing.terms import key_bytes, table_term


def route_table_order(binding: Binding) -> tuple[Any, ...]:
    """Sort key placing bindings of one source as RabbitMQ's route table (and `lists:usort`) does."""
    return (
        key_bytes(binding.key),
        binding.destination.kind,
        key_bytes(binding.destination.name),
        term_order_key(table_term(binding.arguments)),
    )
