"""The named error constructors carry RabbitMQ's code, text and close kind."""

from __future__ import annotations

from amqpwire.errors import (
    channel_error,
    internal_error,
    not_implemented,
    resource_name,
    resource_not_found,
)


def test_resource_names_and_not_found() -> None:
    assert resource_name("queue", "q", "/") == "queue 'q' in vhost '/'"
    err = resource_not_found("exchange", "x", "v")
    assert (err.reply_code, err.reply_text, err.hard) == (
        404,
        "NOT_FOUND - no exchange 'x' in vhost 'v'",
        False,
    )


def test_internal_error_names_no_method() -> None:
    crash = internal_error()
    assert (crash.reply_text, crash.hard, crash.in_method) == ("INTERNAL_ERROR", True, False)
    soft = internal_error("store write failed", hard=False)
    assert (soft.reply_text, soft.hard, soft.in_method) == (
        "INTERNAL_ERROR - store write failed",
        False,
        False,
    )


def test_close_kind_follows_the_code() -> None:
    assert not_implemented("immediate=true").hard
    assert channel_error("expected 'channel.open'").hard
