"""The DataNode metacache (``milvus_edu.datanode.metacache``).

Ports Milvus 2.5 ``internal/flushcommon/metacache/meta_cache_test.go`` (``MetaCacheSuite``) and
``actions_test.go`` (``SegmentFilterSuite``, ``SegmentActionSuite``). Left out: ``MetaCacheSuite``'s
``Test_UpdateSegmentView`` (the model has no ``UpdateSegmentView``) and ``TestMetaInfo``'s schema half (no schema).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from milvus_edu.datanode.metacache import (
    ALL_PARTITIONS_ID,
    MetaCache,
    SegmentInfo,
    finish_syncing,
    roll_stats,
    segment_actions,
    set_start_pos_recorded,
    set_start_position_if_nil,
    start_syncing,
    update_buffered_rows,
    update_checkpoint,
    update_num_of_rows,
    update_state,
    with_level,
    with_no_syncing_task,
    with_partition_id,
    with_partition_ids,
    with_segment_ids,
    with_segment_state,
    with_start_pos_not_recorded,
)
from milvus_edu.proto import MsgPosition, SegmentInfo as SegmentInfoPB, SegmentLevel, SegmentState

COLLECTION_ID = 1
VCHANNEL = "test"
PARTITION_IDS = [1, 2, 3, 4]
FLUSHED_SEGMENTS = [1, 2, 3, 4]
GROWING_SEGMENTS = [5, 6, 7, 8]


@pytest.fixture
def cache() -> MetaCache:
    """``MetaCacheSuite.SetupTest``: four flushed and four unflushed segments, one per partition."""
    flushed = [
        SegmentInfoPB(id=s, collection_id=COLLECTION_ID, partition_id=p, insert_channel=VCHANNEL,
                      state=SegmentState.FLUSHED)
        for s, p in zip(FLUSHED_SEGMENTS, PARTITION_IDS)
    ]
    unflushed = [
        SegmentInfoPB(id=s, collection_id=COLLECTION_ID, partition_id=p, insert_channel=VCHANNEL,
                      state=SegmentState.GROWING)
        for s, p in zip(GROWING_SEGMENTS, PARTITION_IDS)
    ]
    return MetaCache(COLLECTION_ID, VCHANNEL, flushed=flushed, unflushed=unflushed)


def test_meta_info_reports_the_collection(cache):
    """Ports ``TestMetaInfo`` (collection half)."""
    assert cache.collection_id == COLLECTION_ID
    assert cache.vchannel == VCHANNEL


def test_add_segment_applies_actions_and_filters_by_state(cache):
    """Ports ``TestAddSegment``."""
    test_segs = [100, 101, 102]
    for seg in test_segs:
        cache.add_segment(SegmentInfoPB(id=seg, collection_id=COLLECTION_ID, partition_id=10, insert_channel=VCHANNEL),
                          update_state(SegmentState.FLUSHED))
    segments = cache.get_segments_by(with_segment_ids(*test_segs))
    assert len(segments) == 3
    for seg in segments:
        assert seg.state == SegmentState.FLUSHED
        assert seg.partition_id == 10
        assert cache.get_segment_by_id(seg.segment_id, with_segment_state(SegmentState.FLUSHED)) is seg
        assert cache.get_segment_by_id(seg.segment_id, with_segment_state(SegmentState.GROWING)) is None
    assert sorted(s.segment_id for s in segments) == test_segs


def test_update_segments_changes_the_state(cache):
    """Ports ``TestUpdateSegments``."""
    cache.update_segments(update_state(SegmentState.FLUSHED), with_segment_ids(5))
    segments = cache.get_segments_by(with_segment_ids(5))
    assert len(segments) == 1
    assert segments[0].state == SegmentState.FLUSHED


def test_remove_segments_needs_a_filter(cache):
    """Ports ``TestRemoveSegments``."""
    assert cache.remove_segments() == []
    assert sorted(cache.remove_segments(with_segment_ids(*FLUSHED_SEGMENTS))) == FLUSHED_SEGMENTS
    for seg in FLUSHED_SEGMENTS:
        assert cache.get_segment_by_id(seg) is None


def test_predict_segments_uses_the_pk_statistics(cache):
    """Ports ``TestPredictSegments`` (the pk statistics are exact, so no false positives)."""
    predict, ok = cache.predict_segments(100)
    assert not ok and predict == []
    cache.update_segments(roll_stats([1, 2, 3, 4, 5, 6, 7]), with_segment_ids(1))
    only_one = lambda s: s.segment_id == 1  # noqa: E731 - Go's SegmentFilterFunc
    predict, ok = cache.predict_segments(100, only_one)
    assert not ok and predict == []
    predict, ok = cache.predict_segments(5, only_one)
    assert ok and predict == [1]


def test_detect_missing_segments_names_the_unknown_ids(cache):
    """Ports ``Test_DetectMissingSegments``."""
    assert cache.detect_missing_segments(range(1, 11)) == [9, 10]


def test_unflushed_segments_are_forced_to_growing():
    """``init``: an unflushed segment that DataCoord calls Sealed or Flushing is Growing here; flushed
    segments keep their state, and both count their rows as flushed with their start recorded."""
    cache = MetaCache(COLLECTION_ID, VCHANNEL,
                      flushed=[SegmentInfoPB(id=1, collection_id=1, partition_id=1, insert_channel=VCHANNEL,
                                             state=SegmentState.FLUSHING, num_of_rows=7)],
                      unflushed=[SegmentInfoPB(id=2, collection_id=1, partition_id=1, insert_channel=VCHANNEL,
                                               state=SegmentState.SEALED, num_of_rows=3)])
    assert cache.get_segment_by_id(1).state == SegmentState.FLUSHING
    assert cache.get_segment_by_id(2).state == SegmentState.GROWING
    assert cache.get_segment_by_id(1).flushed_rows == 7
    assert cache.get_segment_by_id(2).start_pos_recorded


def test_updates_replace_segments_and_leave_held_copies_alone(cache):
    """``UpdateSegments`` clones: a ``SegmentInfo`` a caller holds never changes under it."""
    held = cache.get_segment_by_id(5)
    cache.update_segments(update_state(SegmentState.SEALED), with_segment_ids(5))
    assert held.state == SegmentState.GROWING
    assert cache.get_segment_by_id(5).state == SegmentState.SEALED


def test_state_and_id_filters_combine(cache):
    """``rangeWithFilter``: id and state criteria must both hold."""
    assert cache.get_segment_ids_by(with_segment_ids(1, 5), with_segment_state(SegmentState.GROWING)) == [5]
    assert cache.get_segment_ids_by(with_segment_ids(), with_segment_state(SegmentState.GROWING)) == []


# ---------------------------------------------------------------------------------------------------
# actions_test.go

def test_filters():
    """Ports ``SegmentFilterSuite.TestFilters`` (plus level, no-syncing-task and partition-list filters)."""
    info = SegmentInfo(segment_id=10001, partition_id=1002, state=SegmentState.FLUSHED)
    assert not with_partition_id(1001)(info)
    assert with_partition_id(1002)(info)
    assert with_partition_id(ALL_PARTITIONS_ID)(info)
    assert with_partition_ids([1002, 3])(info) and not with_partition_ids([3])(info)
    assert not with_segment_ids(10002)(info)
    assert with_segment_ids(10001)(info)
    assert not with_segment_state(SegmentState.GROWING)(info)
    assert with_segment_state(SegmentState.FLUSHED)(info)
    assert not with_start_pos_not_recorded()(replace(info, start_pos_recorded=True))
    assert with_start_pos_not_recorded()(replace(info, start_pos_recorded=False))
    assert with_level(SegmentLevel.L1)(info) and not with_level(SegmentLevel.L0)(info)
    assert with_no_syncing_task()(info) and not with_no_syncing_task()(replace(info, syncing_tasks=1))


def test_actions():
    """Ports ``SegmentActionSuite.TestActions`` and ``TestMergeActions``."""
    info = SegmentInfo(segment_id=1, partition_id=1, state=SegmentState.GROWING)
    cp = MsgPosition("channel_1", 1234, 20000)
    assert update_state(SegmentState.FLUSHED)(info).state == SegmentState.FLUSHED
    assert update_checkpoint(cp)(info).checkpoint == cp
    assert update_num_of_rows(2048)(info).num_of_rows == 2048
    merged = segment_actions(update_state(SegmentState.FLUSHED), update_checkpoint(cp), update_num_of_rows(2048))(info)
    assert (merged.state, merged.checkpoint, merged.num_of_rows) == (SegmentState.FLUSHED, cp, 2048)


def test_row_accounting_through_a_sync():
    """Buffered rows become syncing rows (``StartSyncing``), then flushed rows (``FinishSyncing``);
    ``NumOfRows`` counts all three throughout."""
    info = SegmentInfo(segment_id=1, partition_id=1, state=SegmentState.GROWING)
    info = update_buffered_rows(10)(info)
    info = start_syncing(10)(info)
    assert (info.buffer_rows, info.syncing_rows, info.syncing_tasks, info.num_of_rows) == (0, 10, 1, 10)
    info = update_buffered_rows(4)(info)
    info = finish_syncing(10)(info)
    assert (info.flushed_rows, info.syncing_rows, info.syncing_tasks, info.num_of_rows) == (10, 0, 0, 14)


def test_start_position_is_set_once():
    """``SetStartPositionIfNil`` keeps the first position; ``SetStartPosRecorded`` flips the flag."""
    first, second = MsgPosition("ch", 1, 10), MsgPosition("ch", 2, 20)
    info = SegmentInfo(segment_id=1, partition_id=1, state=SegmentState.GROWING)
    info = set_start_position_if_nil(second)(set_start_position_if_nil(first)(info))
    assert info.start_position == first
    assert set_start_pos_recorded(True)(info).start_pos_recorded
