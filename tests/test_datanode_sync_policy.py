"""The write buffer's sync policies (``milvus_edu.datanode.writebuffer.sync_policy``).

Ports Milvus 2.5 ``internal/flushcommon/writebuffer/sync_policy_test.go`` (``SyncPolicySuite``: all five
tests), then pins the jitter, the flush-ts rule and the oldest-buffer order.
"""

from __future__ import annotations

import random

from milvus_edu.datanode.metacache import MetaCache
from milvus_edu.datanode.writebuffer import (
    NON_FLUSH_TS,
    SegmentBuffer,
    get_dropped_segment_policy,
    get_flush_ts_policy,
    get_full_buffer_policy,
    get_oldest_buffer_policy,
    get_sealed_segments_policy,
    get_sync_stale_buffer_policy,
)
from milvus_edu.proto import MsgPosition, SegmentInfo as SegmentInfoPB, SegmentState
from milvus_edu.tsoutil import compose_ts

PHYS0 = 1_700_000_000_000  # ms
MINUTE_MS = 60_000
MINUTE_NS = 60 * 1_000_000_000


def ts(ms: int) -> int:
    return compose_ts(PHYS0 + ms, 0)


def buf_starting_at(segment_id: int, timestamp: int | None) -> SegmentBuffer:
    buf = SegmentBuffer(segment_id)
    if timestamp is not None:
        buf.insert_buffer.start_pos = MsgPosition("ch", 1, timestamp)
    return buf


def cache_with(states: dict[int, str]) -> MetaCache:
    cache = MetaCache(1, "ch")
    for seg, state in states.items():
        cache.add_segment(SegmentInfoPB(id=seg, collection_id=1, partition_id=1, insert_channel="ch", state=state))
    return cache


def test_sync_full_buffer():
    """Ports ``TestSyncFullBuffer``."""
    buf = SegmentBuffer(100)
    policy = get_full_buffer_policy()
    assert policy.select_segments([buf], 0) == []
    buf.insert_buffer.size = buf.insert_buffer.size_limit + 1
    assert policy.select_segments([buf], 0) == [100]
    assert policy.reason == "buffer full"


def test_sync_full_delta_buffer():
    """A full delete buffer makes the segment full too (``IsFull`` = insert or delta)."""
    buf = SegmentBuffer(7)
    buf.delta_buffer.size = buf.delta_buffer.size_limit
    assert get_full_buffer_policy().select_segments([buf], 0) == [7]


def test_sync_stale_policy():
    """Ports ``TestSyncStalePolicy``: 2-minute period; empty never, 3 minutes old yes, 1 minute no."""
    policy = get_sync_stale_buffer_policy(2 * MINUTE_NS, random.Random(1))
    now = ts(10 * MINUTE_MS)
    assert policy.select_segments([buf_starting_at(100, None)], now) == []
    assert policy.select_segments([buf_starting_at(100, ts(7 * MINUTE_MS))], now) == [100]
    assert policy.select_segments([buf_starting_at(100, ts(9 * MINUTE_MS))], now) == []
    assert policy.reason == "buffer stale"


def test_stale_jitter_is_below_ten_percent_and_drawn_per_buffer():
    """The jitter is uniform in [0, 0.1 * period): a buffer older than 1.1 periods is always stale, one
    within the period never; in between it depends on the draw, one draw per buffer per call."""
    period = 100 * 1_000_000_000
    rng = random.Random(7)
    policy = get_sync_stale_buffer_policy(period, rng)
    now = ts(1_000_000)
    bufs = [buf_starting_at(1, ts(1_000_000 - 110_001)), buf_starting_at(2, ts(1_000_000 - 100_000)),
            buf_starting_at(3, ts(1_000_000 - 105_000))]
    picks = set()
    for _ in range(200):
        chosen = policy.select_segments(bufs, now)
        assert 1 in chosen and 2 not in chosen
        picks.add(3 in chosen)
    assert picks == {True, False}
    state = rng.getstate()
    policy.select_segments([buf_starting_at(1, None), buf_starting_at(2, None)], now)
    replay = random.Random()
    replay.setstate(state)
    replay.random(), replay.random()
    assert rng.random() == replay.random()


def test_sync_dropped_policy():
    """Ports ``TestSyncDroppedPolicy``: every Dropped segment, buffered or not."""
    cache = cache_with({1: SegmentState.DROPPED, 2: SegmentState.DROPPED, 3: SegmentState.DROPPED,
                        4: SegmentState.GROWING})
    policy = get_dropped_segment_policy(cache)
    assert policy.select_segments([], ts(0)) == [1, 2, 3]
    assert policy.reason == "segment dropped"


def test_sealed_segments_policy():
    """Ports ``TestSealedSegmentsPolicy``, and its side effect: Sealed becomes Flushing."""
    cache = cache_with({1: SegmentState.SEALED, 2: SegmentState.SEALED, 3: SegmentState.SEALED,
                        4: SegmentState.GROWING})
    policy = get_sealed_segments_policy(cache)
    assert policy.select_segments([], ts(0)) == [1, 2, 3]
    assert [s.state for s in cache.get_segments_by()] == [SegmentState.FLUSHING] * 3 + [SegmentState.GROWING]
    assert policy.select_segments([], ts(0)) == []
    assert policy.reason == "segment flushing"


def test_older_buffer_policy():
    """Ports ``TestOlderBufferPolicy`` (empty, three candidates, one candidate)."""
    policy = get_oldest_buffer_policy(2)
    assert policy.select_segments([], 0) == []
    three = [buf_starting_at(100, 1), buf_starting_at(200, 2), buf_starting_at(300, 3)]
    assert sorted(policy.select_segments(three, 0)) == [100, 200]
    assert policy.select_segments([buf_starting_at(100, 1)], 0) == [100]
    assert policy.reason == "oldest buffers"


def test_oldest_buffer_policy_orders_by_min_timestamp_and_may_pick_empty_buffers():
    bufs = [buf_starting_at(1, 30), buf_starting_at(2, None), buf_starting_at(3, 10)]
    assert get_oldest_buffer_policy(1).select_segments(bufs, 0) == [3]
    assert get_oldest_buffer_policy(3).select_segments(bufs, 0) == [3, 1, 2]
    assert get_oldest_buffer_policy(0).select_segments(bufs, 0) == []


def test_flush_ts_policy_selects_known_segments_starting_before_flush_ts():
    """``GetFlushTsPolicy``: nothing until ``ts >= flushTs``; then buffers whose segment is in the
    metacache and whose data starts strictly before ``flushTs``."""
    cache = cache_with({1: SegmentState.GROWING, 2: SegmentState.GROWING, 3: SegmentState.FLUSHED})
    flush_ts = [NON_FLUSH_TS]
    policy = get_flush_ts_policy(lambda: flush_ts[0], cache)
    bufs = [buf_starting_at(1, ts(1)), buf_starting_at(2, ts(5)), buf_starting_at(3, ts(2)),
            buf_starting_at(9, ts(1))]
    assert policy.select_segments(bufs, ts(100)) == []
    flush_ts[0] = ts(5)
    assert policy.select_segments(bufs, ts(4)) == []
    assert policy.select_segments(bufs, ts(5)) == [1, 3]
    assert policy.reason == "flush ts"
