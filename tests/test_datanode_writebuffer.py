"""The DataNode write buffer: segment buffers, buffering, sync packs and the channel checkpoint.

The first part ports Milvus 2.5 ``internal/flushcommon/writebuffer/{insert_buffer_test.go,
delta_buffer_test.go, write_buffer_test.go, l0_write_buffer_test.go}``. The second pins the rules of
reference §4.3 one at a time (what ``BufferData`` does, which packs are flushes or drops, what the
sync callback changes, Go's quirks). The last part is property tests: the checkpoint never passes
unsynced rows (and the bug switch breaks that), and every row is either still buffered or in exactly
one pack.

Left out: ``InsertBufferConstructSuite`` and ``L0WriteBufferSuite.TestCreateFailure`` (no schema in the
model, so no invalid-schema error), ``TestSyncSegmentsError/other_err`` (the serializer belongs to the
sync task; the write buffer has no other error to panic on).
"""

from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from milvus_edu.config import DataNodeParams
from milvus_edu.datanode.metacache import MetaCache, roll_stats, with_segment_ids
from milvus_edu.datanode.syncmgr.pack import DeleteData, InsertData
from milvus_edu.datanode.writebuffer import (
    NO_LIMIT,
    DeltaBuffer,
    InsertBuffer,
    SegmentBuffer,
    TimeRange,
    WriteBuffer,
    get_oldest_buffer_policy,
    insert_data_memory_size,
    prepare_insert,
)
from milvus_edu.merr import SegmentNotFoundError
from milvus_edu.mq.msg import DeleteMsg, InsertMsg
from milvus_edu.proto import MsgPosition, SegmentInfo as SegmentInfoPB, SegmentLevel, SegmentState
from milvus_edu.tsoutil import MAX_TIMESTAMP, compose_ts

COLLECTION_ID = 100
CHANNEL = "by-dev-rootcoord-dml_0v0"
PHYS0 = 1_700_000_000_000  # ms
L0_IDS_START = 90_000


def ts(ms: int, logical: int = 0) -> int:
    """A hybrid timestamp ``ms`` milliseconds after ``PHYS0``."""
    return compose_ts(PHYS0 + ms, logical)


def pos(timestamp: int, msg_id: int | None = None) -> MsgPosition:
    return MsgPosition(CHANNEL, timestamp if msg_id is None else msg_id, timestamp)


def insert(segment_id: int, pks, tss, partition_id: int = 1, payload_bytes: int = 0) -> InsertMsg:
    return InsertMsg(shard_name=CHANNEL, collection_id=COLLECTION_ID, partition_id=partition_id,
                     segment_id=segment_id, pks=tuple(pks), timestamps=tuple(tss), payload_bytes=payload_bytes)


def delete(pks, tss, partition_id: int = 1) -> DeleteMsg:
    return DeleteMsg(shard_name=CHANNEL, collection_id=COLLECTION_ID, partition_id=partition_id,
                     pks=tuple(pks), timestamps=tuple(tss))


def make_wb(params: DataNodeParams | None = None, cache: MetaCache | None = None, seed: int = 0,
            **switches) -> WriteBuffer:
    ids = itertools.count(L0_IDS_START)
    return WriteBuffer(CHANNEL, cache if cache is not None else MetaCache(COLLECTION_ID, CHANNEL),
                       params or DataNodeParams(), random.Random(seed), alloc_segment_id=lambda: next(ids),
                       **switches)


def buffer_at(segment_id: int, insert_start: int | None, delta_start: int | None) -> SegmentBuffer:
    """A segment buffer whose insert/delta start positions are set directly (as the Go tests do)."""
    buf = SegmentBuffer(segment_id)
    buf.insert_buffer.start_pos = None if insert_start is None else pos(insert_start)
    buf.delta_buffer.start_pos = None if delta_start is None else pos(delta_start)
    return buf


# =================================================================================================
# insert_buffer_test.go


def test_insert_buffer_basic_full_and_empty():
    """Ports ``InsertBufferSuite.TestBasic``."""
    buf = InsertBuffer()
    assert buf.is_empty() and not buf.is_full()
    buf.size = buf.size_limit + 1
    assert buf.is_full() and not buf.is_empty()


def test_insert_buffer_buffer_reports_min_timestamp_and_size():
    """Ports ``InsertBufferSuite.TestBuffer``: the start position sets MinTimestamp; the bytes added
    are the batch's memory size (model sizes: 8 B RowID + 8 B Timestamp + 8 B int pk + payload)."""
    tss = [ts(0, i) for i in range(10)]
    [group] = prepare_insert([insert(1, tss, tss, payload_bytes=5120)])
    buf = InsertBuffer()
    mem = buf.buffer(group.chunks, pos(100), pos(200))
    assert buf.min_timestamp() == 100
    assert mem == 10 * 24 + 5120 == insert_data_memory_size(group.chunks[0])
    assert buf.get_time_range() == TimeRange(tss[0], tss[-1])


def test_insert_buffer_yield_returns_every_buffered_pk():
    """Ports ``InsertBufferSuite.TestYield``."""
    assert InsertBuffer().yield_() == ()
    tss = [ts(0, i) for i in range(10)]
    buf = InsertBuffer()
    buf.buffer(prepare_insert([insert(1, tss, tss)])[0].chunks, pos(100), pos(200))
    chunks = buf.yield_()
    assert sorted(pk for c in chunks for pk in c.pks) == tss
    assert buf.yield_() == ()


# =================================================================================================
# delta_buffer_test.go


def test_delta_buffer_sizes_int64_pk():
    """Ports ``DeltaBufferSuite.TestBuffer/int64_pk``: 24 bytes a row (16 pk + 8 ts)."""
    tss = [ts(0, i) for i in range(100)]
    assert DeltaBuffer().buffer(tss, tss, pos(100), pos(200)) == 100 * 24


def test_delta_buffer_sizes_string_pk():
    """Ports ``DeltaBufferSuite.TestBuffer/string_pk``: 19 bytes a row for a 3-char key ((3+8) + 8)."""
    tss = [ts(0, i) for i in range(100)]
    assert DeltaBuffer().buffer([f"{i:03d}" for i in range(100)], tss, pos(100), pos(200)) == 100 * 19


def test_delta_buffer_yield():
    """Ports ``DeltaBufferSuite.TestYield``."""
    assert DeltaBuffer().yield_() is None
    tss = [ts(0, i) for i in range(100)]
    buf = DeltaBuffer()
    buf.buffer(tss, tss, pos(100), pos(200))
    assert buf.yield_() == DeleteData(tuple(tss), tuple(tss))


def test_delta_buffer_rejects_mismatched_rows():
    with pytest.raises(ValueError, match="timestamps"):
        DeltaBuffer().buffer([1, 2], [5], pos(1), pos(2))


def test_buffer_statistics_keep_extreme_positions():
    """``UpdateStatistics``: start = smallest position ts seen, end = largest, whatever the order."""
    buf = DeltaBuffer()
    buf.buffer([1], [ts(5)], pos(ts(4)), pos(ts(6)))
    buf.buffer([2], [ts(2)], pos(ts(1)), pos(ts(3)))
    buf.buffer([3], [ts(9)], pos(ts(8)), pos(ts(10)))
    assert (buf.start_pos.timestamp, buf.end_pos.timestamp) == (ts(1), ts(10))
    assert buf.get_time_range() == TimeRange(ts(2), ts(9))
    assert (buf.rows, buf.row_limit) == (3, NO_LIMIT)


def test_segment_buffer_min_timestamp_and_earliest_position():
    """``segmentBuffer``: MinTimestamp/EarliestPosition over both buffers; MaxUint64 when empty."""
    empty = SegmentBuffer(1)
    assert empty.min_timestamp() == MAX_TIMESTAMP and empty.earliest_position() is None
    buf = buffer_at(2, 440, 400)
    assert buf.min_timestamp() == 400 and buf.earliest_position() == pos(400)
    assert buffer_at(3, 550, None).earliest_position() == pos(550)


# =================================================================================================
# write_buffer_test.go


def test_has_segment():
    """Ports ``WriteBufferSuite.TestHasSegment``."""
    wb = make_wb()
    assert not wb.has_segment(1001)
    wb.buffer_data([insert(1001, [1], [ts(1)])], [], pos(ts(0)), pos(ts(2)))
    assert wb.has_segment(1001)


def test_seal_segments_marks_growing_as_sealed():
    """Ports ``WriteBufferSuite.TestFlushSegments``; an unknown id fails and seals nothing."""
    wb = make_wb()
    wb.create_new_growing_segment(1, 1001, None)
    wb.create_new_growing_segment(1, 1002, None)
    with pytest.raises(SegmentNotFoundError, match=r"segment not found\[segment=7\]"):
        wb.seal_segments([1001, 7])
    assert wb.metacache.get_segment_by_id(1001).state == SegmentState.GROWING
    wb.seal_segments([1001])
    assert wb.metacache.get_segment_by_id(1001).state == SegmentState.SEALED
    assert wb.metacache.get_segment_by_id(1002).state == SegmentState.GROWING


@pytest.mark.parametrize(
    "case, candidate, buffers, expected",
    [
        ("use_consume_cp", None, False, 1000),
        ("use_syncing_segment_cp", 500, False, 500),
        ("use_segment_buffer_min", 500, True, 400),
        ("sync_mgr_smaller", 300, True, 300),
        ("segment_buffer_smaller", 800, True, 400),
    ],
)
def test_get_checkpoint(case, candidate, buffers, expected):
    """Ports ``WriteBufferSuite.TestGetCheckpoint`` (all five sub-tests)."""
    wb = make_wb()
    wb._checkpoint = pos(1000)
    if candidate is not None:
        wb._sync_checkpoint[(1, candidate)] = pos(candidate)
    if buffers:
        wb._buffers[2] = buffer_at(2, 440, 400)
        wb._buffers[3] = buffer_at(3, 550, 600)
    assert wb.get_checkpoint().timestamp == expected


def test_sync_segments_skips_a_segment_missing_from_metacache():
    """Ports ``WriteBufferSuite.TestSyncSegmentsError/segment_not_found``: no pack, no error, and the
    buffer stays where it is."""
    wb = make_wb()
    wb._checkpoint = pos(1000)
    wb._buffers[1] = buffer_at(1, 440, None)
    assert wb._sync_segments([1]) == []
    assert wb.has_segment(1)


def test_evict_buffer_without_checkpoint_does_nothing():
    """Ports ``WriteBufferSuite.TestEvictBuffer/no_checkpoint``."""
    wb = make_wb()
    wb._buffers[100] = SegmentBuffer(100)
    assert wb.evict_buffer(get_oldest_buffer_policy(1)) == []
    assert wb.has_segment(100)


def test_evict_buffer_syncs_the_oldest_buffer():
    """Ports ``WriteBufferSuite.TestEvictBuffer/trigger_sync``: the oldest buffer (segment 2) is cut."""
    wb = make_wb()
    wb.create_new_growing_segment(1, 2, None)
    wb._buffers[2] = buffer_at(2, 440, 400)
    wb._buffers[3] = buffer_at(3, 550, 600)
    wb._checkpoint = pos(100)
    [pack] = wb.evict_buffer(get_oldest_buffer_policy(1))
    assert (pack.segment_id, pack.start_position, pack.checkpoint) == (2, pos(400), pos(100))
    assert not wb.has_segment(2) and wb.has_segment(3)


def test_drop_partitions_marks_their_segments_dropped():
    """Ports ``WriteBufferSuite.TestDropPartitions``."""
    wb = make_wb()
    for seg, part in [(1, 100), (2, 101), (3, 100), (4, 7)]:
        wb.create_new_growing_segment(part, seg, None)
    assert wb.drop_partitions([100, 101]) == [1, 2, 3]
    states = {s.segment_id: s.state for s in wb.metacache.get_segments_by()}
    assert states == {1: SegmentState.DROPPED, 2: SegmentState.DROPPED, 3: SegmentState.DROPPED,
                      4: SegmentState.GROWING}


# =================================================================================================
# l0_write_buffer_test.go


def test_l0_buffer_data_normal_run():
    """Ports ``L0WriteBufferSuite.TestBufferData/normal_run``: inserts and deletes of the same keys are
    buffered (deletes to the L0 segment); a second delete-only pack adds 10 * 24 bytes, as Go's
    buffer-size metric goes from 5607 to 5847."""
    wb = make_wb()
    tss = [ts(0, i) for i in range(10)]
    msg = insert(1000, tss, tss, payload_bytes=10 * 512)
    del_tss = [ts(0, i + 1) for i in range(10)]
    assert wb.buffer_data([msg], [delete(tss, del_tss)], pos(100), pos(200)) == []
    first = wb.memory_size()
    assert first == 10 * 24 + 10 * 512 + 10 * 24
    assert wb.buffer_data([], [delete(tss, del_tss)], pos(100), pos(200)) == []
    assert wb.memory_size() - first == 240


# =================================================================================================
# BufferData, packs and callbacks (reference §4.3)


def test_first_insert_creates_a_growing_segment_with_unrecorded_start():
    wb = make_wb()
    wb.buffer_data([insert(7, [1, 2], [ts(1), ts(1)], partition_id=3)], [], pos(ts(0)), pos(ts(2)))
    seg = wb.metacache.get_segment_by_id(7)
    assert (seg.state, seg.partition_id, seg.level) == (SegmentState.GROWING, 3, SegmentLevel.L1)
    assert seg.start_position == pos(ts(0)) and not seg.start_pos_recorded
    assert seg.buffer_rows == 2
    wb.buffer_data([insert(7, [3], [ts(3)], partition_id=3)], [], pos(ts(2)), pos(ts(4)))
    seg = wb.metacache.get_segment_by_id(7)
    assert seg.buffer_rows == 3 and seg.start_position == pos(ts(0))
    assert wb.checkpoint == pos(ts(4))


def test_known_segment_keeps_its_state_and_gets_a_start_position_if_it_had_none():
    """``CreateNewGrowingSegment`` only adds unknown segments; ``SetStartPositionIfNil`` fills a
    segment created without one (the manager's ``CreateNewGrowingSegment`` passes nil)."""
    wb = make_wb()
    wb.create_new_growing_segment(1, 5, None)
    wb.seal_segments([5])
    wb.buffer_data([insert(5, [1], [ts(1)])], [], pos(ts(0)), pos(ts(2)))
    seg = wb.metacache.get_segment_by_id(5)
    assert seg.state == SegmentState.FLUSHING  # the sealed policy ran on this very pack
    assert seg.start_position == pos(ts(0))


def test_prepare_insert_groups_by_segment_in_first_seen_order():
    msgs = [insert(2, [1, 2], [ts(5), ts(6)]), insert(1, [3], [ts(7)], partition_id=9),
            insert(2, [1], [ts(2)], partition_id=4)]
    groups = prepare_insert(msgs)
    assert [g.segment_id for g in groups] == [2, 1]
    assert groups[0].partition_id == 4  # the last message's partition wins, as lo.SliceToMap
    assert groups[0].row_num == 3 and len(groups[0].chunks) == 2
    assert groups[0].pk_min_ts[1] == ts(2)
    assert groups[0].pk_exists(1, ts(3)) and not groups[0].pk_exists(1, ts(2)) and not groups[0].pk_exists(9, ts(9))


def test_deletes_go_to_a_new_l0_segment_per_partition():
    wb = make_wb()
    wb.buffer_data([], [delete([1], [ts(1)], partition_id=1), delete([2], [ts(1)], partition_id=2),
                        delete([3], [ts(1)], partition_id=1)], pos(ts(0)), pos(ts(2)))
    assert dict(wb.l0_segments) == {1: L0_IDS_START, 2: L0_IDS_START + 1}
    l0 = wb.metacache.get_segment_by_id(L0_IDS_START)
    assert (l0.level, l0.state, l0.start_position, l0.start_pos_recorded) == (
        SegmentLevel.L0, SegmentState.GROWING, pos(ts(0)), False)
    assert wb.buffers[L0_IDS_START].delta_buffer.rows == 2


def test_synced_l0_segment_is_forgotten_and_always_flushes():
    params = DataNodeParams(delete_buf_bytes=24)
    wb = make_wb(params)
    [pack] = wb.buffer_data([], [delete([1], [ts(1)])], pos(ts(0)), pos(ts(2)))
    assert (pack.segment_id, pack.level, pack.is_flush, pack.is_drop) == (L0_IDS_START, SegmentLevel.L0, True, False)
    assert pack.delete_data == DeleteData((1,), (ts(1),)) and pack.insert_data == ()
    assert dict(wb.l0_segments) == {}
    [second] = wb.buffer_data([], [delete([2], [ts(3)])], pos(ts(2)), pos(ts(4)))
    assert second.segment_id == L0_IDS_START + 1


def test_pack_carries_rows_positions_and_the_consumed_checkpoint():
    params = DataNodeParams(insert_buf_size=48)
    wb = make_wb(params)
    wb.buffer_data([insert(1, [1], [ts(1)])], [], pos(ts(0)), pos(ts(2)))
    [pack] = wb.buffer_data([insert(1, [2], [ts(3)])], [], pos(ts(2)), pos(ts(4)))
    assert pack.insert_data == (InsertData((1,), (ts(1),)), InsertData((2,), (ts(3),)))
    assert (pack.start_position, pack.checkpoint) == (pos(ts(0)), pos(ts(4)))
    assert (pack.ts_from, pack.ts_to, pack.batch_rows) == (ts(1), ts(3), 2)
    assert (pack.collection_id, pack.partition_id, pack.channel_name) == (COLLECTION_ID, 1, CHANNEL)
    assert (pack.is_flush, pack.is_drop, pack.level) == (False, False, SegmentLevel.L1)
    seg = wb.metacache.get_segment_by_id(1)
    assert (seg.buffer_rows, seg.syncing_rows, seg.syncing_tasks) == (0, 2, 1)
    assert dict(wb.syncing_candidates) == {(1, ts(0)): pos(ts(0))}


def test_sealed_segment_flushes_even_without_buffered_rows():
    """The sealed policy picks every Sealed segment, moves it to Flushing, and the pack is a flush; a
    segment with nothing buffered gets an empty pack with no start position (and no candidate)."""
    wb = make_wb()
    wb.buffer_data([insert(1, [1], [ts(1)])], [], pos(ts(0)), pos(ts(2)))
    wb.create_new_growing_segment(1, 2, None)
    wb.seal_segments([1, 2])
    packs = wb.buffer_data([], [], pos(ts(2)), pos(ts(4)))
    assert [(p.segment_id, p.is_flush, p.batch_rows) for p in packs] == [(1, True, 1), (2, True, 0)]
    assert packs[1].start_position is None and packs[1].insert_data == ()
    assert list(wb.syncing_candidates) == [(1, ts(0))]
    assert wb.metacache.get_segment_by_id(1).state == SegmentState.FLUSHING


def test_dropped_partition_segments_sync_as_drops_on_every_pack_until_removed():
    wb = make_wb()
    wb.buffer_data([insert(1, [1], [ts(1)])], [], pos(ts(0)), pos(ts(2)))
    wb.drop_partitions([1])
    [pack] = wb.buffer_data([], [], pos(ts(2)), pos(ts(4)))
    assert (pack.segment_id, pack.is_drop, pack.batch_rows) == (1, True, 1)
    [again] = wb.buffer_data([], [], pos(ts(4)), pos(ts(6)))
    assert (again.segment_id, again.is_drop, again.batch_rows) == (1, True, 0)


def test_flush_ts_policy_waits_for_the_consumed_position_to_reach_flush_ts():
    wb = make_wb()
    wb.buffer_data([insert(1, [1], [ts(1)])], [], pos(ts(0)), pos(ts(2)))
    wb.set_flush_timestamp(ts(5))
    assert wb.buffer_data([insert(2, [2], [ts(3)])], [], pos(ts(2)), pos(ts(4))) == []
    packs = wb.buffer_data([insert(3, [3], [ts(6)])], [], pos(ts(5)), pos(ts(7)))
    assert [p.segment_id for p in packs] == [1, 2]  # segment 3 starts at flushTs: not before it
    assert not packs[0].is_flush  # a flush-ts sync of a Growing segment is not a segment flush
    assert wb.get_flush_timestamp() == ts(5)


def test_stale_buffer_is_synced_after_the_sync_period_of_message_time():
    params = DataNodeParams(sync_period_ns=10 * 1_000_000_000)
    wb = make_wb(params)
    wb.buffer_data([insert(1, [1], [ts(1)])], [], pos(ts(0)), pos(ts(2)))
    assert wb.buffer_data([], [], pos(ts(2)), pos(ts(10_000))) == []
    [pack] = wb.buffer_data([], [], pos(ts(10_000)), pos(ts(11_001)))
    assert pack.segment_id == 1
    # the reason Go logs ("SyncPolicy selects segments") is kept until taken, once
    assert wb.take_policy_choices() == [("buffer stale", (1,))]
    assert wb.take_policy_choices() == []


def test_policy_choices_name_every_policy_that_chose_in_the_order_asked():
    wb = make_wb()
    wb.create_new_growing_segment(1, 2, None)
    wb._buffers[2] = buffer_at(2, 440, 400)
    wb._buffers[3] = buffer_at(3, 550, 600)
    wb._checkpoint = pos(100)
    wb.evict_buffer(get_oldest_buffer_policy(2), get_oldest_buffer_policy(1))
    assert wb.take_policy_choices() == [("oldest buffers", (2, 3)), ("oldest buffers", (2,))]


def test_sync_done_success_releases_the_checkpoint_and_forgets_flushed_segments():
    wb = make_wb()
    wb.buffer_data([insert(1, [1], [ts(1)]), insert(2, [2], [ts(1)])], [], pos(ts(0)), pos(ts(2)))
    wb.seal_segments([1])
    [pack] = wb.buffer_data([insert(2, [3], [ts(3)])], [], pos(ts(2)), pos(ts(4)))
    assert wb.get_checkpoint() == pos(ts(0))
    wb.sync_done(pack, None)
    assert dict(wb.syncing_candidates) == {}
    assert wb.metacache.get_segment_by_id(1) is None
    assert wb.get_checkpoint() == pos(ts(0))  # segment 2 is still buffered from ts(0)


def test_sync_done_failure_keeps_the_checkpoint_held():
    wb = make_wb()
    wb.buffer_data([insert(1, [1], [ts(1)])], [], pos(ts(0)), pos(ts(2)))
    wb.seal_segments([1])
    [pack] = wb.buffer_data([], [], pos(ts(2)), pos(ts(4)))
    wb.sync_done(pack, RuntimeError("minio down"))
    assert wb.get_checkpoint() == pos(ts(0))
    assert wb.metacache.get_segment_by_id(1) is not None
    assert wb.get_checkpoint_candidate().source == "syncing task"


def test_flushed_segment_stays_in_metacache_when_bf_stats_are_kept():
    wb = make_wb(DataNodeParams(skip_bf_stats_load=False))
    wb.buffer_data([insert(1, [1], [ts(1)])], [], pos(ts(0)), pos(ts(2)))
    wb.seal_segments([1])
    [pack] = wb.buffer_data([], [], pos(ts(2)), pos(ts(4)))
    wb.sync_done(pack, None)
    assert wb.metacache.get_segment_by_id(1) is not None
    assert wb.get_checkpoint() == pos(ts(4))


def test_checkpoint_is_none_before_the_first_pack_then_the_consumed_position():
    wb = make_wb()
    assert wb.get_checkpoint() is None and wb.get_checkpoint_candidate() is None
    wb.buffer_data([], [], pos(ts(0)), pos(ts(2)))
    assert wb.get_checkpoint() == pos(ts(2))
    assert wb.get_checkpoint_candidate() is None  # nothing buffered or syncing: Go falls back to wb.checkpoint


def test_buffer_data_needs_positions():
    with pytest.raises(ValueError, match="start and an end position"):
        make_wb().buffer_data([], [], None, pos(1))


def test_close_without_drop_abandons_and_with_drop_cuts_drop_packs():
    wb = make_wb()
    wb.buffer_data([insert(1, [1], [ts(1)]), insert(2, [2], [ts(1)])], [delete([9], [ts(1)])], pos(ts(0)), pos(ts(2)))
    assert wb.close(drop=False) == [] and len(wb.buffers) == 3
    packs = wb.close(drop=True)
    assert [(p.segment_id, p.is_drop) for p in packs] == [(1, True), (2, True), (L0_IDS_START, True)]
    assert packs[2].is_flush and len(wb.buffers) == 0


def test_bloom_filter_path_keeps_only_deletes_that_may_hit():
    """``dispatchDeleteMsgs`` (``dataNode.skip.BFStats.Load=false``): a delete is kept if a segment of its
    partition holds the key, or this pack inserted it at an *earlier* timestamp."""
    cache = MetaCache(COLLECTION_ID, CHANNEL, flushed=[
        SegmentInfoPB(id=1, collection_id=COLLECTION_ID, partition_id=1, insert_channel=CHANNEL,
                      state=SegmentState.FLUSHED)])
    cache.update_segments(roll_stats([10, 11]), with_segment_ids(1))
    wb = make_wb(DataNodeParams(skip_bf_stats_load=False), cache)
    wb.buffer_data(
        [insert(2, [20, 21], [ts(1), ts(3)])],
        [delete([10, 12, 20, 21], [ts(2), ts(2), ts(2), ts(3)]), delete([11], [ts(2)], partition_id=2)],
        pos(ts(0)), pos(ts(4)),
    )
    l0_p1, l0_p2 = wb.l0_segments[1], wb.l0_segments[2]
    assert wb.buffers[l0_p1].delta_buffer.yield_() == DeleteData((10, 20), (ts(2), ts(2)))
    assert not wb.has_segment(l0_p2)  # created, but nothing hit in partition 2
    assert wb.metacache.get_segment_by_id(l0_p2).level == SegmentLevel.L0
    assert wb.metacache.get_segment_by_id(2).pk_stats == frozenset({20, 21})


def test_evicted_l0_segment_keeps_its_partition_mapping_quirk():
    """Go quirk: ``EvictBuffer`` (memory force-sync) does not forget a synced L0 segment, only
    ``BufferData`` does. Once the flush removes it from the metacache, the partition's next deletes
    land in a buffer no sync can take (segment not found), and that buffer pins the checkpoint."""
    wb = make_wb()
    wb.buffer_data([], [delete([1], [ts(1)])], pos(ts(0)), pos(ts(2)))
    [pack] = wb.evict_buffer(get_oldest_buffer_policy(1))
    assert pack.segment_id == L0_IDS_START and pack.is_flush
    wb.sync_done(pack, None)
    assert wb.metacache.get_segment_by_id(L0_IDS_START) is None
    assert dict(wb.l0_segments) == {1: L0_IDS_START}
    wb.buffer_data([], [delete([2], [ts(3)])], pos(ts(2)), pos(ts(4)))
    assert wb.evict_buffer(get_oldest_buffer_policy(1)) == []
    for step in range(3, 8):
        wb.buffer_data([], [], pos(ts(2 * step)), pos(ts(2 * step + 2)))
    assert wb.get_checkpoint() == pos(ts(2))
    assert wb.has_segment(L0_IDS_START)


def test_bug_switch_checkpoint_ignores_syncing_segments_jumps_past_syncing_rows():
    """``checkpoint_ignores_syncing_segments``: while a sync is in flight, the faithful checkpoint stays
    at the pack's start; with the switch it moves to the last consumed position."""
    results = {}
    for switch in (False, True):
        wb = make_wb(checkpoint_ignores_syncing_segments=switch)
        wb.buffer_data([insert(1, [1], [ts(1)])], [], pos(ts(0)), pos(ts(2)))
        wb.seal_segments([1])
        wb.buffer_data([], [], pos(ts(2)), pos(ts(4)))
        results[switch] = wb.get_checkpoint()
    assert results == {False: pos(ts(0)), True: pos(ts(4))}


# =================================================================================================
# properties


@st.composite
def operations(draw):
    """A sequence of write-buffer operations over three segments in two partitions."""
    ops = draw(st.lists(st.one_of(
        st.tuples(st.just("insert"), st.integers(1, 3), st.integers(1, 3)),
        st.tuples(st.just("delete"), st.integers(1, 2), st.integers(1, 2)),
        st.tuples(st.just("tick"), st.integers(0, 5), st.just(0)),
        st.tuples(st.just("seal"), st.integers(1, 3), st.just(0)),
        st.tuples(st.just("flush"), st.integers(0, 3), st.just(0)),
        st.tuples(st.just("evict"), st.integers(1, 2), st.just(0)),
        st.tuples(st.just("done"), st.integers(0, 5), st.booleans()),
        st.tuples(st.just("drop_partition"), st.integers(1, 2), st.just(0)),
    ), max_size=40))
    return ops


class Harness:
    """Drives a write buffer from generated operations, with time ticks every 100 ms of message time
    and unique primary keys, and tracks what went where."""

    def __init__(self, wb: WriteBuffer):
        self.wb = wb
        self.now_ms = 0
        self.pks = itertools.count(1)
        self.pending: list = []  # packs handed out and not yet synced successfully
        self.inserted: set = set()
        self.deleted: set = set()
        self.packed_inserts: list = []
        self.packed_deletes: list = []

    def _pack(self, inserts, deletes):
        start = pos(ts(self.now_ms))
        self.now_ms += 100
        end = pos(ts(self.now_ms))
        self._track(self.wb.buffer_data(inserts, deletes, start, end))

    def _track(self, packs):
        for p in packs:
            self.packed_inserts.extend(pk for c in p.insert_data for pk in c.pks)
            if p.delete_data is not None:
                self.packed_deletes.extend(p.delete_data.pks)
        self.pending.extend(packs)

    def apply(self, op):
        kind, a, b = op
        row_ts = ts(self.now_ms + 50)
        if kind == "insert":
            pks = [next(self.pks) for _ in range(b)]
            self.inserted.update(pks)
            self._pack([insert(a, pks, [row_ts] * b, partition_id=1 + a % 2)], [])
        elif kind == "delete":
            pks = [next(self.pks) for _ in range(b)]
            self.deleted.update(pks)
            self._pack([], [delete(pks, [row_ts] * b, partition_id=a)])
        elif kind == "tick":
            for _ in range(a):
                self._pack([], [])
        elif kind == "seal":
            if self.wb.metacache.get_segment_by_id(a) is not None:
                self.wb.seal_segments([a])
        elif kind == "flush":
            self.wb.set_flush_timestamp(0 if a == 0 else ts(self.now_ms + 1))
        elif kind == "evict":
            self._track(self.wb.evict_buffer(get_oldest_buffer_policy(a)))
        elif kind == "done" and self.pending:
            pack = self.pending.pop(a % len(self.pending))
            if b:
                self.wb.sync_done(pack, None)
            else:
                self.wb.sync_done(pack, RuntimeError("sync failed"))
                self.pending.append(pack)
        elif kind == "drop_partition":
            self.wb.drop_partitions([a])

    def earliest_unsynced_start(self) -> int | None:
        starts = [p.start_position.timestamp for p in self.pending if p.start_position is not None]
        starts += [b.min_timestamp() for b in self.wb.buffers.values() if b.earliest_position() is not None]
        return min(starts, default=None)


SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.slow
@SETTINGS
@given(ops=operations(), small=st.booleans())
def test_property_checkpoint_never_passes_unsynced_rows(ops, small):
    """(a) After every step, the checkpoint is at or before the start of every row that is still
    buffered or in a pack whose sync has not succeeded."""
    params = DataNodeParams(insert_buf_size=64, delete_buf_bytes=48) if small else DataNodeParams()
    h = Harness(make_wb(params))
    for op in ops:
        h.apply(op)
        earliest = h.earliest_unsynced_start()
        cp = h.wb.get_checkpoint()
        if earliest is not None:
            assert cp is not None and cp.timestamp <= earliest


def test_property_checkpoint_switch_breaks_it_on_some_sequence():
    """(a), with ``checkpoint_ignores_syncing_segments``: a sync in flight no longer holds the
    checkpoint, so it passes the rows of that pack."""
    h = Harness(make_wb(checkpoint_ignores_syncing_segments=True))
    for op in [("insert", 1, 2), ("seal", 1, 0), ("tick", 1, 0)]:
        h.apply(op)
    assert h.pending and h.wb.get_checkpoint().timestamp > h.earliest_unsynced_start()


@SETTINGS
@given(ops=operations(), small=st.booleans(), drop_at_end=st.booleans())
def test_property_every_row_is_buffered_or_in_exactly_one_pack(ops, small, drop_at_end):
    """(b) Rows in = rows in packs + rows still buffered, and no row is in two places."""
    params = DataNodeParams(insert_buf_size=64, delete_buf_bytes=48) if small else DataNodeParams()
    h = Harness(make_wb(params))
    for op in ops:
        h.apply(op)
    if drop_at_end:
        h._track(h.wb.close(drop=True))
        known = {s.segment_id for s in h.wb.metacache.get_segments_by()}
        assert not set(h.wb.buffers) & known  # only buffers no sync can take survive a drop
    buffered_inserts = [pk for b in h.wb.buffers.values() for c in b.insert_buffer.yield_() for pk in c.pks]
    buffered_deletes = [pk for b in h.wb.buffers.values() for pk in (b.delta_buffer.yield_() or DeleteData()).pks]
    all_inserts = h.packed_inserts + buffered_inserts
    all_deletes = h.packed_deletes + buffered_deletes
    assert sorted(all_inserts) == sorted(h.inserted)
    assert len(set(all_inserts)) == len(all_inserts)
    assert sorted(all_deletes) == sorted(h.deleted)
    assert len(set(all_deletes)) == len(all_deletes)
