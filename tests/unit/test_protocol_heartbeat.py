"""Heartbeat policy against RabbitMQ 3.10.8's observed timing, ticked by a fake clock."""

from __future__ import annotations

from broker.protocol.heartbeat import Beat, HeartbeatPolicy


def run(policy: HeartbeatPolicy, recv: dict[float, int], seconds: float) -> list[tuple[float, Beat]]:
    """Tick every `period` until `seconds`; `recv` maps a time to octets received by then. Sent
    octets grow only by our own heartbeats (8 octets each)."""
    out = []
    sent = 100
    now = 0.0
    octets = 0
    while now < seconds:
        now += policy.period
        octets = max([v for t, v in recv.items() if t <= now], default=octets)
        beat = policy.tick(octets, sent)
        out.append((now, beat))
        if beat is Beat.DEAD:
            break
        if beat is Beat.SEND:
            sent += 8
            policy.sent_heartbeat(sent)
    return out


def test_idle_client_gets_a_heartbeat_every_half_interval_and_is_dropped_after_two_checks() -> None:
    """Observed on RabbitMQ 3.10.8 with heartbeat 2: frames at ~1, 2, 3, 4, 5 s, reset at ~6 s
    (the connection.open after tune-ok counts as data for the first check)."""
    policy = HeartbeatPolicy(2, recv_octets=50)
    beats = run(policy, {0.1: 80}, 10)
    assert [t for t, b in beats if b is Beat.SEND] == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert beats[-1] == (6.0, Beat.DEAD)


def test_a_client_that_keeps_sending_stays() -> None:
    policy = HeartbeatPolicy(2)
    beats = run(policy, {t / 2: t for t in range(1, 40)}, 19)
    assert all(b is not Beat.DEAD for _t, b in beats)


def test_our_own_output_suppresses_heartbeats() -> None:
    policy = HeartbeatPolicy(4)
    assert policy.period == 2.0
    assert policy.tick(10, 500) is Beat.SEND  # first check
    policy.sent_heartbeat(508)
    assert policy.tick(20, 900) is Beat.IDLE  # deliveries were written meanwhile
    assert policy.tick(20, 900) is Beat.SEND


def test_silence_after_traffic_counts_from_the_last_octet() -> None:
    policy = HeartbeatPolicy(1)
    beats = run(policy, {0.0: 1, 2.0: 2}, 10)
    assert beats[-1] == (4.0, Beat.DEAD)
