"""A stream-protocol publish whose sub-batch carries no record (found by bench/fuzz_stream.py,
where it raised inside the broker): it is confirmed with nothing kept, and the publisher goes on."""

from __future__ import annotations

import logging

import pytest

from broker.streamproto import frames as F
from tests.robustness.test_stream_codec_regressions import Client, _record, running


@pytest.mark.timeout(60)
async def test_an_empty_sub_batch_is_confirmed_and_harms_nothing(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR)
    async with running() as port:
        c = await Client.open(port)
        await c.publisher()
        c.writer.write(F.Publish.build(0, [(1, F.SubBatch(0, 0, 0, b""))]).to_bytes())
        first = await c.answer(lambda x: isinstance(x, (F.PublishConfirm, F.PublishError)))
        assert isinstance(first, F.PublishConfirm) and first.publishing_ids == (1,)
        c.writer.write(F.Publish.build(0, [(2, _record(b"fine"))]).to_bytes())
        second = await c.answer(lambda x: isinstance(x, (F.PublishConfirm, F.PublishError)))
        assert isinstance(second, F.PublishConfirm) and second.publishing_ids == (2,)
        c.close()
    assert not [r for r in caplog.records if r.exc_info]
