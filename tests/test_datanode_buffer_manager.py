"""The DataNode's buffer manager (``milvus_edu.datanode.writebuffer.manager``).

Ports Milvus 2.5 ``internal/flushcommon/writebuffer/manager_test.go`` (``ManagerSuite``): TestRegister,
TestFlushSegments, TestCreateNewGrowingSegment, TestBufferData, TestGetCheckpoint, TestRemoveChannel,
TestDropPartitions, TestMemoryCheck (as single passes of ``memoryCheck``). Left out:
TestStopDuringMemoryCheck (no goroutine to stop; its point, that a pass ends, is pinned by
``test_memory_check_returns_when_a_round_frees_nothing``). Then the flush handshake
(``need_update`` / ``NotifyCheckpointUpdated``, quirk 7) and its bug switch.
"""

from __future__ import annotations

import itertools
import random

import pytest

from milvus_edu.config import DataNodeParams
from milvus_edu.datanode.metacache import MetaCache
from milvus_edu.datanode.writebuffer import BufferManager, WriteBuffer
from milvus_edu.merr import ChannelNotFoundError, ChannelReduplicateError, SegmentNotFoundError
from milvus_edu.mq.msg import DeleteMsg, InsertMsg
from milvus_edu.proto import MsgPosition, SegmentState
from milvus_edu.tsoutil import compose_ts

CHANNEL = "by-dev-rootcoord-dml_0_100_v0"
OTHER = "by-dev-rootcoord-dml_1_100_v0"
PHYS0 = 1_700_000_000_000


def ts(ms: int) -> int:
    return compose_ts(PHYS0 + ms, 0)


def pos(timestamp: int, channel: str = CHANNEL) -> MsgPosition:
    return MsgPosition(channel, timestamp, timestamp)


def make_wb(channel: str = CHANNEL, params: DataNodeParams | None = None) -> WriteBuffer:
    ids = itertools.count(50_000)
    return WriteBuffer(channel, MetaCache(100, channel), params or DataNodeParams(), random.Random(0),
                       alloc_segment_id=lambda: next(ids))


def insert(segment_id: int, pks, timestamp: int, channel: str = CHANNEL, payload_bytes: int = 0) -> InsertMsg:
    return InsertMsg(shard_name=channel, collection_id=100, partition_id=1, segment_id=segment_id,
                     pks=tuple(pks), timestamps=(timestamp,) * len(pks), payload_bytes=payload_bytes)


@pytest.fixture
def manager() -> BufferManager:
    return BufferManager(DataNodeParams())


def test_register_twice_is_reduplicate(manager):
    """Ports ``TestRegister``: the second buffer is refused, the first stays."""
    first = make_wb()
    manager.register(CHANNEL, first)
    with pytest.raises(ChannelReduplicateError, match=rf"channel reduplicates\[channel={CHANNEL}\]"):
        manager.register(CHANNEL, make_wb())
    assert manager.get_buffer(CHANNEL) is first and manager.channels == [CHANNEL]


def test_seal_segments(manager):
    """Ports ``TestFlushSegments``: unknown channel fails; then the buffer seals (or reports a missing
    segment)."""
    with pytest.raises(ChannelNotFoundError):
        manager.seal_segments(CHANNEL, [1, 2, 3])
    manager.register(CHANNEL, make_wb())
    manager.create_new_growing_segment(CHANNEL, 1, 1)
    manager.seal_segments(CHANNEL, [1])
    assert manager.get_buffer(CHANNEL).metacache.get_segment_by_id(1).state == SegmentState.SEALED
    with pytest.raises(SegmentNotFoundError):
        manager.seal_segments(CHANNEL, [2])


def test_create_new_growing_segment(manager):
    """Ports ``TestCreateNewGrowingSegment``: the segment has no start position yet."""
    with pytest.raises(ChannelNotFoundError):
        manager.create_new_growing_segment(CHANNEL, 1, 1)
    manager.register(CHANNEL, make_wb())
    manager.create_new_growing_segment(CHANNEL, 1, 1)
    seg = manager.get_buffer(CHANNEL).metacache.get_segment_by_id(1)
    assert seg.state == SegmentState.GROWING and seg.start_position is None and not seg.start_pos_recorded


def test_buffer_data(manager):
    """Ports ``TestBufferData``."""
    with pytest.raises(ChannelNotFoundError, match=rf"channel not found\[channel={CHANNEL}\]"):
        manager.buffer_data(CHANNEL, [], [], pos(ts(0)), pos(ts(1)))
    manager.register(CHANNEL, make_wb())
    assert manager.buffer_data(CHANNEL, [insert(1, [1], ts(1))], [], pos(ts(0)), pos(ts(2))) == []
    assert manager.get_buffer(CHANNEL).has_segment(1)


def test_get_checkpoint(manager):
    """Ports ``TestGetCheckpoint``: channel_not_found, normal_checkpoint, checkpoint_need_update."""
    with pytest.raises(ChannelNotFoundError):
        manager.get_checkpoint(CHANNEL)
    manager.register(CHANNEL, make_wb())
    manager.buffer_data(CHANNEL, [], [], pos(ts(0)), pos(ts(10)))
    assert manager.get_checkpoint(CHANNEL) == (pos(ts(10)), False)
    manager.flush_channel(CHANNEL, ts(10) - 1)
    assert manager.get_checkpoint(CHANNEL) == (pos(ts(10)), True)


def test_remove_channel(manager):
    """Ports ``TestRemoveChannel``: unknown channel is ignored; a registered one is forgotten and its
    buffers abandoned (no packs)."""
    manager.remove_channel(CHANNEL)
    manager.register(CHANNEL, make_wb())
    manager.buffer_data(CHANNEL, [insert(1, [1], ts(1))], [], pos(ts(0)), pos(ts(2)))
    manager.remove_channel(CHANNEL)
    assert manager.channels == []
    with pytest.raises(ChannelNotFoundError):
        manager.flush_channel(CHANNEL, ts(5))


def test_drop_partitions(manager):
    """Ports ``TestDropPartitions``."""
    manager.drop_partitions("not_exist_channel", [1])
    manager.register(CHANNEL, make_wb())
    manager.create_new_growing_segment(CHANNEL, 1, 7)
    manager.drop_partitions(CHANNEL, [1])
    assert manager.get_buffer(CHANNEL).metacache.get_segment_by_id(7).state == SegmentState.DROPPED


def test_drop_channel_returns_drop_packs_and_forgets_the_channel(manager):
    assert manager.drop_channel(CHANNEL) == []
    manager.register(CHANNEL, make_wb())
    manager.buffer_data(CHANNEL, [insert(1, [1], ts(1))],
                        [DeleteMsg(shard_name=CHANNEL, collection_id=100, partition_id=1, pks=(5,),
                                   timestamps=(ts(1),))],
                        pos(ts(0)), pos(ts(2)))
    packs = manager.drop_channel(CHANNEL)
    assert [(p.segment_id, p.is_drop) for p in packs] == [(1, True), (50_000, True)]
    assert manager.channels == []


def _fill(manager: BufferManager, channel: str, segment_id: int, start_ms: int, payload: int) -> None:
    manager.buffer_data(channel, [insert(segment_id, [segment_id], ts(start_ms + 1), channel, payload)], [],
                        pos(ts(start_ms), channel), pos(ts(start_ms + 2), channel))


def test_memory_check():
    """Ports ``TestMemoryCheck`` as single passes: disabled -> nothing; usage 60 % under watermark 0.7
    -> nothing; watermark 0.5 -> the oldest buffer of the largest channel is evicted, which brings the
    usage under the watermark."""
    total = 10_000
    for enabled, watermark, expect in [(False, 0.5, []), (True, 0.7, []), (True, 0.5, [1])]:
        manager = BufferManager(DataNodeParams(force_sync_enable=enabled, force_sync_watermark=watermark))
        manager.register(CHANNEL, make_wb(CHANNEL))
        manager.register(OTHER, make_wb(OTHER))
        _fill(manager, CHANNEL, 1, 0, 3_000 - 24)
        _fill(manager, CHANNEL, 2, 10, 1_000 - 24)
        _fill(manager, OTHER, 3, 0, 2_000 - 24)
        packs = manager.memory_check(total)
        assert [p.segment_id for p in packs] == expect


def test_memory_check_evicts_until_under_the_watermark():
    manager = BufferManager(DataNodeParams(force_sync_watermark=0.2))
    manager.register(CHANNEL, make_wb(CHANNEL))
    manager.register(OTHER, make_wb(OTHER))
    _fill(manager, CHANNEL, 1, 0, 3_000 - 24)
    _fill(manager, CHANNEL, 2, 10, 1_000 - 24)
    _fill(manager, OTHER, 3, 0, 2_000 - 24)
    packs = manager.memory_check(10_000)
    assert [p.segment_id for p in packs] == [1, 3]
    assert sum(manager.get_buffer(ch).memory_size() for ch in manager.channels) < 2_000


def test_memory_check_returns_when_a_round_frees_nothing():
    """A buffer no sync can take (its segment is not in the metacache) would make Go's loop spin; one
    pass of the model returns."""
    manager = BufferManager(DataNodeParams(force_sync_watermark=0.1))
    wb = make_wb()
    manager.register(CHANNEL, wb)
    _fill(manager, CHANNEL, 1, 0, 5_000)
    wb.metacache.remove_segments(lambda s: s.segment_id == 1)
    assert manager.memory_check(10_000) == []
    assert wb.has_segment(1)


def test_memory_check_rejects_a_non_positive_memory():
    with pytest.raises(ValueError, match="total_memory_bytes"):
        BufferManager(DataNodeParams()).memory_check(0)


# ---------------------------------------------------------------------------------------------------
# flush handshake (quirk 7)


def test_notify_resets_flush_ts_only_strictly_after_it(manager):
    manager.register(CHANNEL, make_wb())
    manager.buffer_data(CHANNEL, [], [], pos(ts(0)), pos(ts(10)))
    manager.flush_channel(CHANNEL, ts(10))
    assert manager.get_checkpoint(CHANNEL) == (pos(ts(10)), True)
    assert not manager.notify_checkpoint_updated(CHANNEL, ts(9))
    assert not manager.notify_checkpoint_updated(CHANNEL, ts(10))
    assert manager.get_checkpoint(CHANNEL)[1]  # cp == flushTs: need_update stays true (quirk 7)
    assert manager.notify_checkpoint_updated(CHANNEL, ts(10) + 1)
    assert manager.get_buffer(CHANNEL).get_flush_timestamp() == 0
    assert manager.get_checkpoint(CHANNEL) == (pos(ts(10)), False)


def test_notify_ignores_unknown_channels_and_absent_flushes(manager):
    assert not manager.notify_checkpoint_updated(CHANNEL, ts(5))
    manager.register(CHANNEL, make_wb())
    assert not manager.notify_checkpoint_updated(CHANNEL, ts(5))


def test_bug_switch_reset_flush_ts_inclusive_closes_the_flush_at_equality():
    manager = BufferManager(DataNodeParams(), reset_flush_ts_inclusive=True)
    manager.register(CHANNEL, make_wb())
    manager.buffer_data(CHANNEL, [], [], pos(ts(0)), pos(ts(10)))
    manager.flush_channel(CHANNEL, ts(10))
    assert manager.notify_checkpoint_updated(CHANNEL, ts(10))
    assert manager.get_checkpoint(CHANNEL) == (pos(ts(10)), False)


def test_flush_channel_before_register_is_channel_not_found(manager):
    with pytest.raises(ChannelNotFoundError):
        manager.flush_channel(CHANNEL, ts(1))
