"""A management path RabbitMQ 3.10.8 does not know, and the node's plugin list, observed live now
and compared with the recording (tests/data/plugins/unknown_path.json) the clone-only tests use,
and with hashbroker's answers for the same unknown paths.

Skipped (with the command that enables it) when the live management API does not answer.
"""

from __future__ import annotations

import pytest

from broker.embedded import BrokerThread
from tests.data.plugins.record_unknown_path import CASES, observe, record
from tests.integration.test_plugin_paths import RECORDED
from tests.rabbitmq_probe import MANAGEMENT, missing_plugin_reason, session_probe


def _live() -> tuple[str, int]:
    probe = session_probe()
    reason = probe.skip_reason(MANAGEMENT)
    if reason is not None or probe.target.management is None:
        pytest.skip(reason or missing_plugin_reason(probe.target, MANAGEMENT))
    return probe.target.management


def test_live_unknown_path_answers_as_recorded() -> None:
    host, port = _live()
    assert record(host, port)["unknown_path"] == RECORDED["unknown_path"]


def test_hashbroker_answers_unknown_paths_as_the_live_node() -> None:
    host, port = _live()
    with BrokerThread(host="127.0.0.1", port=0, management_port=0) as b:
        ours = b.broker.management.port
        for case in CASES:
            assert observe("127.0.0.1", ours, *case) == observe(host, port, *case), case
